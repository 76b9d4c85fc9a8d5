#include "core/scale/target_tracking.h"

#include <gtest/gtest.h>

namespace kvgate::scale {
namespace {

TrackingConfig panic_on() { return {.tolerance = 0.1, .panic = {.enabled = true}}; }

TEST(TargetTracker, WithoutPanicFollowsInstantDemand) {
  TargetTracker t({});
  EXPECT_EQ(t.recommend(7.3, 4, 4, 0).needed, 8);
  EXPECT_EQ(t.recommend(4.2, 4, 4, kSecond).needed, 4);  // tolerance
  EXPECT_EQ(t.recommend(1.0, 4, 4, 2 * kSecond).needed, 1);
  EXPECT_FALSE(t.in_panic());
}

TEST(TargetTracker, StableModeAveragesOverSixtySeconds) {
  TargetTracker t(panic_on());
  Nanos now = 0;
  for (int i = 0; i < 60; ++i, now += kSecond) t.recommend(4.0, 4, 4, now);
  // A 2-second blip of 7 (below the 200 % threshold) barely moves the 60 s mean.
  auto r = t.recommend(7.0, 4, 4, now);
  r = t.recommend(7.0, 4, 4, now + kSecond);
  EXPECT_FALSE(r.panic);
  EXPECT_EQ(r.needed, 4);  // mean 4.1: inside tolerance
}

TEST(TargetTracker, PanicEntersAtTwiceTheReadyReplicasAndNeverScalesDown) {
  TargetTracker t(panic_on());
  Nanos now = 0;
  for (int i = 0; i < 60; ++i, now += kSecond) t.recommend(4.0, 4, 4, now);
  // Burst: demand 12 replicas' worth. The 6 s window reaches 8 = 2 x 4 ready first.
  TargetTracker::Recommendation r;
  int entered_after = -1;
  for (int i = 0; i < 6; ++i, now += kSecond) {
    r = t.recommend(12.0, 4, 4, now);
    if (r.panic && entered_after < 0) entered_after = i + 1;
  }
  EXPECT_EQ(entered_after, 3);  // (4 x 3 + 12 x 3) / 6 = 8 after the third second
  EXPECT_TRUE(r.panic);
  EXPECT_EQ(r.needed, 12);  // panic follows the 6 s window, not the 60 s mean (~4.8)
  // The burst ends; still in panic, no scale-down though demand is 1.
  r = t.recommend(1.0, 12, 12, now);
  EXPECT_TRUE(r.panic);
  EXPECT_EQ(r.needed, 12);
  EXPECT_TRUE(r.held_by_panic);
}

TEST(TargetTracker, PanicEndsAStableWindowAfterTheLastOverThreshold) {
  TargetTracker t(panic_on());
  Nanos now = 0;
  for (int i = 0; i < 6; ++i, now += kSecond) t.recommend(10.0, 2, 2, now);
  ASSERT_TRUE(t.in_panic());
  const Nanos last_over = now - kSecond;
  // Load vanishes. The 6 s window still averages high for a few seconds.
  TargetTracker::Recommendation r;
  for (; now < last_over + 60 * kSecond; now += kSecond) {
    r = t.recommend(0.5, 10, 10, now);
    ASSERT_TRUE(r.panic) << to_seconds(now);
    ASSERT_EQ(r.needed, 10);
  }
  now += 5 * kSecond;
  r = t.recommend(0.5, 10, 10, now);
  EXPECT_FALSE(r.panic);
  EXPECT_EQ(r.needed, 1);  // the stable mean now: 0.5 -> 1
}

}  // namespace
}  // namespace kvgate::scale
