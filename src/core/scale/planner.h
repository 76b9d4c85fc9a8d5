// The disaggregated planner: sizes a prefill pool from input tokens and a decode pool
// from output tokens, in the manner of NVIDIA Dynamo's SLA planner.
//
//   prefill replicas = ceil(predicted input tokens/s x c_ttft
//                           / prefill throughput per replica at the predicted prompt length)
//   decode replicas  = ceil(predicted output tokens/s
//                           / decode throughput per replica at ITL target / c_itl and
//                             context = prompt length + output length / 2)
//
// The corrections c_ttft = measured TTFT / TTFT target and c_itl = measured ITL / ITL
// target say how far the pool is from its targets: above 1 it is slower than the profile
// promised (queueing, chunked prefills, a different prompt mix) and needs more replicas;
// below 1 it has room to spare. Each is clamped to [min_correction, max_correction]:
// during a long cold start latencies soar because capacity is missing, not because the
// profile is wrong, and an unbounded correction would then order far too many replicas.
// For the same reason, with cold-start awareness on, a pool whose replicas are still
// starting is never corrected upwards (the correction is capped at 1 until they are up).
//
// Both pools of a disaggregated deployment usually share a GPU budget; budget.h splits it.
//
// Pure functions; no state.
#pragma once

#include <cstdint>
#include <optional>

#include "core/scale/profile.h"

namespace kvgate::scale {

enum class PoolRole : uint8_t { kPrefill, kDecode };

struct PlannerTargets {
  double ttft_s = 0.5;
  double itl_s = 0.05;
  double min_correction = 0.5;
  double max_correction = 2.0;
};

struct PlannerInput {
  double input_tokens_per_s = 0;   // predicted
  double output_tokens_per_s = 0;  // predicted
  double mean_input_tokens = 0;    // predicted prompt length
  double mean_output_tokens = 0;   // predicted output length
  std::optional<double> measured_ttft_s;
  std::optional<double> measured_itl_s;
  bool cap_correction_at_one = false;  // replicas are starting (cold-start awareness)
};

struct PlannerResult {
  double replicas = 0;     // unrounded need
  int32_t needed = 0;      // ceil(replicas)
  double correction = 1;   // applied correction
  double per_replica = 0;  // tokens/s one replica handles at the operating point
};

// REQUIRES: targets' latencies > 0 and min_correction <= max_correction.
double bounded_correction(std::optional<double> measured, double target, const PlannerTargets& t,
                          bool cap_at_one);

PlannerResult plan_prefill(const PrefillProfile& profile, const PlannerTargets& targets,
                           const PlannerInput& in);
PlannerResult plan_decode(const DecodeProfile& profile, const PlannerTargets& targets,
                          const PlannerInput& in);

}  // namespace kvgate::scale
