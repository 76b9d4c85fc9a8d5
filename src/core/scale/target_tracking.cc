#include "core/scale/target_tracking.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "core/scale/replica_count.h"

namespace kvgate::scale {

int32_t desired_from_demand(double demand, int32_t capacity, double tolerance) {
  // Inclusive, forgiving float noise: 4.4 / 4 must count as exactly 10 % off.
  if (capacity > 0 && std::abs(demand / capacity - 1.0) <= tolerance + 1e-9) return capacity;
  return ceil_count(demand);
}

int32_t hpa_desired(int32_t current, double value, double target, double tolerance) {
  return desired_from_demand(current * (value / target), current, tolerance);
}

TargetTracker::TargetTracker(TrackingConfig config) : config_(std::move(config)) {}

double TargetTracker::window_mean(Nanos window, Nanos now) const {
  double sum = 0;
  int n = 0;
  for (auto it = samples_.rbegin(); it != samples_.rend() && it->at > now - window; ++it) {
    sum += it->demand;
    ++n;
  }
  return n == 0 ? 0 : sum / n;
}

TargetTracker::Recommendation TargetTracker::recommend(double demand, int32_t capacity,
                                                       int32_t ready, Nanos now) {
  Recommendation r;
  if (!config_.panic.enabled) {
    r.demand = demand;
    r.needed = desired_from_demand(demand, capacity, config_.tolerance);
    return r;
  }
  const PanicConfig& p = config_.panic;
  samples_.push_back({now, demand});
  const Nanos keep = std::max(p.stable_window, p.panic_window);
  while (!samples_.empty() && samples_.front().at <= now - keep) samples_.pop_front();

  r.demand = window_mean(p.stable_window, now);
  r.panic_demand = window_mean(p.panic_window, now);
  const int32_t stable = desired_from_demand(r.demand, capacity, config_.tolerance);
  const int32_t panic = ceil_count(r.panic_demand);

  const bool over = panic >= p.threshold * std::max(ready, 1);
  if (over) {
    panic_since_ = now;  // enter, or extend
  } else if (panic_since_ >= 0 && now - panic_since_ >= p.stable_window) {
    panic_since_ = -1;
    max_panic_ = 0;
  }
  r.needed = stable;
  if (panic_since_ >= 0) {
    const int32_t want = std::max({stable, panic, max_panic_, capacity});
    r.held_by_panic = want > std::max(stable, panic);
    max_panic_ = want;
    r.needed = want;
  }
  r.panic = panic_since_ >= 0;
  return r;
}

}  // namespace kvgate::scale
