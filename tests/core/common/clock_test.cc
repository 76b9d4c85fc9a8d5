#include "core/common/clock.h"

#include <gtest/gtest.h>

namespace kvgate {
namespace {

TEST(ManualClock, MovesOnlyWhenTold) {
  ManualClock clock;
  EXPECT_EQ(clock.now(), 0);
  EXPECT_EQ(clock.now(), 0);
  clock.advance(1500 * kMillisecond);
  EXPECT_EQ(clock.now(), 1500 * kMillisecond);
  clock.set(10 * kSecond);
  EXPECT_EQ(clock.now(), 10 * kSecond);
}

TEST(ManualClock, WallTimeMovesWithIt) {
  ManualClock clock(5 * kSecond, /*wall_origin=*/100 * kSecond);
  EXPECT_EQ(clock.wall_now(), 105 * kSecond);
  clock.advance(kSecond);
  EXPECT_EQ(clock.wall_now(), 106 * kSecond);
  EXPECT_EQ(ManualClock().wall_now(), ManualClock::kDefaultWallOrigin);
}

TEST(ManualClock, IsAClock) {
  ManualClock manual(7);
  const Clock& clock = manual;
  EXPECT_EQ(clock.now(), 7);
}

}  // namespace
}  // namespace kvgate
