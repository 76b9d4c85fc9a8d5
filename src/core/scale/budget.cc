#include "core/scale/budget.h"

#include <algorithm>
#include <cmath>

namespace kvgate::scale {

BudgetFit fit_gpu_budget(std::span<const PoolAsk> asks, int64_t total_gpus) {
  BudgetFit fit;
  int64_t asked = 0;
  for (const PoolAsk& a : asks) {
    asked += static_cast<int64_t>(std::max(a.desired, a.min_replicas)) * a.gpus_per_replica;
  }
  fit.replicas.reserve(asks.size());
  if (asked <= total_gpus) {
    for (const PoolAsk& a : asks) fit.replicas.push_back(std::max(a.desired, a.min_replicas));
    fit.gpus_used = asked;
    return fit;
  }
  fit.trimmed = true;
  const double scale = static_cast<double>(total_gpus) / static_cast<double>(asked);
  int64_t used = 0;
  for (const PoolAsk& a : asks) {
    const int32_t share = static_cast<int32_t>(std::floor(a.desired * scale));
    const int32_t n = std::max(share, a.min_replicas);
    fit.replicas.push_back(n);
    used += static_cast<int64_t>(n) * a.gpus_per_replica;
  }
  fit.over_budget = used > total_gpus;
  // Hand out what is left, one replica at a time, to the pool furthest behind its ask.
  for (;;) {
    int best = -1;
    double best_gap = 0;
    for (size_t i = 0; i < asks.size(); ++i) {
      const PoolAsk& a = asks[i];
      if (fit.replicas[i] >= a.desired || used + a.gpus_per_replica > total_gpus) continue;
      const double gap = static_cast<double>(a.desired - fit.replicas[i]) / a.desired;
      if (best < 0 || gap > best_gap) {
        best = static_cast<int>(i);
        best_gap = gap;
      }
    }
    if (best < 0) break;
    ++fit.replicas[best];
    used += asks[best].gpus_per_replica;
  }
  fit.gpus_used = used;
  return fit;
}

}  // namespace kvgate::scale
