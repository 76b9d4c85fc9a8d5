#include "core/coldstart/run_stats.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace kvgate::coldstart {

std::optional<Summary> summarize(std::span<const double> values) {
  if (values.empty()) return std::nullopt;
  std::vector<double> v(values.begin(), values.end());
  std::sort(v.begin(), v.end());
  Summary s;
  s.count = v.size();
  s.min = v.front();
  s.max = v.back();
  size_t mid = v.size() / 2;
  s.median = v.size() % 2 == 1 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
  return s;
}

double relative_spread(const Summary& s) {
  double range = s.max - s.min;
  if (range <= 0) return 0;
  if (s.median <= 0) return std::numeric_limits<double>::infinity();
  return range / s.median;
}

bool spread_exceeds(const Summary& s, double fraction) { return relative_spread(s) > fraction; }

}  // namespace kvgate::coldstart
