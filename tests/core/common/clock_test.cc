#include "core/common/clock.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

namespace kvgate {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace clock_test {

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
  EXPECT_EQ(clock.manual(), &manual);
}

// Waiters run when the clock reaches their deadline, not before, in deadline order (ties
// in registration order), on the thread that moves the clock, after it has moved.
TEST(ManualClock, WaitersFireInDeadlineOrderOnlyOnceReached) {
  ManualClock clock(kSecond);
  std::vector<int> fired;
  std::vector<Nanos> seen;
  auto on = [&](int n) {
    return [&fired, &seen, &clock, n] {
      fired.push_back(n);
      seen.push_back(clock.now());
    };
  };
  ASSERT_TRUE(clock.at(3 * kSecond, on(3)).has_value());
  ASSERT_TRUE(clock.at(2 * kSecond, on(2)).has_value());
  ASSERT_TRUE(clock.at(2 * kSecond, on(22)).has_value());
  ASSERT_TRUE(clock.at(5 * kSecond, on(5)).has_value());
  EXPECT_EQ(clock.waiters(), 4u);

  clock.advance(kSecond - 1);  // 2 s less a nanosecond
  EXPECT_TRUE(fired.empty());
  clock.advance(1);  // 2 s: both waiters of 2 s, in the order they came
  EXPECT_EQ(fired, (std::vector{2, 22}));
  clock.set(4 * kSecond);  // past 3 s, not 5 s
  EXPECT_EQ(fired, (std::vector{2, 22, 3}));
  EXPECT_EQ(seen, (std::vector{2 * kSecond, 2 * kSecond, 4 * kSecond}));
  EXPECT_EQ(clock.waiters(), 1u);
  clock.advance(10 * kSecond);  // one step over several deadlines fires each once
  EXPECT_EQ(fired, (std::vector{2, 22, 3, 5}));
  EXPECT_EQ(clock.waiters(), 0u);
  clock.advance(10 * kSecond);
  EXPECT_EQ(fired.size(), 4u);
}

TEST(ManualClock, ADeadlineAlreadyReachedIsNotRegistered) {
  ManualClock clock(kSecond);
  bool fired = false;
  EXPECT_FALSE(clock.at(kSecond, [&] { fired = true; }).has_value());
  EXPECT_FALSE(clock.at(0, [&] { fired = true; }).has_value());
  EXPECT_EQ(clock.waiters(), 0u);
  clock.advance(kSecond);
  EXPECT_FALSE(fired);  // the caller acts at once instead
}

TEST(ManualClock, ACancelledWaiterDoesNotFire) {
  ManualClock clock;
  std::vector<int> fired;
  const auto a = clock.at(kSecond, [&] { fired.push_back(1); });
  const auto b = clock.at(kSecond, [&] { fired.push_back(2); });
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(clock.cancel(*a));
  EXPECT_FALSE(clock.cancel(*a));  // once
  clock.advance(kSecond);
  EXPECT_EQ(fired, std::vector{2});
  EXPECT_FALSE(clock.cancel(*b));  // it ran
}

// A waiter may use the clock: read it, register another waiter (due ones are refused,
// later ones fire on a later move) and cancel one (the lock is not held while it runs).
TEST(ManualClock, AWaiterMayUseTheClock) {
  ManualClock clock;
  std::vector<int> fired;
  std::optional<ManualClock::WaitId> later;
  const std::optional<ManualClock::WaitId> victim =
      clock.at(3 * kSecond, [&] { fired.push_back(3); });
  auto first = [&] {
    fired.push_back(1);
    EXPECT_FALSE(clock.at(clock.now(), [&] { fired.push_back(-1); }).has_value());
    later = clock.at(clock.now() + kSecond, [&] { fired.push_back(2); });
    EXPECT_TRUE(clock.cancel(*victim));
  };
  ASSERT_TRUE(victim.has_value());
  ASSERT_TRUE(clock.at(kSecond, first).has_value());
  clock.advance(kSecond);
  EXPECT_EQ(fired, std::vector{1});
  ASSERT_TRUE(later.has_value());
  clock.advance(5 * kSecond);
  EXPECT_EQ(fired, (std::vector{1, 2}));
}

}  // namespace clock_test
}  // namespace kvgate
