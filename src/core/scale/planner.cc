#include "core/scale/planner.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/scale/replica_count.h"

namespace kvgate::scale {

double bounded_correction(std::optional<double> measured, double target, const PlannerTargets& t,
                          bool cap_at_one) {
  double c = 1.0;
  if (measured && *measured > 0 && target > 0) c = *measured / target;
  c = std::clamp(c, t.min_correction, t.max_correction);
  if (cap_at_one) c = std::min(c, 1.0);
  return c;
}

PlannerResult plan_prefill(const PrefillProfile& profile, const PlannerTargets& targets,
                           const PlannerInput& in) {
  PlannerResult r;
  r.correction =
      bounded_correction(in.measured_ttft_s, targets.ttft_s, targets, in.cap_correction_at_one);
  r.per_replica = profile.throughput_at(in.mean_input_tokens);
  r.replicas = std::max(in.input_tokens_per_s, 0.0) * r.correction / r.per_replica;
  r.needed = ceil_count(r.replicas);
  return r;
}

PlannerResult plan_decode(const DecodeProfile& profile, const PlannerTargets& targets,
                          const PlannerInput& in) {
  PlannerResult r;
  r.correction =
      bounded_correction(in.measured_itl_s, targets.itl_s, targets, in.cap_correction_at_one);
  const double context = in.mean_input_tokens + in.mean_output_tokens / 2;
  r.per_replica = profile.best_throughput(targets.itl_s / r.correction, context);
  r.replicas = std::max(in.output_tokens_per_s, 0.0) / r.per_replica;
  r.needed = ceil_count(r.replicas);
  return r;
}

}  // namespace kvgate::scale
