// AutoscaleLoop: the control loop that runs one pool's autoscaler inside `kvgate serve`
// (pools with `autoscale:`). It decides nothing itself (scale::Autoscaler does) and acts
// on no platform itself (its Actuator does); docs/architecture.md ("Scaling: who
// decides, who acts") places it among the others.
//
// A thread that, every `autoscale.interval`:
//   1. lets the actuator catch up (actuator.h): local replicas' health checks,
//      drains and crashes; the Kubernetes scale subresource;
//   2. reads the pool's endpoints on the router's strand (scraped waiting, running, KV
//      usage; requests in flight) and the gateway's token and latency counters for the
//      pool's models, differenced over `autoscale.window` (scale::UsageWindow);
//   3. builds scale::PoolSignals (core/route/pool_signals.h), calls Autoscaler::decide;
//   4. applies the decision through the actuator, logs it when it changes something, and
//      exports it: kvgate_autoscaler_desired_replicas{pool} and friends (metrics.h), and
//      into the last hour's history (history(): the admin status page's chart).
//
// The autoscaler's clock is the pool's (PoolRuntime::clock: monotonic, as stabilization
// windows and rate limits must not jump with the wall clock) anchored to the Unix epoch
// at start (its wall_now()), so that schedules see the time of day.
//
//   auto a = AutoscaleLoop::start(pool, {"Qwen/Qwen3-0.6B"}, metrics);  // decides at once
//   ...
//   a->stop();  // or the destructor: joins the thread, stops local replicas
//
// REQUIRES: the pool has `autoscale`; the gateway's I/O threads run while the autoscaler
// does (it calls into the pool's strand and waits): stop it before stopping them.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/common/result.h"
#include "core/scale/autoscaler.h"
#include "gateway/common/metrics.h"

namespace kvgate::gateway {

class PoolRuntime;

// The pool's autoscaler among several gateway replicas (gateway/sync/replica_sync.h). Empty
// functions: a gateway alone, which always actuates.
struct LeaderLink {
  // Asked before each actuation with the decision's desired count: true only on the
  // pool's leader (then the count is recorded as the pool's for the other replicas).
  std::function<bool(int32_t desired)> may_actuate;
  // The leader's latest recorded count, when another replica leads; nullopt when this
  // one leads, or none is known.
  std::function<std::optional<int32_t>()> leader_desired;
};

class AutoscaleLoop {
 public:
  // Errors: the actuator cannot be set up (e.g. kubernetes outside a pod). `pool` and
  // `metrics` must outlive it; `models` are the names the pool serves (for usage).
  // `leader` (several gateway replicas: the pool's leader lease) is asked before each
  // actuation; when another replica leads, this one decides but does not act, and
  // exports the leader's desired count as the pool's (its own stays in the admin view).
  static Result<std::unique_ptr<AutoscaleLoop>> start(PoolRuntime& pool,
                                                      std::vector<std::string> models,
                                                      GatewayMetrics& metrics,
                                                      LeaderLink leader = {});
  ~AutoscaleLoop();
  AutoscaleLoop(const AutoscaleLoop&) = delete;
  AutoscaleLoop& operator=(const AutoscaleLoop&) = delete;

  // Stops the loop and the actuator (local replicas are stopped). Idempotent.
  void stop();

  // The latest decision and the signals it was made on (thread-safe copies).
  struct State {
    scale::Decision decision;  // this replica's own
    scale::PoolSignals signals;
    uint64_t decisions = 0;
    // Several gateway replicas: whether this one acted on the last decision (it leads),
    // and the leader's desired count when another replica leads.
    bool acted = true;
    std::optional<int32_t> leader_desired;
  };
  State state() const;
  const std::string& pool_name() const;

  // The pool's replicas over the last hour (the status page's chart), one value per step
  // of max(10 s, interval): the last decision's in that step, oldest first, nullopt for a
  // step without one. Fixed memory (one hour of steps). Thread-safe.
  struct History {
    Nanos step = 0;
    std::vector<std::optional<double>> desired, current, ready, starting, draining;
  };
  History history() const;

  struct Impl;

 private:
  explicit AutoscaleLoop(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvgate::gateway
