#include "core/kv/warmup_run.h"

#include <gtest/gtest.h>

namespace kvgate::kv {
namespace {

std::vector<HotPrefix> prefixes(size_t n) {
  std::vector<HotPrefix> out(n);
  for (size_t i = 0; i < n; ++i) out[i].key = i + 1;
  return out;
}

TEST(WarmupRunTest, SendsAtMostConcurrencyAtATimeThenFinishes) {
  WarmupRun run(prefixes(5), {.enabled = true, .budget = 10 * kSecond, .concurrency = 2}, 0);
  EXPECT_EQ(run.next(0), (std::vector<size_t>{0, 1}));
  EXPECT_TRUE(run.next(0).empty());  // two in flight
  run.done(1, {.ok = true, .prompt_tokens = 100, .cached_tokens = 0});
  EXPECT_EQ(run.next(1), (std::vector<size_t>{2}));
  run.done(0, {.ok = false});
  run.done(0, {.ok = true});  // repeated: ignored
  run.done(9, {.ok = true});  // unknown: ignored
  EXPECT_EQ(run.next(2), (std::vector<size_t>{3}));
  run.done(2, {.ok = true, .prompt_tokens = 50, .cached_tokens = 16});
  run.done(3, {.ok = true, .prompt_tokens = 10});
  EXPECT_FALSE(run.finished(3));
  EXPECT_EQ(run.next(3), (std::vector<size_t>{4}));
  run.done(4, {.ok = true, .prompt_tokens = 1});
  EXPECT_TRUE(run.finished(4));
  const WarmupStats& s = run.stats();
  EXPECT_EQ(s.planned, 5u);
  EXPECT_EQ(s.sent, 5u);
  EXPECT_EQ(s.succeeded, 4u);
  EXPECT_EQ(s.failed, 1u);
  EXPECT_EQ(s.tokens_warmed, 161u);
  EXPECT_EQ(s.tokens_cached, 16u);
  EXPECT_FALSE(s.timed_out);
}

TEST(WarmupRunTest, TheBudgetEndsItAndNothingMoreIsSent) {
  WarmupRun run(prefixes(10), {.enabled = true, .budget = 2 * kSecond, .concurrency = 3},
                5 * kSecond);
  EXPECT_EQ(run.deadline(), 7 * kSecond);
  EXPECT_EQ(run.next(5 * kSecond).size(), 3u);
  EXPECT_FALSE(run.finished(7 * kSecond - 1));
  EXPECT_TRUE(run.finished(7 * kSecond));
  EXPECT_TRUE(run.stats().timed_out);
  run.done(0, {.ok = true, .prompt_tokens = 10});  // a late answer still counts
  EXPECT_TRUE(run.next(8 * kSecond).empty());
  EXPECT_EQ(run.stats().sent, 3u);
  EXPECT_EQ(run.stats().succeeded, 1u);
}

TEST(WarmupRunTest, AnEmptySetIsFinishedAtOnce) {
  WarmupRun run({}, {.enabled = true}, 0);
  EXPECT_TRUE(run.next(0).empty());
  EXPECT_TRUE(run.finished(0));
  EXPECT_FALSE(run.stats().timed_out);
}

}  // namespace
}  // namespace kvgate::kv
