#include "io/process_launch_time.h"

#include <gtest/gtest.h>

namespace kvgate::io {
namespace {

TEST(ProcessLaunchTimeTest, IsBeforeNowAndNotLongAgo) {
  auto now = std::chrono::steady_clock::now();
  auto launched = process_launch_time();
  EXPECT_LE(launched, now + std::chrono::milliseconds(20));  // one 10 ms tick of slack
  EXPECT_GT(launched, now - std::chrono::hours(1));          // this test binary started recently
  // Stable: the same answer each time, to the tick.
  auto again = process_launch_time();
  EXPECT_LT(std::chrono::abs(again - launched), std::chrono::milliseconds(20));
}

}  // namespace
}  // namespace kvgate::io
