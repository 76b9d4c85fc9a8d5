#include "core/scale/schedule.h"

#include <algorithm>
#include <charconv>
#include <string>

namespace kvgate::scale {

namespace {

Nanos time_of_day(Nanos t) { return ((t % kDay) + kDay) % kDay; }

bool parse_field(std::string_view s, int max, int& out) {
  if (s.size() != 2) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && out >= 0 && out <= max;
}

}  // namespace

Result<Nanos> parse_time_of_day(std::string_view text) {
  const Error bad("time of day '" + std::string(text) + "': expected HH:MM or HH:MM:SS");
  int h = 0, m = 0, s = 0;
  if (text.size() != 5 && text.size() != 8) return bad;
  if (text[2] != ':' || !parse_field(text.substr(0, 2), 24, h) ||
      !parse_field(text.substr(3, 2), 59, m)) {
    return bad;
  }
  if (text.size() == 8 && (text[5] != ':' || !parse_field(text.substr(6, 2), 59, s))) return bad;
  if (h == 24 && (m != 0 || s != 0)) return bad;
  return hh_mm(h, m) + s * kSecond;
}

bool window_contains(const ScheduleWindow& w, Nanos t) {
  const Nanos start = time_of_day(w.start);
  const Nanos end = time_of_day(w.end);
  if (start == end) return true;
  if (start < end) return t >= start && t < end;
  return t >= start || t < end;
}

Bounds schedule_bounds(const Schedule& s, Nanos now, Nanos lead, Bounds base) {
  const Nanos t = time_of_day(now + s.utc_offset);
  const Nanos ahead = time_of_day(now + s.utc_offset + std::max<Nanos>(lead, 0));
  Bounds b = base;
  for (const ScheduleWindow& w : s.windows) {
    if (w.min_replicas && (window_contains(w, t) || window_contains(w, ahead))) {
      b.min_replicas = std::max(b.min_replicas, *w.min_replicas);
    }
    if (w.max_replicas && window_contains(w, t)) {
      b.max_replicas = std::min(b.max_replicas, *w.max_replicas);
    }
  }
  b.min_replicas = std::min(b.min_replicas, b.max_replicas);
  return b;
}

}  // namespace kvgate::scale
