// ClusterSim: one policy of a scenario, simulated in virtual time.
//
// The pieces are the real ones: N EngineModels (core/engine), the Router (core/route)
// with its EndpointPool, and the kv indexes, driven by an EventQueue the way the gateway
// drives them with sockets and clocks (DESIGN.md, "One core, several shells"):
//   arrival at the gateway      -> Router::route(request, now)            (same call)
//   + hop delay                 -> EngineModel::add at the engine
//   engine steps                -> EngineModel::step back to back while it has work
//   first token / finish + hop  -> pool().on_first_token / on_finished    (same calls)
//   every scrape interval       -> pool().on_metrics(waiting, running, KV usage), so the
//                                  router sees load as stale as a real scraper would
//   KV events + event delay     -> PreciseIndex::apply_stored / apply_removed
// Every policy of a scenario runs on the same arrivals (the workload is rebuilt from the
// same seed), so differences between rows come from routing alone.
//
// Deterministic: the same scenario, policy and seed give the same PolicyRun (apart from
// wall_seconds) on every machine.
#pragma once

#include <functional>

#include "core/common/result.h"
#include "sim/replica_group.h"
#include "workload/report.h"
#include "workload/scenario.h"

namespace kvgate::sim {

struct RunOptions {
  bool progress = false;        // a progress bar on stderr (when it is a terminal)
  bool force_progress = false;  // draw it even when stderr is not a terminal
  // Gateway replicas in front of the fleet and how they share routing state
  // (replica_group.h); the default is the single gateway.
  ReplicaSyncOptions replicas;
};

// Simulates `policy` over `scenario`'s cluster and workload. Errors: a bad router
// config, engines with different block sizes, an unreadable trace.
Result<workload::PolicyRun> run_policy(const workload::Scenario& scenario,
                                       const workload::PolicySpec& policy, uint64_t seed,
                                       const RunOptions& options = {});

}  // namespace kvgate::sim
