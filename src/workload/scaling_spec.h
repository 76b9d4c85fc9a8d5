// ScalingSpec: how a scenario's pool is autoscaled in the simulator.
//
// A scenario (scenario.h) may carry an `autoscale:` section in the core's format
// (core/scale/config_yaml.h): then every policy run starts with `cluster.engines`
// replicas and the Autoscaler resizes the pool in virtual time. A policy may override it
// with its own `autoscale:`, or be sized by an `oracle:` that reads the workload's true
// arrival-rate curve ahead of time (the reference for GPU-hours). The simulator's side
// of scaling is configured under `scaling:`:
//
//   scaling:
//     control_interval_s: 15      # how often the autoscaler decides
//     signal_window_s: 30         # latency percentiles and token rates are over this window
//     startup: cold               # cold | caches-kept | none: how new replicas start
//     startup_s: 0                # > 0: every new replica takes exactly this long instead
//     slo: {ttft_s: 2, itl_s: 0.1}  # what counts as a request served on target
//     new_replica_window_s: 120   # warm-up report: a new replica's "first minutes"
//   autoscale: {policy: target, signal: waiting, target: 4, max_replicas: 16}
//   policies:
//     - {name: queue, policy: load, overlap: none}
//     - {name: oracle, policy: load, overlap: none,
//        oracle: {qps_per_replica: 3.0, max_replicas: 16}}
#pragma once

#include <cstdint>

#include "core/common/time.h"
#include "core/engine/startup.h"

namespace kvgate::workload {

// A request meets the SLO when its TTFT and its mean inter-token latency are both
// within target (a rejected or unfinished request misses it).
struct SloSpec {
  double ttft_s = 2.0;
  double itl_s = 0.1;
};

struct ScalingSpec {
  Nanos control_interval = 15 * kSecond;
  Nanos signal_window = 30 * kSecond;
  engine::StartupMode startup = engine::StartupMode::kCold;
  Nanos startup_fixed = 0;  // > 0 overrides the profile's startup table
  SloSpec slo;
  // The warm-up report (warmup_report.h) looks at what a new replica served this long
  // after it joined routing.
  Nanos new_replica_window = 120 * kSecond;
};

// Sizes the pool from the future: at every control tick, the most requests/s the
// workload's curve will send between now and now + horizon (the median startup of the
// scenario's replicas plus one control interval), divided by `qps_per_replica` (what one
// replica serves within the SLO, measured beforehand with fixed fleets), rounded up. It
// launches replicas exactly one startup ahead of need and drains them as soon as the
// coming horizon allows. Only for diurnal arrivals (the curve is known).
struct OracleSpec {
  double qps_per_replica = 1;
  int32_t min_replicas = 1;
  int32_t max_replicas = 100;
  int32_t gpus_per_replica = 1;
};

}  // namespace kvgate::workload
