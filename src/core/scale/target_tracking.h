// Target tracking: keep a signal at a target value per replica, the Kubernetes HPA way,
// with a Knative-style panic mode for sudden bursts.
//
// The HPA formula is desired = ceil(current x value / target), left alone while
// |value / target - 1| <= tolerance (0.1). Here it is written in "demand", the number of
// replicas the load needs, demand = replicas_measured x value / target, compared with the
// replicas counted as capacity. With cold-start awareness the measured replicas are the
// ready ones and capacity includes replicas still booting, so a pool whose new replicas
// are starting does not ask for more (see Autoscaler).
//
// Panic mode (Knative's KPA): demand is averaged over a stable window (60 s) and a panic
// window (6 s). When panic demand reaches threshold (200 %) x ready replicas, the pool
// panics: it follows the larger of the two averages and never scales down. It leaves
// panic once a full stable window has passed without the threshold being reached.
//
//   TargetTracker t({.tolerance = 0.1, .panic = {.enabled = true}});
//   auto r = t.recommend(/*demand=*/7.3, /*capacity=*/4, /*ready=*/4, now);  // r.needed == 8
//
// Thread-safety: none; owned by one Autoscaler.
#pragma once

#include <cstdint>
#include <deque>
#include <string>

#include "core/common/time.h"

namespace kvgate::scale {

// ceil(current x value / target), or `current` inside the tolerance band.
// REQUIRES: target > 0.
int32_t hpa_desired(int32_t current, double value, double target, double tolerance);

// ceil(demand), or `capacity` when demand / capacity is within 1 +- tolerance.
int32_t desired_from_demand(double demand, int32_t capacity, double tolerance);

struct PanicConfig {
  bool enabled = false;
  Nanos stable_window = 60 * kSecond;
  Nanos panic_window = 6 * kSecond;
  double threshold = 2.0;  // panic when panic demand >= threshold x ready replicas
};

struct TrackingConfig {
  double tolerance = 0.1;
  PanicConfig panic;
};

class TargetTracker {
 public:
  explicit TargetTracker(TrackingConfig config);

  struct Recommendation {
    int32_t needed = 0;          // replicas to have (before behavior, min/max)
    double demand = 0;           // the demand the count came from (stable average in panic mode)
    double panic_demand = 0;     // panic-window average (0 when panic is disabled)
    bool panic = false;          // in panic mode after this call
    bool held_by_panic = false;  // a scale-down was refused because of panic
  };

  // `demand`: replicas the current load needs; `capacity`: replicas counted as
  // capacity; `ready`: replicas serving now (panic compares against these).
  Recommendation recommend(double demand, int32_t capacity, int32_t ready, Nanos now);

  bool in_panic() const { return panic_since_ >= 0; }

 private:
  double window_mean(Nanos window, Nanos now) const;

  // Constant after construction.
  TrackingConfig config_;

  struct Sample {
    Nanos at;
    double demand;
  };
  std::deque<Sample> samples_;
  Nanos panic_since_ = -1;  // last time the panic threshold was reached; -1 = not in panic
  int32_t max_panic_ = 0;
};

}  // namespace kvgate::scale
