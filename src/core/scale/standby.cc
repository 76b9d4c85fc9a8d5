#include "core/scale/standby.h"

#include <algorithm>
#include <numeric>
#include <tuple>

namespace kvgate::scale {

std::vector<bool> pick_standby(std::span<const Nanos> ready_at, int32_t count) {
  std::vector<bool> out(ready_at.size(), false);
  if (count <= 0 || ready_at.size() < 2) return out;
  std::vector<size_t> order(ready_at.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::tie(ready_at[a], a) > std::tie(ready_at[b], b);  // youngest first
  });
  const size_t n = std::min(static_cast<size_t>(count), ready_at.size() - 1);
  for (size_t k = 0; k < n; ++k) out[order[k]] = true;
  return out;
}

}  // namespace kvgate::scale
