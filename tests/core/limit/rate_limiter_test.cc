#include "core/limit/rate_limiter.h"

#include <gtest/gtest.h>

namespace kvgate::limit {
namespace {

constexpr Nanos kMinute = 60 * kSecond;

Rule tokens_per_minute(double limit) {
  return {.name = "tokens-per-minute", .measure = Measure::kTotalTokens, .limit = limit};
}

TEST(RateLimiter, TheRequestThatCrossesCompletesTheNextIsRefused) {
  MemoryCounterStore store;
  RateLimiter limiter(store, FailurePolicy::kOpen);
  std::vector<Rule> rules{tokens_per_minute(1000)};
  Nanos t = 10 * kMinute;  // window start
  ASSERT_TRUE(limiter.check("acme", "m", rules, t).allowed);
  ASSERT_TRUE(limiter.charge("acme", "m", rules, {600, 0}, t + kSecond));
  // 600 < 1000: admitted, and this one will cross the limit when it finishes.
  ASSERT_TRUE(limiter.check("acme", "m", rules, t + 2 * kSecond).allowed);
  ASSERT_TRUE(limiter.charge("acme", "m", rules, {500, 300}, t + 3 * kSecond));
  LimitDecision d = limiter.check("acme", "m", rules, t + 4 * kSecond);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule, "tokens-per-minute");
  EXPECT_DOUBLE_EQ(d.used, 1400);
  EXPECT_DOUBLE_EQ(d.limit, 1000);
  // Other tenants are not affected.
  EXPECT_TRUE(limiter.check("other", "m", rules, t + 4 * kSecond).allowed);
}

TEST(RateLimiter, SlidingWindowDecaysAndRetryAfterIsExact) {
  MemoryCounterStore store;
  RateLimiter limiter(store, FailurePolicy::kOpen);
  std::vector<Rule> rules{tokens_per_minute(1000)};
  Nanos t = 10 * kMinute;
  ASSERT_TRUE(limiter.charge("a", "m", rules, {2000, 0}, t + 30 * kSecond));
  LimitDecision d = limiter.check("a", "m", rules, t + 40 * kSecond);
  ASSERT_FALSE(d.allowed);
  // Next window: 2000 x (1 - f) < 1000 once f > 0.5, i.e. 30 s into it: 50 s from now.
  EXPECT_NEAR(static_cast<double>(d.retry_after), static_cast<double>(50 * kSecond), 1e6);
  EXPECT_EQ(d.retry_after_seconds(), 50);
  EXPECT_FALSE(limiter.check("a", "m", rules, t + kMinute + 29 * kSecond).allowed);
  EXPECT_TRUE(limiter.check("a", "m", rules, t + kMinute + 31 * kSecond).allowed);
  // Two windows later nothing is left.
  EXPECT_TRUE(limiter.check("a", "m", rules, t + 3 * kMinute).allowed);
}

TEST(RateLimiter, RequestRulesCountAdmissions) {
  MemoryCounterStore store;
  RateLimiter limiter(store, FailurePolicy::kOpen);
  std::vector<Rule> rules{{.name = "rpm", .measure = Measure::kRequests, .limit = 3}};
  Nanos t = 5 * kMinute;
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.check("a", "m", rules, t + i).allowed) << i;
  LimitDecision d = limiter.check("a", "m", rules, t + 10);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule, "rpm");
}

TEST(RateLimiter, PerModelRulesAndWeights) {
  MemoryCounterStore store;
  RateLimiter limiter(store, FailurePolicy::kOpen);
  std::vector<Rule> rules{
      {.name = "big-model-completion",
       .measure = Measure::kCompletionTokens,
       .limit = 100,
       .model = "big"},
      {.name = "weighted",
       .measure = Measure::kTotalTokens,
       .limit = 1000,
       .prompt_weight = 0.25,
       .completion_weight = 4},
  };
  Nanos t = 7 * kMinute;
  ASSERT_TRUE(limiter.charge("a", "small", rules, {400, 150}, t));  // 0.25x400 + 4x150 = 700
  EXPECT_TRUE(limiter.check("a", "big", rules, t + 1).allowed);     // big's rule untouched
  ASSERT_TRUE(limiter.charge("a", "big", rules, {0, 100}, t + 2));  // 100 big; weighted 1000
  LimitDecision d = limiter.check("a", "small", rules, t + 3);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule, "weighted");
  EXPECT_DOUBLE_EQ(d.used, 1100);
}

