// Autoscaler: decides how many replicas one pool should have, and which to drain.
//
// Built from an AutoscaleConfig (policy by name plus parameters); every call to decide()
// takes the pool's signals and the time, and returns a Decision. Deterministic: the same
// sequence of (signals, now) gives the same decisions. The gateway calls it on a timer
// with endpoint state; the cluster simulator calls it in virtual time.
//
// One decision, step by step:
//   1. learn the pool's startup time from replicas that became ready (StartupTracker);
//      the forecast horizon is that time;
//   2. count capacity: ready replicas plus those starting that will be ready by the
//      horizon (cold-start awareness; a stuck one does not count);
//   3. the policy says how many healthy replicas the load needs:
//        target / gpu-utilization — demand = ready x value / target (HPA), optionally
//          with panic mode, against capacity with the tolerance band;
//        planner — the disaggregated planner's arithmetic (planner.h);
//        horizon — the load one startup ahead with an error band, a queueing model,
//          TTFT correction, burst path, scale-down guard (horizon.h);
//      with a forecaster, the larger of the need now and the need at the horizon;
//   4. stuck replicas are added back (they keep their slot until drained);
//   5. the schedule's floors and ceilings narrow [min, max];
//   6. HPA behavior: stabilization windows, rate limits, min/max;
//   7. on scale-down, the victims to drain (young replicas last; horizon: the emptiest,
//      then the youngest, never one still starting).
// With cold_start_aware = false, target tracking multiplies the per-ready-replica value
// by every replica, booting or not (HPA's formula with current = all replicas, as with a
// Value-type external metric), stuck replicas get no special treatment and the planner's
// correction is not capped while replicas boot: the naive loop that keeps adding
// replicas during a cold start, kept so the simulator can show that it does.
//
// The caller applies a decision: launch desired - (current - drain.size()) replicas,
// drain the listed ones (stop routing to them, wait for their requests, then stop them;
// a starting replica has nothing to wait for), and report every requested replica as
// kStarting from then on.
//
//   auto a = Autoscaler::make(config);           // Result<Autoscaler>
//   Decision d = a->decide(signals, now);
//   actuator.apply(d);
//
// Thread-safety: none; one Autoscaler per pool, called from one strand or thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/common/result.h"
#include "core/common/time.h"
#include "core/scale/behavior.h"
#include "core/scale/cold_start.h"
#include "core/scale/config.h"
#include "core/scale/forecast.h"
#include "core/scale/horizon.h"
#include "core/scale/signals.h"
#include "core/scale/target_tracking.h"

namespace kvgate::scale {

struct Decision {
  int32_t desired_replicas = 0;    // non-draining replicas the pool should have
  int32_t current_replicas = 0;    // non-draining replicas in the signals (ready + starting)
  std::vector<std::string> drain;  // replicas to drain, then stop; empty unless scaling down
  std::string reason;              // one line for logs and the admin API
  // What held the count back from the policy's need (BehaviorState::Normalized): empty,
  // "scale-down stabilization", "max replicas", ... A fixed set: a metric label.
  std::string limited_by;

  // Detail, for metrics and the simulator's reports.
  int32_t needed = 0;        // the policy's count, before behavior and bounds
  double demand = 0;         // replicas' worth of load (target tracking) or unrounded need
  Capacity capacity;         // as counted at the horizon
  Nanos horizon = 0;         // forecast horizon = expected startup time
  int32_t min_replicas = 0;  // bounds in force (after the schedule)
  int32_t max_replicas = 0;
  bool panic = false;
  // Horizon policy: of desired_replicas, how many ready ones to keep out of routing
  // (standby), and every input the decision used.
  int32_t standby = 0;
  std::optional<HorizonInputs> inputs;
};

class Autoscaler {
 public:
  // Validates the config (errors name the field).
  static Result<Autoscaler> make(AutoscaleConfig config);

  Autoscaler(Autoscaler&&) noexcept;
  Autoscaler& operator=(Autoscaler&&) noexcept;
  ~Autoscaler();

  // propose() then commit() with the proposed count.
  Decision decide(const PoolSignals& signals, Nanos now);

  // Two steps, for callers that adjust the count in between (decide_with_budget):
  // propose() computes the count (records it for stabilization, changes nothing else);
  // commit() fixes the count, picks the victims and records the scale event for the
  // rate limits. REQUIRES: commit() with the same signals and now as the proposal.
  Decision propose(const PoolSignals& signals, Nanos now);
  Decision commit(Decision proposal, int32_t replicas, const PoolSignals& signals, Nanos now);

  const AutoscaleConfig& config() const { return config_; }
  Nanos expected_startup() const { return startup_.expected(); }

 private:
  explicit Autoscaler(AutoscaleConfig config);
  void need_from_target(const PoolSignals& s, Nanos now, Decision& d);
  void need_from_planner(const PoolSignals& s, Nanos now, Decision& d);
  void need_from_horizon(const PoolSignals& s, Nanos now, Decision& d);
  double forecast(Forecaster* f, double value, Nanos now, Nanos horizon);

  // Constant after construction.
  AutoscaleConfig config_;

  StartupTracker startup_;
  TargetTracker tracker_;
  BehaviorState behavior_;
  std::unique_ptr<Forecaster> demand_forecast_;  // target tracking: demand
  std::unique_ptr<Forecaster> input_forecast_;   // planner: prompt tokens/s
  std::unique_ptr<Forecaster> output_forecast_;  // planner: generated tokens/s
  std::unique_ptr<HorizonPolicy> horizon_;       // horizon
};

// Decides for several pools that share `total_gpus` (fit_gpu_budget, budget.h): each
// proposes, the budget is split, each commits. Decisions in the order of `pools`.
// REQUIRES: pools.size() == signals.size().
std::vector<Decision> decide_with_budget(std::span<Autoscaler* const> pools,
                                         std::span<const PoolSignals> signals, int64_t total_gpus,
                                         Nanos now);

}  // namespace kvgate::scale
