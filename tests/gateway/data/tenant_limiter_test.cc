// GCC 12 reports a false -Wmismatched-new-delete on Asio coroutine frames (GCC bug 109224).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include "gateway/data/tenant_limiter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <thread>

namespace kvgate::gateway {
namespace {

constexpr Nanos kT0 = 1000 * 60 * kSecond;  // a window start

TEST(TenantLimiter, KeysFileLimitsBecomeRules) {
  auto rules = TenantLimiter::rules_for({.tokens_per_minute = 1000, .requests_per_minute = 10});
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_EQ(rules[0].name, "tokens_per_minute");
  EXPECT_EQ(rules[0].measure, limit::Measure::kTotalTokens);
  EXPECT_EQ(rules[0].limit, 1000);
  EXPECT_EQ(rules[0].window, 60 * kSecond);
  EXPECT_EQ(rules[1].name, "requests_per_minute");
  EXPECT_EQ(rules[1].measure, limit::Measure::kRequests);
  EXPECT_TRUE(TenantLimiter::rules_for({}).empty());
}

TEST(TenantLimiter, RefusesOnlyOnceOverAndPerTenant) {
  TenantLimiter limiter(RateLimitConfig{});
  Tenant a{.name = "a", .limits = {.tokens_per_minute = 50}};
  Tenant b{.name = "b", .limits = {.tokens_per_minute = 50}};
  Tenant free{.name = "free"};
  EXPECT_FALSE(TenantLimiter::limited(free));
  EXPECT_TRUE(limiter.check(free, "m", kT0).decision.allowed);
  ASSERT_TRUE(limiter.check(a, "m", kT0).decision.allowed);
  ASSERT_TRUE(limiter.charge(a, "m", {.prompt_tokens = 30, .completion_tokens = 5}, kT0));
  ASSERT_TRUE(limiter.check(a, "m", kT0 + kSecond).decision.allowed);  // 35 < 50
  ASSERT_TRUE(limiter.charge(a, "m", {.prompt_tokens = 30, .completion_tokens = 5}, kT0));
  auto c = limiter.check(a, "m", kT0 + 2 * kSecond);
  EXPECT_FALSE(c.decision.allowed);
  EXPECT_FALSE(c.store_failed);
  EXPECT_EQ(c.decision.rule, "tokens_per_minute");
  EXPECT_GE(c.decision.retry_after_seconds(), 1);
  EXPECT_TRUE(limiter.check(b, "m", kT0 + 2 * kSecond).decision.allowed);
}

TEST(TenantLimiter, UsageShowsEveryRuleAgainstItsLimit) {
  TenantLimiter limiter(RateLimitConfig{});
  Tenant a{.name = "a", .limits = {.tokens_per_minute = 100, .requests_per_minute = 10}};
  Tenant free{.name = "free"};
  ASSERT_TRUE(limiter.check(a, "m", kT0).decision.allowed);
  ASSERT_TRUE(limiter.charge(a, "m", {.prompt_tokens = 30, .completion_tokens = 10}, kT0));
  boost::asio::io_context io;
  auto f = boost::asio::co_spawn(io, limiter.usage_async({&a, &free}, kT0 + kSecond),
                                 boost::asio::use_future);
  io.run();
  const TenantLimiter::Usage u = f.get();
  EXPECT_FALSE(u.store_failed);
  EXPECT_FALSE(limiter.shared_store());
  ASSERT_EQ(u.tenants.size(), 2u);
  EXPECT_EQ(u.tenants[0].tenant, "a");
  ASSERT_EQ(u.tenants[0].rules.size(), 2u);
  EXPECT_EQ(u.tenants[0].rules[0].rule, "tokens_per_minute");
  EXPECT_DOUBLE_EQ(u.tenants[0].rules[0].limit, 100);
  EXPECT_DOUBLE_EQ(u.tenants[0].rules[0].used, 40);
  EXPECT_EQ(u.tenants[0].rules[1].rule, "requests_per_minute");
  EXPECT_DOUBLE_EQ(u.tenants[0].rules[1].used, 1);
  EXPECT_TRUE(u.tenants[1].rules.empty());  // no limits
  // Looking charged nothing: the next check sees the same.
  EXPECT_TRUE(limiter.check(a, "m", kT0 + 2 * kSecond).decision.allowed);
}

TEST(TenantLimiter, RequestsPerMinuteAndConcurrentCallers) {
  TenantLimiter limiter(RateLimitConfig{});
  Tenant t{.name = "t", .limits = {.tokens_per_minute = 1'000'000, .requests_per_minute = 400}};
  std::vector<std::thread> threads;
  std::atomic<int> admitted{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int j = 0; j < 150; ++j) {
        if (limiter.check(t, "m", kT0).decision.allowed) ++admitted;
        limiter.charge(t, "m", {.prompt_tokens = 1}, kT0);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(admitted.load(), 400);  // exactly the budget, under concurrency
}

TEST(TenantLimiter, PerModelBudgetsAndWeightsCountApart) {
  TenantLimiter limiter(RateLimitConfig{});
  // Completion tokens only; 100 for all models together, 20 of them at most on "big".
  Tenant t{.name = "t",
           .limits = {.tokens_per_minute = 100,
                      .prompt_weight = 0,
                      .completion_weight = 1,
                      .models = {{.model = "big", .tokens_per_minute = 20}}}};
  auto rules = TenantLimiter::rules_for(t.limits);
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_EQ(rules[1].name, "tokens_per_minute:big");
  EXPECT_EQ(rules[1].model, "big");
  EXPECT_EQ(rules[0].prompt_weight, 0);
  // 1,000 prompt tokens cost nothing; 25 completion tokens cross "big"'s budget (that
  // request completed), so the next "big" request is refused, another model's is not.
  ASSERT_TRUE(limiter.check(t, "big", kT0).decision.allowed);
  ASSERT_TRUE(limiter.charge(t, "big", {.prompt_tokens = 1000, .completion_tokens = 25}, kT0));
  auto c = limiter.check(t, "big", kT0 + kSecond);
  EXPECT_FALSE(c.decision.allowed);
  EXPECT_EQ(c.decision.rule, "tokens_per_minute:big");
  EXPECT_TRUE(limiter.check(t, "small", kT0 + kSecond).decision.allowed);
  // The tenant-wide budget counts both models.
  ASSERT_TRUE(limiter.charge(t, "small", {.completion_tokens = 80}, kT0 + kSecond));
  c = limiter.check(t, "small", kT0 + 2 * kSecond);
  EXPECT_FALSE(c.decision.allowed);
  EXPECT_EQ(c.decision.rule, "tokens_per_minute");
}

}  // namespace
}  // namespace kvgate::gateway
