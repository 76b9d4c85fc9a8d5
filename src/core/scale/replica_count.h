// ceil_count: a fractional replica need rounded up to a count, forgiving float noise.
//
// 4 x 1.5 / 0.75 must give 8 replicas, not 9: values within 1e-9 above an integer round
// down to it. Non-positive (and NaN) needs give 0; huge ones saturate at INT32_MAX.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace kvgate::scale {

inline int32_t ceil_count(double x) {
  if (!(x > 0)) return 0;
  const double c = std::ceil(x - 1e-9);
  if (c >= static_cast<double>(std::numeric_limits<int32_t>::max())) {
    return std::numeric_limits<int32_t>::max();
  }
  return static_cast<int32_t>(c);
}

}  // namespace kvgate::scale