class FailingStore : public CounterStore {
 public:
  Result<std::vector<int64_t>> get(std::span<const std::string>, Nanos) override {
    return Error("connection refused");
  }
  Status add(std::span<const Increment>, Nanos) override { return Error("connection refused"); }
};

TEST(RateLimiter, StoreFailureFollowsThePolicy) {
  FailingStore store;
  std::vector<Rule> rules{tokens_per_minute(10)};
  RateLimiter open(store, FailurePolicy::kOpen);
  LimitDecision d = open.check("a", "m", rules, 0);
  EXPECT_TRUE(d.allowed);
  EXPECT_TRUE(d.store_error);
  EXPECT_EQ(d.error, "connection refused");
  RateLimiter closed(store, FailurePolicy::kClosed);
  d = closed.check("a", "m", rules, 0);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule, "store");
  EXPECT_FALSE(closed.charge("a", "m", rules, {5, 5}, 0));
  EXPECT_EQ(closed.store_failures(), 2u);
}

TEST(MemoryCounterStore, KeysExpire) {
  MemoryCounterStore store;
  std::vector<Increment> inc{{"k", 5, 10 * kSecond}};
  ASSERT_TRUE(store.add(inc, 0));
  std::vector<std::string> keys{"k", "absent"};
  EXPECT_EQ(*store.get(keys, 5 * kSecond), (std::vector<int64_t>{5, 0}));
  EXPECT_EQ(*store.get(keys, 11 * kSecond), (std::vector<int64_t>{0, 0}));
  ASSERT_TRUE(store.add(inc, 30 * kSecond));  // sweeps the expired counter
  EXPECT_EQ(store.size(), 1u);
}

TEST(Measure, ParseAndPrint) {
  for (auto m : {Measure::kRequests, Measure::kPromptTokens, Measure::kCompletionTokens,
                 Measure::kTotalTokens}) {
    EXPECT_EQ(parse_measure(to_string(m)), m);
  }
  EXPECT_FALSE(parse_measure("tokens"));
}

TEST(RateLimiter, UsageViewReadsEveryRuleAndChargesNothing) {
  MemoryCounterStore store;
  RateLimiter limiter(store, FailurePolicy::kOpen);
  std::vector<Rule> rules{
      tokens_per_minute(1000),
      {.name = "requests", .measure = Measure::kRequests, .limit = 5},
      {.name = "tokens:other", .measure = Measure::kTotalTokens, .limit = 10, .model = "other"}};
  const Nanos t = 10 * kMinute;
  ASSERT_TRUE(limiter.check("acme", "m", rules, t).allowed);
  ASSERT_TRUE(limiter.charge("acme", "m", rules, {300, 100}, t + kSecond));
  // Half way into the next window: the previous one's count weighs half.
  const Nanos now = t + kMinute + 30 * kSecond;
  const std::vector<std::string> keys = limiter.usage_keys("acme", rules, now);
  ASSERT_EQ(keys.size(), 6u);  // the rule for another model too
  auto values = store.get(keys, now);
  ASSERT_TRUE(values.ok());
  const std::vector<double> used = RateLimiter::usage(rules, *values, now);
  ASSERT_EQ(used.size(), 3u);
  EXPECT_DOUBLE_EQ(used[0], 200);
  EXPECT_DOUBLE_EQ(used[1], 0.5);
  EXPECT_DOUBLE_EQ(used[2], 0);
  // Reading charged nothing.
  values = store.get(keys, now);
  EXPECT_EQ(RateLimiter::usage(rules, *values, now), used);
}

}  // namespace
}  // namespace kvgate::limit
