#include "sim/scale_decider.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/scale/cold_start.h"
#include "workload/report.h"

namespace kvgate::sim {

using workload::OracleSpec;
using workload::PolicySpec;
using workload::quantile;
using workload::Scenario;

namespace {

class AutoscalerDecider final : public ScaleDecider {
 public:
  explicit AutoscalerDecider(scale::Autoscaler a) : autoscaler_(std::move(a)) {}
  scale::Decision decide(const scale::PoolSignals& s, Nanos now) override {
    return autoscaler_.decide(s, now);
  }
  int32_t gpus_per_replica() const override { return autoscaler_.config().gpus_per_replica; }

 private:
  scale::Autoscaler autoscaler_;
};

class OracleDecider final : public ScaleDecider {
 public:
  OracleDecider(OracleSpec spec, workload::ArrivalSpec arrivals, Nanos horizon)
      : spec_(spec), arrivals_(std::move(arrivals)), horizon_(horizon) {}

  scale::Decision decide(const scale::PoolSignals& s, Nanos now) override {
    // The most the curve sends from now until a replica launched now would be up.
    double peak = 0;
    const double from = to_seconds(now), to = to_seconds(now + horizon_);
    for (double t = from; t <= to; t += 1.0)
      peak = std::max(peak, workload::diurnal_rate(arrivals_, t));
    const int32_t need = static_cast<int32_t>(std::ceil(peak / spec_.qps_per_replica - 1e-9));
    scale::Decision d;
    d.current_replicas = static_cast<int32_t>(s.active());
    d.needed = need;
    d.demand = peak / spec_.qps_per_replica;
    d.horizon = horizon_;
    d.min_replicas = spec_.min_replicas;
    d.max_replicas = spec_.max_replicas;
    d.desired_replicas = std::clamp(need, spec_.min_replicas, spec_.max_replicas);
    d.reason = fmt::format("oracle: peak {:.2f} req/s in the next {:.0f} s / {:.2f} -> {}", peak,
                           to_seconds(horizon_), spec_.qps_per_replica, d.desired_replicas);
    if (d.desired_replicas < d.current_replicas) {
      // Starting replicas first (they cost GPU time and serve nothing yet), then the
      // ready ones with the fewest requests.
      d.drain =
          scale::select_victims(s.replicas, d.current_replicas - d.desired_replicas, now,
                                {.young_age = 0, .expected_startup = horizon_, .stuck_factor = 0});
    }
    return d;
  }
  int32_t gpus_per_replica() const override { return spec_.gpus_per_replica; }

 private:
  OracleSpec spec_;
  workload::ArrivalSpec arrivals_;
  Nanos horizon_;
};

}  // namespace

namespace {

// The horizon policy's startup priors, where its section leaves them 0: the profile's
// phase table (sum of the phase medians, cold and caches-kept), or the fixed startup;
// the kind of start is the scenario's.
void fill_startup_priors(const Scenario& scenario, scale::HorizonConfig& h) {
  const engine::Profile& p = scenario.engines.front().profile;
  const auto table_sum = [&](bool kept) -> Nanos {
    if (scenario.scaling.startup_fixed > 0) return scenario.scaling.startup_fixed;
    if (!p.startup) return 0;
    double total = 0;
    for (const engine::PhaseStats& ph : kept ? p.startup->caches_kept : p.startup->cold)
      total += ph.median_s;
    return seconds(total);
  };
  if (h.startup_cold == 0) h.startup_cold = table_sum(false);
  if (h.startup_caches_kept == 0) h.startup_caches_kept = table_sum(true);
  h.caches_kept = scenario.scaling.startup == engine::StartupMode::kCachesKept;
}

}  // namespace

Nanos median_startup(const Scenario& scenario) {
  if (scenario.scaling.startup_fixed > 0) return scenario.scaling.startup_fixed;
  const engine::Profile& p = scenario.engines.front().profile;
  if (!p.startup || scenario.scaling.startup == engine::StartupMode::kNone) return 0;
  const auto& phases = scenario.scaling.startup == engine::StartupMode::kCold
                           ? p.startup->cold
                           : p.startup->caches_kept;
  double total = 0;
  for (const engine::PhaseStats& ph : phases) total += ph.median_s;
  return seconds(total);
}

Result<std::unique_ptr<ScaleDecider>> make_scale_decider(const Scenario& scenario,
                                                         const PolicySpec& policy) {
  if (policy.oracle) {
    const Nanos horizon = median_startup(scenario) + scenario.scaling.control_interval;
    return std::unique_ptr<ScaleDecider>(
        std::make_unique<OracleDecider>(*policy.oracle, scenario.workload.arrivals, horizon));
  }
  const auto& section = policy.autoscale ? policy.autoscale : scenario.autoscale;
  if (!section) return std::unique_ptr<ScaleDecider>();
  scale::AutoscaleConfig config = *section;
  if (config.policy == scale::PolicyKind::kHorizon) fill_startup_priors(scenario, config.horizon);
  auto a = scale::Autoscaler::make(std::move(config));
  if (!a) return Error("policy " + policy.name + ": autoscale: " + a.error());
  return std::unique_ptr<ScaleDecider>(std::make_unique<AutoscalerDecider>(std::move(*a)));
}

void LatencyWindow::prune(Nanos now) {
  while (!samples_.empty() && samples_.front().first < now - window_) samples_.pop_front();
}

scale::LatencySummary LatencyWindow::summary() const {
  scale::LatencySummary out;
  out.samples = samples_.size();
  if (samples_.empty()) return out;
  std::vector<double> v;
  v.reserve(samples_.size());
  for (const auto& [at, value] : samples_) v.push_back(value);
  out.mean = sum() / static_cast<double>(v.size());
  out.p50 = quantile(v, 0.5);
  out.p90 = quantile(v, 0.9);
  out.p99 = quantile(std::move(v), 0.99);
  return out;
}

double LatencyWindow::sum() const {
  double total = 0;
  for (const auto& [at, value] : samples_) total += value;
  return total;
}

double LatencyWindow::stddev() const {
  if (samples_.size() < 2) return 0;
  const double mean = sum() / static_cast<double>(samples_.size());
  double ss = 0;
  for (const auto& [at, value] : samples_) ss += (value - mean) * (value - mean);
  return std::sqrt(ss / static_cast<double>(samples_.size() - 1));
}

}  // namespace kvgate::sim
