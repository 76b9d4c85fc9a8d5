#include "core/scale/config.h"

#include <cmath>
#include <string>

namespace kvgate::scale {

std::string_view policy_name(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::kTarget:
      return "target";
    case PolicyKind::kGpuUtilization:
      return "gpu-utilization";
    case PolicyKind::kPlanner:
      return "planner";
    case PolicyKind::kHorizon:
      return "horizon";
  }
  return "unknown";
}

std::optional<PolicyKind> parse_policy(std::string_view name) {
  if (name == "target") return PolicyKind::kTarget;
  if (name == "gpu-utilization" || name == "gpu_utilization") return PolicyKind::kGpuUtilization;
  if (name == "planner") return PolicyKind::kPlanner;
  if (name == "horizon") return PolicyKind::kHorizon;
  return std::nullopt;
}

namespace {

Status check_rules(const ScalingRules& r, const std::string& where) {
  if (r.stabilization_window < 0) return Error(where + ".stabilization_window: must be >= 0");
  for (size_t i = 0; i < r.policies.size(); ++i) {
    const ScalingPolicy& p = r.policies[i];
    const std::string at = where + ".policies[" + std::to_string(i) + "]";
    if (p.value <= 0) return Error(at + ".value: must be > 0");
    if (p.period <= 0) return Error(at + ".period: must be > 0");
  }
  return {};
}

Status validate_horizon(const HorizonConfig& h) {
  const auto open_unit = [](double v) { return v > 0 && v < 1; };
  if (!(h.ttft_s > 0)) return Error("horizon.ttft_target: must be > 0");
  if (!(h.itl_s >= 0) || !std::isfinite(h.itl_s)) {
    return Error("horizon.itl_target: must be >= 0 (0: off)");
  }
  if (!open_unit(h.ttft_quantile)) return Error("horizon.ttft_quantile: must be in (0, 1)");
  if (!open_unit(h.quantile)) return Error("horizon.quantile: must be in (0, 1)");
  if (!open_unit(h.startup_quantile)) {
    return Error("horizon.startup_quantile: must be in (0, 1)");
  }
  const ReplicaProfile& r = h.replica;
  if (!(r.prefill_tokens_per_s > 0))
    return Error("horizon.replica.prefill_tokens_per_s: must be > 0");
  if (!(r.itl_s > 0)) return Error("horizon.replica.itl: must be > 0");
  if (!(r.kv_tokens > 0)) return Error("horizon.replica.kv_tokens: must be > 0");
  if (r.max_batch < 1) return Error("horizon.replica.max_batch: must be >= 1");
  if (h.prefix_hit_rate && !(*h.prefix_hit_rate >= 0 && *h.prefix_hit_rate < 1)) {
    return Error("horizon.prefix_hit_rate: must be in [0, 1)");
  }
  if (h.band_window <= 0) return Error("horizon.band_window: must be > 0");
  if (!(h.band_max >= 1)) return Error("horizon.band_max: must be >= 1");
  if (!(h.headroom > 0 && h.headroom <= h.band_max)) {
    return Error("horizon.headroom: must be in (0, band_max]");
  }
  if (h.startup_cold < 0 || h.startup_caches_kept < 0) {
    return Error("horizon.startup: must be >= 0");
  }
  if (h.margin < 0) return Error("horizon.margin: must be >= 0");
  if (!(h.correction_min > 0) || h.correction_min > 1) {
    return Error("horizon.correction.min: must be in (0, 1]");
  }
  if (!(h.correction_max >= 1)) return Error("horizon.correction.max: must be >= 1");
  if (!(h.correction_gain > 0 && h.correction_gain <= 1)) {
    return Error("horizon.correction.gain: must be in (0, 1]");
  }
  if (!(h.correction_deadband >= 0 && h.correction_deadband < 1)) {
    return Error("horizon.correction.deadband: must be in [0, 1)");
  }
  if (h.settle < 0) return Error("horizon.correction.settle: must be >= 0");
  if (!(h.burst_threshold > 0)) return Error("horizon.burst.threshold: must be > 0");
  if (h.burst_max_step < 0) return Error("horizon.burst.max_step: must be >= 0");
  if (h.standby < 0) return Error("horizon.standby: must be >= 0");
  return {};
}

}  // namespace

