#include "env/system_clock.h"

#include <gtest/gtest.h>

#include <chrono>

namespace kvgate::env {
namespace {

TEST(SystemClock, IsOneMonotonicClockForTheProcess) {
  const Clock& clock = system_clock();
  EXPECT_EQ(&clock, &system_clock());
  const Nanos a = clock.now();
  const Nanos b = clock.now();
  EXPECT_GE(a, 0);
  EXPECT_LE(a, b);
}

TEST(SystemClock, WallTimeIsSinceTheUnixEpoch) {
  const Nanos expected = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  EXPECT_NEAR(static_cast<double>(system_clock().wall_now()), static_cast<double>(expected),
              static_cast<double>(60 * kSecond));
}

}  // namespace
}  // namespace kvgate::env
