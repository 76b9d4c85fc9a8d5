#include "sim/arrivals.h"

#include <cmath>

namespace kvgate::sim {

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
      stages_.push_back({spec_.mean_qps * integral / (e - s), seconds(s), seconds(e), false});
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
  const double peak = spec_.mean_qps * (1 + std::abs(spec_.amplitude));
  if (peak <= 0) return std::nullopt;
  const double w = 2 * M_PI / spec_.period_s;
  while (true) {
    t_ += rng_.exponential(peak);
    if (t_ >= spec_.duration_s) return std::nullopt;
    const double rate = spec_.mean_qps * (1 + spec_.amplitude * std::sin(w * t_ + spec_.phase));
    if (rng_.uniform() * peak < rate) {
      const Nanos at = seconds(t_);
      return Arrival{at, stage_at(stages_, at)};
    }
  }
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

}  // namespace kvgate::sim