Status validate(const AutoscaleConfig& c) {
  if (c.min_replicas < 0) return Error("min_replicas: must be >= 0");
  if (c.max_replicas < c.min_replicas) {
    return Error("max_replicas: must be >= min_replicas (" + std::to_string(c.max_replicas) +
                 " < " + std::to_string(c.min_replicas) + ")");
  }
  if (c.gpus_per_replica < 1) return Error("gpus_per_replica: must be >= 1");
  if (c.policy != PolicyKind::kPlanner && c.policy != PolicyKind::kHorizon && !(c.target > 0)) {
    return Error("target: must be > 0");
  }
  if (!(c.tracking.tolerance >= 0)) return Error("tolerance: must be >= 0");
  const PanicConfig& p = c.tracking.panic;
  if (p.enabled) {
    if (p.stable_window <= 0) return Error("panic.stable_window: must be > 0");
    if (p.panic_window <= 0 || p.panic_window > p.stable_window) {
      return Error("panic.panic_window: must be > 0 and <= stable_window");
    }
    if (!(p.threshold > 1)) return Error("panic.threshold: must be > 1 (2.0 is 200 %)");
  }
  if (c.policy == PolicyKind::kPlanner) {
    if (!(c.planner.ttft_s > 0)) return Error("planner.ttft_target: must be > 0");
    if (!(c.planner.itl_s > 0)) return Error("planner.itl_target: must be > 0");
    if (!(c.planner.min_correction > 0) || c.planner.min_correction > 1) {
      return Error("planner.correction.min: must be in (0, 1]");
    }
    if (c.planner.max_correction < 1) return Error("planner.correction.max: must be >= 1");
    if (c.role == PoolRole::kPrefill && !c.prefill_profile) {
      return Error("planner.prefill_profile: required for role prefill");
    }
    if (c.role == PoolRole::kDecode && !c.decode_profile) {
      return Error("planner.decode_profile: required for role decode");
    }
  }
  if (c.policy == PolicyKind::kHorizon) {
    if (Status s = validate_horizon(c.horizon); !s) return s;
  }
  if (Status s = check_rules(c.behavior.scale_up, "behavior.scale_up"); !s) return s;
  if (Status s = check_rules(c.behavior.scale_down, "behavior.scale_down"); !s) return s;
  const ForecastConfig& f = c.forecast;
  if (f.method == ForecastMethod::kMovingAverage && f.window <= 0) {
    return Error("forecast.window: must be > 0");
  }
  if (f.method == ForecastMethod::kHoltWinters) {
    if (f.slot <= 0 || f.season < 2 * f.slot || f.season % f.slot != 0) {
      return Error("forecast.slot: must be > 0 and divide the season into >= 2 slots");
    }
    for (double v : {f.alpha, f.beta, f.gamma}) {
      if (!(v >= 0 && v <= 1)) return Error("forecast: alpha, beta and gamma must be in [0, 1]");
    }
  }
  for (size_t i = 0; i < c.schedule.windows.size(); ++i) {
    const ScheduleWindow& w = c.schedule.windows[i];
    const std::string at = "schedule[" + std::to_string(i) + "]";
    if (!w.min_replicas && !w.max_replicas)
      return Error(at + ": needs min_replicas or max_replicas");
    if (w.min_replicas && *w.min_replicas < 0) return Error(at + ".min_replicas: must be >= 0");
    if (w.max_replicas && *w.max_replicas < 0) return Error(at + ".max_replicas: must be >= 0");
  }
  if (c.startup_time < 0) return Error("startup_time: must be >= 0");
  if (!(c.stuck_factor >= 1)) return Error("stuck_factor: must be >= 1");
  if (c.young_age < 0) return Error("young_age: must be >= 0");
  return {};
}

}  // namespace kvgate::scale
