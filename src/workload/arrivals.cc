#include "workload/arrivals.h"

#include <cmath>

namespace kvgate::workload {

ArrivalProcess::ArrivalProcess(const ArrivalSpec& spec, uint64_t seed) : spec_(spec), rng_(seed) {
  if (spec_.kind == ArrivalSpec::Kind::kDiurnal) {
    const double width = spec_.stage_s > 0 ? spec_.stage_s : spec_.duration_s;
    for (double s = 0; s < spec_.duration_s; s += width) {
      const double e = std::min(s + width, spec_.duration_s);
      // Mean rate over the bucket: the integral of the curve divided by the width.
      const double w = 2 * M_PI / spec_.period_s;
      const double integral =
          (e - s) -
          spec_.amplitude / w * (std::cos(w * e + spec_.phase) - std::cos(w * s + spec_.phase));
      double qps = spec_.mean_qps * integral / (e - s);
      for (const ArrivalSpec::Burst& b : spec_.bursts) {
        // The burst adds (factor - 1) x the curve over its overlap with the bucket
        // (midpoint rule, fine enough for a report figure).
        const double lo = std::max(s, b.start_s), hi = std::min(e, b.start_s + b.duration_s);
        constexpr int kSteps = 64;
        for (int i = 0; i < kSteps && hi > lo; ++i) {
          const double t = lo + (hi - lo) * (i + 0.5) / kSteps;
          qps += (b.factor - 1) * spec_.mean_qps *
                 (1 + spec_.amplitude * std::sin(w * t + spec_.phase)) * (hi - lo) / kSteps /
                 (e - s);
        }
      }
      stages_.push_back({qps, seconds(s), seconds(e), false});
    }
    return;
  }
  double start = 0;
  for (const Stage& st : spec_.stages) {
    stages_.push_back({st.qps, seconds(start), seconds(start + st.duration_s), st.warmup});
    start += st.duration_s;
  }
}

std::optional<ArrivalProcess::Arrival> ArrivalProcess::next() {
  return spec_.kind == ArrivalSpec::Kind::kDiurnal ? next_diurnal() : next_staged();
}

std::optional<ArrivalProcess::Arrival> ArrivalProcess::next_staged() {
  while (stage_ < spec_.stages.size()) {
    const Stage& st = spec_.stages[stage_];
    const double end = to_seconds(stages_[stage_].end);
    double t = t_;
    if (st.qps > 0) {
      t += spec_.kind == ArrivalSpec::Kind::kPoisson ? rng_.exponential(st.qps) : 1.0 / st.qps;
    } else {
      t = end;
    }
    if (t < end) {
      t_ = t;
      return Arrival{seconds(t), static_cast<uint32_t>(stage_)};
    }
    t_ = end;
    ++stage_;
  }
  return std::nullopt;
}

std::optional<ArrivalProcess::Arrival> ArrivalProcess::next_diurnal() {
  double max_factor = 1;
  for (const ArrivalSpec::Burst& b : spec_.bursts) max_factor *= std::max(1.0, b.factor);
  const double peak = spec_.mean_qps * (1 + std::abs(spec_.amplitude)) * max_factor;
  if (peak <= 0) return std::nullopt;
  while (true) {
    t_ += rng_.exponential(peak);
    if (t_ >= spec_.duration_s) return std::nullopt;
    const double rate = diurnal_rate(spec_, t_);
    if (rng_.uniform() * peak < rate) {
      const Nanos at = seconds(t_);
      return Arrival{at, stage_at(stages_, at)};
    }
  }
}

double diurnal_rate(const ArrivalSpec& spec, double t_s) {
  const double w = 2 * M_PI / spec.period_s;
  double rate = spec.mean_qps * (1 + spec.amplitude * std::sin(w * t_s + spec.phase));
  for (const ArrivalSpec::Burst& b : spec.bursts) {
    if (t_s >= b.start_s && t_s < b.start_s + b.duration_s) rate *= b.factor;
  }
  return rate;
}

uint32_t stage_at(const std::vector<StageInfo>& stages, Nanos t) {
  if (stages.empty()) return 0;
  // Stages are contiguous and sorted: binary search on the end times.
  size_t lo = 0, hi = stages.size() - 1;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (t < stages[mid].end) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return static_cast<uint32_t>(lo);
}

}  // namespace kvgate::workload
