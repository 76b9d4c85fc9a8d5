#include "core/scale/planner.h"

#include <gtest/gtest.h>

#include "core/scale/budget.h"
#include "core/scale/profile.h"

namespace kvgate::scale {
namespace {

PrefillProfile prefill() {
  return *PrefillProfile::make({{3000, 14000, 0.25}, {1000, 10000, 0.10}});  // unsorted on purpose
}

DecodeProfile decode() {
  return *DecodeProfile::make({
      {.context_tokens = 3000, .points = {{0.010, 300}, {0.020, 900}, {0.040, 1500}}},
      {.context_tokens = 1000, .points = {{0.040, 2500}, {0.010, 500}, {0.020, 1500}}},
  });
}

TEST(Profile, PrefillInterpolatesAndClamps) {
  const PrefillProfile p = prefill();
  EXPECT_DOUBLE_EQ(p.throughput_at(2000), 12000);
  EXPECT_DOUBLE_EQ(p.throughput_at(1500), 11000);
  EXPECT_DOUBLE_EQ(p.throughput_at(100), 10000);
  EXPECT_DOUBLE_EQ(p.throughput_at(9000), 14000);
  EXPECT_DOUBLE_EQ(p.ttft_at(2000), 0.175);
}

TEST(Profile, DecodeBestThroughputWithinItl) {
  const DecodeProfile d = decode();
  // Row 1000: at 30 ms, halfway from (20 ms, 1500) to (40 ms, 2500).
  EXPECT_DOUBLE_EQ(d.best_throughput(0.030, 1000), 2000);
  EXPECT_DOUBLE_EQ(d.best_throughput(0.030, 3000), 1200);
  EXPECT_DOUBLE_EQ(d.best_throughput(0.030, 2000), 1600);  // between the rows
  EXPECT_DOUBLE_EQ(d.best_throughput(0.020, 1000), 1500);  // exactly a point
  EXPECT_DOUBLE_EQ(d.best_throughput(0.005, 1000), 500);   // tighter than profiled
  EXPECT_DOUBLE_EQ(d.best_throughput(0.100, 500), 2500);   // looser than profiled
}

TEST(Profile, RejectsBadTables) {
  EXPECT_FALSE(PrefillProfile::make({}).ok());
  EXPECT_FALSE(PrefillProfile::make({{1000, 0, 0.1}}).ok());
  auto bad = DecodeProfile::make({{.context_tokens = 1000, .points = {{0.02, 100}, {0.01, 200}}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("row 0"), std::string::npos);
}

PlannerTargets targets() {
  return {.ttft_s = 0.5, .itl_s = 0.030, .min_correction = 0.5, .max_correction = 2.0};
}

TEST(Planner, PrefillArithmetic) {
  PlannerInput in{.input_tokens_per_s = 30000, .mean_input_tokens = 2000};
  // 30000 / 12000 = 2.5 -> 3.
  PlannerResult r = plan_prefill(prefill(), targets(), in);
  EXPECT_DOUBLE_EQ(r.per_replica, 12000);
  EXPECT_DOUBLE_EQ(r.replicas, 2.5);
  EXPECT_EQ(r.needed, 3);
  EXPECT_DOUBLE_EQ(r.correction, 1.0);
  // TTFT 0.75 s against 0.5 s: correction 1.5 -> 3.75 -> 4.
  in.measured_ttft_s = 0.75;
  r = plan_prefill(prefill(), targets(), in);
  EXPECT_DOUBLE_EQ(r.correction, 1.5);
  EXPECT_EQ(r.needed, 4);
  // TTFT 0.4 s: correction 0.8 -> 2.0 -> 2.
  in.measured_ttft_s = 0.4;
  EXPECT_EQ(plan_prefill(prefill(), targets(), in).needed, 2);
}

TEST(Planner, DecodeArithmetic) {
  // Context = 1500 + 1000 / 2 = 2000; at 30 ms: 1600 tok/s per replica; 8000 / 1600 = 5.
  PlannerInput in{
      .output_tokens_per_s = 8000, .mean_input_tokens = 1500, .mean_output_tokens = 1000};
  PlannerResult r = plan_decode(decode(), targets(), in);
  EXPECT_DOUBLE_EQ(r.per_replica, 1600);
  EXPECT_EQ(r.needed, 5);
  // Measured ITL 45 ms against 30 ms: correction 1.5 aims at 20 ms: rows give 1500 and
  // 900, mean 1200; 8000 / 1200 = 6.67 -> 7.
  in.measured_itl_s = 0.045;
  r = plan_decode(decode(), targets(), in);
  EXPECT_DOUBLE_EQ(r.correction, 1.5);
  EXPECT_DOUBLE_EQ(r.per_replica, 1200);
  EXPECT_EQ(r.needed, 7);
}

TEST(Planner, CorrectionIsBounded) {
  PlannerInput in{.input_tokens_per_s = 30000, .mean_input_tokens = 2000};
  in.measured_ttft_s = 5.0;  // 10 x the target, as in a long cold start
  PlannerResult r = plan_prefill(prefill(), targets(), in);
  EXPECT_DOUBLE_EQ(r.correction, 2.0);
  EXPECT_EQ(r.needed, 5);  // 60000 / 12000, not 25
  in.measured_ttft_s = 0.01;
  r = plan_prefill(prefill(), targets(), in);
  EXPECT_DOUBLE_EQ(r.correction, 0.5);
  EXPECT_EQ(r.needed, 2);  // ceil(1.25)
  // While replicas boot, never corrected upwards.
  in.measured_ttft_s = 5.0;
  in.cap_correction_at_one = true;
  EXPECT_EQ(plan_prefill(prefill(), targets(), in).needed, 3);
  EXPECT_DOUBLE_EQ(bounded_correction(std::nullopt, 0.5, targets(), false), 1.0);
}

TEST(Planner, NoTrafficNeedsNoReplicas) {
  EXPECT_EQ(plan_prefill(prefill(), targets(), {}).needed, 0);
  EXPECT_EQ(plan_decode(decode(), targets(), {}).needed, 0);
}

TEST(Budget, UnderBudgetIsUntouched) {
  std::vector<PoolAsk> asks = {{3, 1, 1}, {2, 1, 2}};
  BudgetFit f = fit_gpu_budget(asks, 10);
  EXPECT_EQ(f.replicas, (std::vector<int32_t>{3, 2}));
  EXPECT_EQ(f.gpus_used, 7);
  EXPECT_FALSE(f.trimmed);
}

TEST(Budget, SharedInProportionWithGpusPerReplica) {
  // Asked 6 x 1 + 4 x 2 = 14 GPUs of 10: floor(6 x 10/14) = 4, floor(4 x 10/14) = 2 use
  // 8; the last 2 GPUs go to decode (2 of 4 short = 50 %, more than prefill's 33 %).
  std::vector<PoolAsk> asks = {{6, 1, 1}, {4, 1, 2}};
  BudgetFit f = fit_gpu_budget(asks, 10);
  EXPECT_EQ(f.replicas, (std::vector<int32_t>{4, 3}));
  EXPECT_EQ(f.gpus_used, 10);
  EXPECT_TRUE(f.trimmed);
  EXPECT_FALSE(f.over_budget);
}

TEST(Budget, MinReplicasWinOverTheBudget) {
  std::vector<PoolAsk> asks = {{8, 4, 2}, {8, 4, 2}};
  BudgetFit f = fit_gpu_budget(asks, 12);
  EXPECT_EQ(f.replicas, (std::vector<int32_t>{4, 4}));
  EXPECT_TRUE(f.over_budget);
}

}  // namespace
}  // namespace kvgate::scale
