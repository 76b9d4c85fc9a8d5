// Schedule: time-of-day floors and ceilings on a pool's size.
//
// Some fleets follow the clock as much as the load: DeepSeek serves on all its nodes by
// day and lends nodes to research at night (278 nodes at peak, 226.75 on average over
// their published day). A schedule is a list of daily windows, each with an optional
// floor (min replicas) and ceiling (max replicas); a window whose end is before its
// start wraps over midnight, and one whose start equals its end lasts all day.
//
// The time of day is (now + utc_offset) modulo 24 h: the caller passes `now` counted from
// a UTC midnight (the Unix epoch for wall-clock time; the simulator picks its own).
// Floors start `lead` early (the pool's startup time) so replicas are ready when the
// window opens; ceilings apply on time. Where a floor and a ceiling disagree, the ceiling
// wins: it usually means the hardware has been lent out.
//
//   Schedule s{.windows = {{.start = hh_mm(6, 0), .end = hh_mm(0, 0), .min_replicas = 278},
//                          {.start = hh_mm(0, 0), .end = hh_mm(6, 0), .max_replicas = 73}}};
//   Bounds b = schedule_bounds(s, now, /*lead=*/seconds(200), {0, 300});
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/common/result.h"
#include "core/common/time.h"

namespace kvgate::scale {

inline constexpr Nanos kDay = 24 * 3600 * kSecond;

constexpr Nanos hh_mm(int h, int m) { return (static_cast<Nanos>(h) * 60 + m) * 60 * kSecond; }

// "HH:MM" or "HH:MM:SS", 00:00 to 24:00, as an offset from midnight.
Result<Nanos> parse_time_of_day(std::string_view text);

struct ScheduleWindow {
  Nanos start = 0;  // time of day, [0, 24 h]
  Nanos end = 0;
  std::optional<int32_t> min_replicas;
  std::optional<int32_t> max_replicas;
};

struct Schedule {
  Nanos utc_offset = 0;
  std::vector<ScheduleWindow> windows;
};

struct Bounds {
  int32_t min_replicas = 0;
  int32_t max_replicas = 0;
};

// Is the window open at this time of day?
bool window_contains(const ScheduleWindow& w, Nanos time_of_day);

// `base` narrowed by every open window: floors raise min, ceilings lower max.
Bounds schedule_bounds(const Schedule& s, Nanos now, Nanos lead, Bounds base);

}  // namespace kvgate::scale
