#include "core/scale/schedule.h"

#include <gtest/gtest.h>

namespace kvgate::scale {
namespace {

TEST(Schedule, ParsesTimesOfDay) {
  EXPECT_EQ(*parse_time_of_day("06:30"), hh_mm(6, 30));
  EXPECT_EQ(*parse_time_of_day("24:00"), kDay);
  EXPECT_EQ(*parse_time_of_day("00:00:15"), 15 * kSecond);
  EXPECT_FALSE(parse_time_of_day("6:30").ok());
  EXPECT_FALSE(parse_time_of_day("25:00").ok());
  EXPECT_FALSE(parse_time_of_day("24:01").ok());
  EXPECT_FALSE(parse_time_of_day("12:60").ok());
}

TEST(Schedule, WindowsWrapOverMidnight) {
  ScheduleWindow night{.start = hh_mm(22, 0), .end = hh_mm(6, 0)};
  EXPECT_TRUE(window_contains(night, hh_mm(23, 0)));
  EXPECT_TRUE(window_contains(night, hh_mm(5, 59)));
  EXPECT_FALSE(window_contains(night, hh_mm(6, 0)));
  EXPECT_FALSE(window_contains(night, hh_mm(12, 0)));
  ScheduleWindow day{.start = hh_mm(6, 0), .end = hh_mm(24, 0)};  // to midnight
  EXPECT_TRUE(window_contains(day, hh_mm(23, 59)));
  EXPECT_FALSE(window_contains(day, hh_mm(0, 0)));
  EXPECT_TRUE(window_contains({.start = hh_mm(3, 0), .end = hh_mm(3, 0)}, hh_mm(9, 0)));
}

// DeepSeek's published day: 278 nodes at peak and 226.75 on average. All nodes serve
// from 06:00 to midnight; from midnight to 06:00 all but 73 are lent to research:
// (278 x 18 + 73 x 6) / 24 = 226.75.
Schedule deepseek() {
  return {.utc_offset = hh_mm(8, 0),  // Beijing time
          .windows = {{.start = hh_mm(6, 0), .end = hh_mm(24, 0), .min_replicas = 278},
                      {.start = hh_mm(0, 0), .end = hh_mm(6, 0), .max_replicas = 73}}};
}

TEST(Schedule, DeepSeekDayAveragesTheirPublishedFigure) {
  const Schedule s = deepseek();
  // A pool that wants everything it may have, sampled every minute of a UTC day.
  double sum = 0;
  int n = 0;
  int32_t peak = 0;
  for (Nanos t = 0; t < kDay; t += 60 * kSecond, ++n) {
    const Bounds b = schedule_bounds(s, t, /*lead=*/0, {0, 278});
    sum += b.max_replicas;
    peak = std::max(peak, b.max_replicas);
    EXPECT_GE(b.max_replicas, b.min_replicas);
  }
  EXPECT_EQ(peak, 278);
  EXPECT_DOUBLE_EQ(sum / n, 226.75);
  // 02:00 Beijing is 18:00 UTC: lent out.
  EXPECT_EQ(schedule_bounds(s, hh_mm(18, 0), 0, {0, 278}).max_replicas, 73);
  // 12:00 Beijing is 04:00 UTC: the floor holds the pool at 278 whatever the load.
  EXPECT_EQ(schedule_bounds(s, hh_mm(4, 0), 0, {0, 278}).min_replicas, 278);
}

TEST(Schedule, FloorsStartOneStartupEarlyCeilingsOnTime) {
  const Schedule s{.windows = {{.start = hh_mm(8, 0), .end = hh_mm(20, 0), .min_replicas = 10},
                               {.start = hh_mm(20, 0), .end = hh_mm(8, 0), .max_replicas = 2}}};
  const Nanos lead = 200 * kSecond;
  // 07:57: the floor is 3 min 20 s away, so replicas launched now are ready at 08:00. The
  // night ceiling still holds, and a ceiling wins over a floor.
  Bounds b = schedule_bounds(s, hh_mm(7, 57), lead, {1, 20});
  EXPECT_EQ(b.max_replicas, 2);
  EXPECT_EQ(b.min_replicas, 2);
  b = schedule_bounds(s, hh_mm(8, 0), lead, {1, 20});
  EXPECT_EQ(b.min_replicas, 10);
  EXPECT_EQ(b.max_replicas, 20);
  b = schedule_bounds(s, hh_mm(7, 50), lead, {1, 20});
  EXPECT_EQ(b.min_replicas, 1);
  // A plain floor, no ceiling, applies early.
  const Schedule morning{
      .windows = {{.start = hh_mm(8, 0), .end = hh_mm(20, 0), .min_replicas = 10}}};
  EXPECT_EQ(schedule_bounds(morning, hh_mm(7, 57), lead, {1, 20}).min_replicas, 10);
  EXPECT_EQ(schedule_bounds(morning, hh_mm(20, 0), lead, {1, 20}).min_replicas, 1);
}

}  // namespace
}  // namespace kvgate::scale
