// ScaleDecider: who decides the simulated pool's size at each control tick — the real
// scale::Autoscaler (the same object `kvgate serve` runs), or an oracle that reads the
// workload's arrival curve ahead of time (scaling_spec.h) as the reference for
// GPU-hours. It only decides: the simulator builds the pool's signals, calls decide(),
// and applies the Decision itself, exactly as an actuator would (cluster_sim.cc).
// docs/architecture.md ("Scaling: who decides, who acts") places it among the others.
//
// LatencyWindow keeps the gateway-side samples (TTFT, ITL, token counts) of the last
// window, so that the signals carry what the gateway observed recently.
#pragma once

#include <deque>
#include <memory>
#include <utility>

#include "core/common/result.h"
#include "core/common/time.h"
#include "core/scale/autoscaler.h"
#include "core/scale/signals.h"
#include "workload/scenario.h"

namespace kvgate::sim {

class ScaleDecider {
 public:
  virtual ~ScaleDecider() = default;
  virtual scale::Decision decide(const scale::PoolSignals& signals, Nanos now) = 0;
  virtual int32_t gpus_per_replica() const = 0;
};

// The policy's decider: its oracle, its own autoscale section, or the scenario's; nullptr
// when the run has a fixed fleet. Errors: an autoscale config the core rejects.
Result<std::unique_ptr<ScaleDecider>> make_scale_decider(const workload::Scenario& scenario,
                                                         const workload::PolicySpec& policy);

// The median time a new replica of `scenario` takes to become ready (the sum of the
// startup table's phase medians for its mode, or the fixed startup).
Nanos median_startup(const workload::Scenario& scenario);

// Samples (time, value) of the last `window`; older ones are dropped on prune().
class LatencyWindow {
 public:
  explicit LatencyWindow(Nanos window) : window_(window) {}
  void add(Nanos at, double value) { samples_.emplace_back(at, value); }
  void prune(Nanos now);
  scale::LatencySummary summary() const;
  double sum() const;
  double stddev() const;  // of the values (0 with fewer than two)
  size_t size() const { return samples_.size(); }

 private:
  Nanos window_;
  std::deque<std::pair<Nanos, double>> samples_;
};

}  // namespace kvgate::sim
