// AutoscaleConfig: everything that configures one pool's Autoscaler, as parsed from the
// pool's `autoscale:` section (config_yaml.h) or filled in by hand (tests, simulator).
//
// Defaults follow Kubernetes' HPA (tolerance 0.1, scale-down stabilization 300 s,
// scale-up 4 pods or 100 % per 15 s) and Knative's panic mode (60 s / 6 s / 200 %, off
// unless enabled). docs/autoscaler.md describes each field for users.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/common/result.h"
#include "core/common/time.h"
#include "core/scale/behavior.h"
#include "core/scale/forecast.h"
#include "core/scale/horizon.h"
#include "core/scale/planner.h"
#include "core/scale/profile.h"
#include "core/scale/schedule.h"
#include "core/scale/signals.h"
#include "core/scale/target_tracking.h"

namespace kvgate::scale {

enum class PolicyKind : uint8_t {
  kTarget,          // target tracking on `signal`
  kGpuUtilization,  // target tracking on GPU utilisation: a cautionary example, see docs
  kPlanner,         // the disaggregated planner (planner.h)
  kHorizon,         // sized for the load one startup ahead (horizon.h)
};

// Names in configuration: "target", "gpu-utilization", "planner", "horizon".
std::string_view policy_name(PolicyKind kind);
std::optional<PolicyKind> parse_policy(std::string_view name);

// Which latency figure the planner compares with its targets.
enum class LatencyStat : uint8_t { kMean, kP50, kP90, kP99 };

struct AutoscaleConfig {
  PolicyKind policy = PolicyKind::kTarget;
  int32_t min_replicas = 1;
  int32_t max_replicas = 10;
  int32_t gpus_per_replica = 1;

  // Target tracking (kTarget; kGpuUtilization forces signal = kGpuUtilization).
  Signal signal = Signal::kWaiting;
  double target = 4;  // per replica, in the signal's unit (requests, 0..1, tokens/s, s)
  TrackingConfig tracking;

  // Planner (kPlanner).
  PoolRole role = PoolRole::kPrefill;
  PlannerTargets planner;
  LatencyStat latency_stat = LatencyStat::kMean;
  std::optional<PrefillProfile> prefill_profile;  // required for role kPrefill
  std::optional<DecodeProfile> decode_profile;    // required for role kDecode

  // Horizon (kHorizon): its `forecast` is of the arrival rate.
  HorizonConfig horizon;

  Behavior behavior;
  ForecastConfig forecast;  // method kNone: scale on what is measured now
  Schedule schedule;

  // Cold starts (cold_start.h).
  bool cold_start_aware = true;
  Nanos startup_time = 120 * kSecond;  // prior for the startup tracker
  double stuck_factor = 3.0;
  Nanos young_age = 300 * kSecond;
};

// Checks ranges and cross-field rules (min <= max, target > 0, profile for the role...).
// Errors name the field, e.g. "max_replicas: must be >= min_replicas (2 < 4)".
Status validate(const AutoscaleConfig& config);

}  // namespace kvgate::scale
