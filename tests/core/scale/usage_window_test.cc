#include "core/scale/usage_window.h"

#include <gtest/gtest.h>

#include "core/metrics/histogram.h"

namespace kvgate::scale {
namespace {

TEST(SummarizeDeltaTest, PercentilesInterpolateInsideTheBucket) {
  metrics::Histogram h({0.1, 0.2, 0.4});
  // 10 observations: 5 in (0, 0.1], 4 in (0.1, 0.2], 1 in (0.2, 0.4].
  for (int i = 0; i < 5; ++i) h.observe(0.05);
  for (int i = 0; i < 4; ++i) h.observe(0.15);
  h.observe(0.3);
  LatencySummary s = summarize_delta(h.snapshot(), {});
  EXPECT_EQ(s.samples, 10u);
  EXPECT_NEAR(s.mean, (5 * 0.05 + 4 * 0.15 + 0.3) / 10, 1e-12);
  EXPECT_NEAR(s.p50, 0.1, 1e-12);              // rank 5: the top of the first bucket
  EXPECT_NEAR(s.p90, 0.2, 1e-12);              // rank 9: the top of the second
  EXPECT_NEAR(s.p99, 0.2 + 0.2 * 0.9, 1e-12);  // rank 9.9: 90% into the third
}

TEST(SummarizeDeltaTest, OnlyTheObservationsSinceTheOlderSnapshotCount) {
  metrics::Histogram h({0.1, 1.0});
  for (int i = 0; i < 100; ++i) h.observe(0.05);
  metrics::HistogramSnapshot before = h.snapshot();
  for (int i = 0; i < 10; ++i) h.observe(0.5);
  LatencySummary s = summarize_delta(h.snapshot(), before);
  EXPECT_EQ(s.samples, 10u);
  EXPECT_NEAR(s.mean, 0.5, 1e-9);
  EXPECT_GT(s.p50, 0.1);  // the old fast requests no longer pull it down
  EXPECT_LE(s.p99, 1.0);
}

TEST(SummarizeDeltaTest, ThePlusInfBucketReadsAsTheHighestBound) {
  metrics::Histogram h({0.1, 1.0});
  h.observe(30);
  EXPECT_DOUBLE_EQ(summarize_delta(h.snapshot(), {}).p99, 1.0);
}

TEST(SummarizeDeltaTest, NothingObservedIsNoSample) {
  metrics::Histogram h({0.1});
  EXPECT_EQ(summarize_delta(h.snapshot(), h.snapshot()).samples, 0u);
  EXPECT_EQ(summarize_delta({}, {}).samples, 0u);
}

TEST(AddHistogramTest, SumsModelsOfAPool) {
  metrics::Histogram a({0.1, 1.0}), b({0.1, 1.0});
  a.observe(0.05);
  b.observe(0.5);
  b.observe(0.6);
  metrics::HistogramSnapshot sum;
  add_histogram(sum, a.snapshot());
  add_histogram(sum, b.snapshot());
  EXPECT_EQ(sum.count, 3u);
  EXPECT_EQ(sum.counts, (std::vector<uint64_t>{1, 2, 0}));
  EXPECT_NEAR(sum.sum, 1.15, 1e-12);
}

UsageTotals totals(uint64_t prompt, uint64_t completion, uint64_t requests) {
  return {.prompt_tokens = prompt, .completion_tokens = completion, .requests = requests};
}

TEST(UsageWindowTest, RatesOverTheWindow) {
  UsageWindow w(10 * kSecond);
  EXPECT_EQ(w.rates().span, 0);
  w.add(0, totals(0, 0, 0));
  EXPECT_EQ(w.rates().span, 0) << "one snapshot has no rate";
  w.add(5 * kSecond, totals(5000, 500, 5));
  UsageRates r = w.rates();
  EXPECT_EQ(r.span, 5 * kSecond);
  EXPECT_DOUBLE_EQ(r.prompt_tokens_per_s, 1000);
  EXPECT_DOUBLE_EQ(r.generation_tokens_per_s, 100);
  EXPECT_DOUBLE_EQ(r.mean_prompt_tokens, 1000);
  EXPECT_DOUBLE_EQ(r.mean_generation_tokens, 100);
}

TEST(UsageWindowTest, SpreadOfGeneratedLengthsInTheWindow) {
  // Outputs 100, 200, 300 before the window's base, then 10, 20, 30, 40 inside it: the
  // spread is theirs alone (sample standard deviation of 10..40 = 12.91).
  UsageWindow w(10 * kSecond);
  UsageTotals t = totals(0, 600, 3);
  t.completion_tokens_sq = 100 * 100 + 200 * 200 + 300 * 300;
  w.add(0, t);
  t.completion_tokens += 100;
  t.requests += 4;
  t.completion_tokens_sq += 10 * 10 + 20 * 20 + 30 * 30 + 40 * 40;
  w.add(5 * kSecond, t);
  UsageRates r = w.rates();
  EXPECT_DOUBLE_EQ(r.mean_generation_tokens, 25);
  EXPECT_NEAR(r.generation_tokens_sd, 12.9099, 1e-4);
  t.requests += 1;  // one more request, then nothing: a window without two has no spread
  t.completion_tokens += 50;
  t.completion_tokens_sq += 50 * 50;
  w.add(30 * kSecond, t);
  w.add(31 * kSecond, t);
  EXPECT_EQ(w.rates().generation_tokens_sd, 0);
}

TEST(ArrivalRateTest, TheLastIntervalWhenTicksAreSecondsApart) {
  ArrivalRate a;
  EXPECT_FALSE(a.rate()) << "no reading";
  a.add(0, 0);
  EXPECT_FALSE(a.rate()) << "one reading has no rate";
  a.add(15 * kSecond, 30);
  EXPECT_DOUBLE_EQ(*a.rate(), 2.0);
  a.add(30 * kSecond, 30 + 150);
  EXPECT_DOUBLE_EQ(*a.rate(), 10.0) << "the last interval only";
}

TEST(ArrivalRateTest, ShortIntervalsAreReadOverAtLeastTheMinimumSpan) {
  // Ticks every 200 ms; three requests land in the last one: that tick alone would read
  // 15 req/s, the last second reads 6.
  ArrivalRate a(kSecond);
  const uint64_t totals[] = {0, 1, 2, 3, 4, 4, 7};
  for (int i = 0; i < 7; ++i) a.add(i * 200 * kMillisecond, totals[i]);
  // Base: the newest reading at least 1 s before 1.2 s, i.e. 0.2 s (total 1).
  EXPECT_DOUBLE_EQ(*a.rate(), 6.0);
}

TEST(UsageWindowTest, OldLoadLeavesTheWindow) {
  UsageWindow w(10 * kSecond);
  // A burst in the first seconds, then nothing for a long time.
  w.add(0, totals(0, 0, 0));
  w.add(1 * kSecond, totals(10000, 1000, 10));
  for (int t = 2; t <= 30; ++t) w.add(t * kSecond, totals(10000, 1000, 10));
  UsageRates r = w.rates();
  EXPECT_EQ(r.span, 10 * kSecond);
  EXPECT_DOUBLE_EQ(r.prompt_tokens_per_s, 0);
  EXPECT_DOUBLE_EQ(r.mean_prompt_tokens, 0) << "no request in the window";
  EXPECT_LE(w.snapshots(), 12u) << "memory is bounded by the window";
}

TEST(UsageWindowTest, BaseIsTheLastSnapshotAtOrBeforeTheWindowStart) {
  UsageWindow w(10 * kSecond);
  w.add(0, totals(0, 0, 0));
  w.add(7 * kSecond, totals(700, 0, 1));
  w.add(14 * kSecond, totals(1400, 0, 2));
  // The window [4 s, 14 s] starts after t = 0 but t = 7 s is inside: the base stays at 0.
  UsageRates r = w.rates();
  EXPECT_EQ(r.span, 14 * kSecond);
  EXPECT_DOUBLE_EQ(r.prompt_tokens_per_s, 100);
  w.add(17 * kSecond, totals(1700, 0, 3));
  r = w.rates();
  EXPECT_EQ(r.span, 10 * kSecond);  // base moved to t = 7 s
  EXPECT_DOUBLE_EQ(r.prompt_tokens_per_s, 100);
}

TEST(UsageWindowTest, LatencyPercentilesOfTheWindowOnly) {
  UsageWindow w(10 * kSecond);
  metrics::Histogram ttft({0.1, 1.0, 10.0});
  for (int i = 0; i < 50; ++i) ttft.observe(5.0);  // a slow cold start, long ago
  UsageTotals t0;
  t0.ttft = ttft.snapshot();
  w.add(0, t0);
  for (int i = 0; i < 20; ++i) ttft.observe(0.05);
  UsageTotals t1;
  t1.ttft = ttft.snapshot();
  w.add(20 * kSecond, t1);
  // The newest snapshot at or before the window's start (t = 0) is the base: the 20 fast
  // requests count, the 50 slow ones before t = 0 do not.
  w.add(25 * kSecond, t1);
  UsageRates r = w.rates();
  EXPECT_EQ(r.span, 25 * kSecond);
  EXPECT_EQ(r.ttft.samples, 20u);
  EXPECT_LE(r.ttft.p99, 0.1);
  // Later, nothing new inside the window: no sample, not the old ones.
  w.add(31 * kSecond, t1);
  r = w.rates();
  EXPECT_EQ(r.span, 11 * kSecond);
  EXPECT_EQ(r.ttft.samples, 0u);
}

}  // namespace
}  // namespace kvgate::scale
