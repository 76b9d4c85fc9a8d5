#include "core/scale/behavior.h"

#include <gtest/gtest.h>

#include "core/scale/target_tracking.h"

namespace kvgate::scale {
namespace {

// HPA: desired = ceil(current x value / target).
TEST(HpaFormula, CeilOfCurrentTimesRatio) {
  EXPECT_EQ(hpa_desired(4, 6.0, 4.0, 0.1), 6);   // 4 x 1.5
  EXPECT_EQ(hpa_desired(3, 10.0, 4.0, 0.1), 8);  // ceil(7.5)
  EXPECT_EQ(hpa_desired(10, 1.0, 4.0, 0.1), 3);  // ceil(2.5)
  EXPECT_EQ(hpa_desired(4, 1.5, 0.75, 0.1), 8);  // exact in reals, noisy in doubles
  EXPECT_EQ(hpa_desired(5, 0.0, 4.0, 0.1), 0);
}

TEST(HpaFormula, ToleranceBandKeepsCurrent) {
  // Ratio within 1 +- 0.1: no change, though ceil would move.
  EXPECT_EQ(hpa_desired(10, 4.4, 4.0, 0.1), 10);  // ratio 1.1 -> would be 11
  EXPECT_EQ(hpa_desired(10, 3.6, 4.0, 0.1), 10);  // ratio 0.9 -> would be 9
  EXPECT_EQ(hpa_desired(10, 4.5, 4.0, 0.1), 12);  // ratio 1.125: outside, ceil(11.25)
  EXPECT_EQ(hpa_desired(10, 3.5, 4.0, 0.1), 9);   // ratio 0.875: ceil(8.75)
  EXPECT_EQ(hpa_desired(10, 4.5, 4.0, 0.2), 10);  // wider band
}

Behavior no_limits(Nanos down_window, Nanos up_window = 0) {
  Behavior b;
  b.scale_up = {.stabilization_window = up_window, .select = SelectPolicy::kMax, .policies = {}};
  b.scale_down = {
      .stabilization_window = down_window, .select = SelectPolicy::kMax, .policies = {}};
  return b;
}

TEST(Behavior, ScaleDownWaitsForTheStabilizationWindow) {
  BehaviorState b(no_limits(300 * kSecond));
  Nanos t = 0;
  EXPECT_EQ(b.normalize(10, 10, 1, 100, t).replicas, 10);
  // The load drops: recommendations of 4 for 300 s are held at the window's max (10).
  for (int i = 1; i < 20; ++i) {
    t = i * 15 * kSecond;  // up to 285 s
    auto n = b.normalize(4, 10, 1, 100, t);
    EXPECT_EQ(n.replicas, 10) << "at " << to_seconds(t);
    EXPECT_EQ(n.limited_by, "scale-down stabilization");
  }
  // Once the 10 has left the window (recorded at 0, window 300 s), 4 goes through.
  EXPECT_EQ(b.normalize(4, 10, 1, 100, 300 * kSecond).replicas, 4);
}

TEST(Behavior, ScaleDownTakesTheHighestRecommendationInTheWindow) {
  BehaviorState b(no_limits(60 * kSecond));
  EXPECT_EQ(b.normalize(8, 10, 1, 100, 0).replicas, 8);
  EXPECT_EQ(b.normalize(6, 8, 1, 100, 20 * kSecond).replicas, 8);
  EXPECT_EQ(b.normalize(3, 8, 1, 100, 40 * kSecond).replicas, 8);
  EXPECT_EQ(b.normalize(3, 8, 1, 100, 65 * kSecond).replicas, 6);  // 8 (t=0) left; 6 is max
  EXPECT_EQ(b.normalize(3, 6, 1, 100, 85 * kSecond).replicas, 3);
}

TEST(Behavior, ScaleUpIsImmediateByDefaultAndStabilizedWhenAsked) {
  BehaviorState fast(no_limits(300 * kSecond));
  EXPECT_EQ(fast.normalize(9, 3, 1, 100, 0).replicas, 9);

  BehaviorState slow(no_limits(300 * kSecond, 30 * kSecond));
  EXPECT_EQ(slow.normalize(3, 3, 1, 100, 0).replicas, 3);
  EXPECT_EQ(slow.normalize(9, 3, 1, 100, 10 * kSecond).replicas, 3);  // min of window is 3
  EXPECT_EQ(slow.normalize(9, 3, 1, 100, 31 * kSecond).replicas, 9);  // the 3 has aged out
}

TEST(Behavior, DefaultScaleUpLimitIsFourPodsOrDoubleWhicheverIsMore) {
  BehaviorState b{Behavior{}};
  auto n = b.normalize(100, 2, 1, 1000, 0);
  EXPECT_EQ(n.replicas, 6);  // max(2 + 4, 2 x 2)
  EXPECT_EQ(n.limited_by, "scale-up limit");
  BehaviorState c{Behavior{}};
  EXPECT_EQ(c.normalize(100, 10, 1, 1000, 0).replicas, 20);  // max(14, 20)
}

TEST(Behavior, RateLimitCountsChangesWithinThePeriod) {
  Behavior pods1 = no_limits(0);
  pods1.scale_up.policies = {{PolicyType::kPods, 2, 60 * kSecond}};
  BehaviorState b(pods1);
  auto n = b.normalize(10, 4, 1, 100, 0);
  EXPECT_EQ(n.replicas, 6);
  b.record_scale(4, 6, 0);
  // Within the same 60 s period: the period started at 4, so 4 + 2 is still the cap.
  EXPECT_EQ(b.normalize(10, 6, 1, 100, 30 * kSecond).replicas, 6);
  // After the period, another 2.
  n = b.normalize(10, 6, 1, 100, 61 * kSecond);
  EXPECT_EQ(n.replicas, 8);
}

TEST(Behavior, ScaleDownPercentTruncatesAndMinPolicyPicksTheSmallerChange) {
  Behavior beh = no_limits(0);
  beh.scale_down.policies = {{PolicyType::kPercent, 10, 60 * kSecond},
                             {PolicyType::kPods, 5, 60 * kSecond}};
  BehaviorState most(beh);  // kMax: the larger change, min(15 - 5, int(15 x 0.9) = 13) = 10
  EXPECT_EQ(most.normalize(1, 15, 1, 100, 0).replicas, 10);
  beh.scale_down.select = SelectPolicy::kMin;
  BehaviorState least(beh);  // the smaller change: max(10, 13) = 13
  EXPECT_EQ(least.normalize(1, 15, 1, 100, 0).replicas, 13);
  beh.scale_down.select = SelectPolicy::kDisabled;
  BehaviorState off(beh);
  EXPECT_EQ(off.normalize(1, 15, 1, 100, 0).replicas, 15);
}

TEST(Behavior, MinAndMaxAlwaysApply) {
  BehaviorState b{Behavior{}};
  EXPECT_EQ(b.normalize(0, 0, 2, 10, 0).replicas, 2);  // below min jumps to min
  auto n = b.normalize(50, 30, 2, 10, kSecond);
  EXPECT_EQ(n.replicas, 10);
  EXPECT_EQ(n.limited_by, "max replicas");
}

}  // namespace
}  // namespace kvgate::scale
