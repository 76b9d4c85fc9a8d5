// Behavior: how fast a pool may change size, with Kubernetes HPA (autoscaling/v2)
// semantics — stabilization windows and scale-up/scale-down rate-limit policies.
//
// Given a raw recommendation, BehaviorState::normalize returns the replica count to set:
//   1. stabilization: the result may not go above the lowest recommendation of the
//      scale-up window nor below the highest recommendation of the scale-down window
//      (so a dip must last the whole scale-down window before replicas go);
//   2. rate limits: each policy says "at most N pods" or "at most P percent" per period,
//      counted from the pool's size at the start of the period; select_policy kMax takes
//      the policy allowing the largest change (HPA's default), kMin the smallest,
//      kDisabled forbids scaling in that direction;
//   3. min and max replicas.
// Defaults are HPA's: scale-up window 0 s, policies 4 pods or 100 % per 15 s (kMax);
// scale-down window 300 s, policy 100 % per 15 s.
//
//   BehaviorState b(Behavior{});
//   auto n = b.normalize(/*desired=*/10, /*current=*/2, /*min=*/1, /*max=*/20, now);
//   b.record_scale(2, n.replicas, now);  // once the change is applied
//
// Thread-safety: none; owned by one Autoscaler.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "core/common/time.h"

namespace kvgate::scale {

enum class PolicyType : uint8_t { kPods, kPercent };
enum class SelectPolicy : uint8_t { kMax, kMin, kDisabled };

struct ScalingPolicy {
  PolicyType type = PolicyType::kPods;
  int32_t value = 1;
  Nanos period = 15 * kSecond;
};

struct ScalingRules {
  Nanos stabilization_window = 0;
  SelectPolicy select = SelectPolicy::kMax;
  std::vector<ScalingPolicy> policies;
};

ScalingRules default_scale_up_rules();
ScalingRules default_scale_down_rules();

struct Behavior {
  ScalingRules scale_up = default_scale_up_rules();
  ScalingRules scale_down = default_scale_down_rules();
};

class BehaviorState {
 public:
  explicit BehaviorState(Behavior behavior);

  struct Normalized {
    int32_t replicas;
    // Empty when the recommendation went through unchanged, else what held it back:
    // "scale-up stabilization", "scale-down stabilization", "scale-up limit",
    // "scale-down limit", "min replicas", "max replicas".
    std::string limited_by;
  };

  // Records `desired` as this instant's recommendation and returns the count to set.
  // REQUIRES: `now` does not go backwards between calls.
  Normalized normalize(int32_t desired, int32_t current, int32_t min_replicas, int32_t max_replicas,
                       Nanos now);

  // Records an applied change of size (rate limits count these within their periods).
  void record_scale(int32_t from, int32_t to, Nanos now);

  const Behavior& behavior() const { return behavior_; }

 private:
  struct Sample {
    Nanos at;
    int32_t value;
  };
  int32_t stabilize(int32_t desired, int32_t current, Nanos now, std::string& why);
  int32_t scale_up_limit(int32_t current, Nanos now) const;
  int32_t scale_down_limit(int32_t current, Nanos now) const;
  static int32_t change_in_period(const std::deque<Sample>& events, Nanos period, Nanos now);
  void prune(Nanos now);

  // Constant after construction.
  Behavior behavior_;
  Nanos longest_period_ = 0;

  std::deque<Sample> recommendations_;
  std::deque<Sample> up_events_;    // replicas added
  std::deque<Sample> down_events_;  // replicas removed
};

}  // namespace kvgate::scale
