// Scenario: one simulation study, read from YAML: the cluster, the gateway between the
// clients and the engines, the routing policies to compare, and the workload. `kvgate sim`
// runs all of it; `kvgate bench` reads the same file and sends its workload to a live
// endpoint. Pure: a profile file comes in through the caller's ReadFile (workload.h),
// env::read_file in the shells.
//
//   name: llm-d shared prefix
//   seed: 1
//   cluster:
//     engines: 8                    # or groups: [{count, profile, role, zone, rack, ...}]
//     profile: 2xh100-qwen3-32b     # built-in name, or a YAML profile file (path)
//     num_gpu_blocks: 0             # engine overrides (0 = the profile's)
//     block_size: 64
//     max_num_seqs: 256
//     max_num_batched_tokens: 8192
//     num_host_blocks: 0            # host-memory KV tier, blocks (0: off; engine_config.h)
//     host_gbps: 0                  # its host -> GPU bandwidth, GB/s (0: the profile's)
//     num_disk_blocks: 0            # disk KV tier below it, blocks (0: off)
//     disk_gbps: 0                  # its disk -> host read bandwidth, GB/s (0: the profile's)
//   gateway:
//     model: qwen3-32b
//     hop_delay_ms: 1               # gateway <-> engine, one way
//     scrape_interval_ms: 100       # how often engine metrics reach the router
//     kv_event_delay_ms: 10         # engine -> precise index
//     kv_transfer_ms_per_1k_tokens: 5   # disaggregated: prefill -> decode KV transfer
//     decode_reject_kv_usage: 0     # disaggregated: a decode engine refuses a request
//                                   # whose prefill is done when its prompt's KV would
//                                   # put its usage above this (0..1; 0: never)
//     retries: {max_attempts: 3}    # as `kvgate serve`'s config (route/failover.h)
//     circuit_breaker: {failures: 5, open_ms: 5000}
//     migration: {max_migrations: 2}   # a pool's stream migration (absent: off)
//   policies:
//     - name: precise               # the label in the report
//       policy: kv-cost             # a router policy (route/registry.h)
//       params: {overlap_weight: 1} # the policy's parameters
//       overlap: precise            # none | precise | approx | both
//       filters: [saturation]       # optional; the router's default otherwise
//       saturation: {queue_threshold: 5, kv_threshold: 0.8, shed: true, metrics_max_age_s: 5}
//       approx: {ttl_s: 120, capacity_pairs: 4194304,
//                host_ttl_s: 0, host_capacity_pairs: 4194304}   # host tier: 0 = none
//       record_decisions: true
//       prefill_tokens_per_second: 10000
//       early_reject: {enabled: true, max_usage: 0.95, decode_seconds_per_token: 0.03,
//                      predict: true}   # false: the naive rule (decode load now)
//       pd: {mode: auto, locality_weight: 64, local_prefill_max_tokens: 0}
//       warmup: {prefixes: 16, budget_s: 10, concurrency: 4}   # new replicas (autoscaled)
//   workload: {...}                 # workload_yaml.h
//   max_time_s: 0                   # stop the clock here (0: when every request is done)
//   failures:                       # injected endpoint failures (docs/sim.md, "Failures")
//     - {endpoint: 1, at: 20, kind: fail_stop, duration: 15}
//     - {endpoint: engine-2, at: 0, kind: erroring, error_rate: 0.5}
//     - {endpoint: 0, at: 30, kind: slow, factor: 3}   # duration absent: until the end
//   adapters: {count: 50, popularity: zipf, zipf_s: 1, max_loras: 4, load_ms: 200}
//                                   # LoRA adapters per request (workload/adapters.h);
//                                   # a policy's `lora: {routing: aware | load_only,
//                                   # placement: {interval_ms, idle_unload_ms, ...}}`
//   scaling: {...}                  # autoscaling in virtual time: scaling_spec.h
//   autoscale: {...}                # the core's section (core/scale/config_yaml.h)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.h"
#include "core/common/time.h"
#include "core/engine/engine_config.h"
#include "core/engine/profile.h"
#include "core/kv/approx_index.h"
#include "core/kv/warmup_run.h"
#include "core/route/circuit_breaker.h"
#include "core/route/config.h"
#include "core/route/endpoint.h"
#include "core/route/failover.h"
#include "core/route/flow_queue.h"
#include "core/route/lora_placement.h"
#include "core/scale/config.h"
#include "workload/adapters.h"
#include "workload/scaling_spec.h"
#include "workload/workload.h"

namespace kvgate::workload {

struct EngineGroup {
  uint32_t count = 1;
  engine::Profile profile;
  engine::EngineConfig config;
  route::Role role = route::Role::kBoth;
  std::string zone;
  std::string rack;
};

struct GatewaySpec {
  std::string model = "model";
  Nanos hop_delay = 1 * kMillisecond;
  Nanos scrape_interval = 100 * kMillisecond;
  Nanos kv_event_delay = 10 * kMillisecond;
  // Disaggregated serving: KV transfer time per 1,000 prompt tokens, and the KV usage
  // (0..1) a decode engine may not exceed by taking in a request whose prefill is done:
  // when the prompt's KV would push it over, it refuses (Mooncake's wasted prefill).
  // 0: decode engines queue instead of refusing.
  Nanos kv_transfer_per_1k_tokens = 5 * kMillisecond;
  double decode_reject_kv_usage = 0;
  // The gateway's failure rules, the structs `kvgate serve` reads (its `retries:`,
  // `circuit_breaker:` and a pool's `migration:`), with the same defaults.
  route::RetryConfig retries;
  route::BreakerConfig breaker;
  int max_migrations = 0;  // 0: streams are not migrated
};

// An endpoint failure injected into the simulated fleet.
struct FailureSpec {
  enum class Kind : uint8_t {
    kFailStop,  // the process dies: its requests fail, it accepts none until it recovers
    kSlow,      // every step takes `factor` times as long
    kErroring,  // answers a share `error_rate` of the requests it receives with a 503
  };
  uint32_t engine = 0;  // engine index (the simulator's "engine-<index>")
  Kind kind = Kind::kFailStop;
  Nanos at = 0;
  Nanos duration = -1;  // -1: until the end of the run
  double factor = 1;
  double error_rate = 1;
  Nanos end() const { return duration < 0 ? -1 : at + duration; }
};

// Gateway replicas in front of the simulated fleet for one policy (sim/replica_group.h),
// in place of `kvgate sim`'s --replicas, --sync, --sync-lag-ms and --fleet-fairness.
// YAML, in a policy:
//   gateway_replicas: {count: 4, sync: on, lag_ms: 10, fleet_fairness: on}
struct GatewayReplicasSpec {
  uint32_t count = 1;          // 1..64
  bool sync = true;            // the replicas share their routing events
  Nanos lag = 0;               // from one replica's decision to its peers applying it
  bool fleet_fairness = true;  // with sync on and flow control: the queues share service
};

struct PolicySpec {
  std::string name;  // report label, unique within the scenario
  route::RouterConfig router;
  kv::ApproxIndex::Options approx;
  // Autoscaling (scaling_spec.h): this policy's own `autoscale:` section (else the
  // scenario's), or an `oracle:`; neither, and no scenario section: a fixed fleet.
  std::optional<scale::AutoscaleConfig> autoscale;
  std::optional<OracleSpec> oracle;
  // Warm-up before traffic (docs/coldstart.md): a replica that becomes ready is sent the
  // pool's hot prefixes before it joins routing. YAML:
  //   warmup: {enabled: true, prefixes: 16, budget_s: 10, concurrency: 4}
  kv::WarmupConfig warmup;
  // Flow control (flow_spec.h): the gateway's queue in front of the pool.
  route::FlowQueueConfig flow;
  // Multi-tenant workloads: only these tenants send in this run (empty: all).
  std::vector<std::string> tenants;
  // LoRA (Scenario::adapters): whether the router is told each request's adapter (its
  // LoRA filters, route::RouteRequest::adapter) or routes on load alone, and the
  // gateway's adapter placement (route/lora_placement.h; off unless a `placement:`
  // section turns it on, as a pool's `lora_placement:`). YAML:
  //   lora: {routing: aware, placement: {interval_ms: 1000, idle_unload_ms: 300000,
  //          replica_demand: 4, backoff_ms: 30000, max_wait_ms: 10000}}
  bool lora_aware = true;
  route::LoraPlacementConfig lora_placement;
  // This run's gateway replicas (none: the command line's, by default one).
  std::optional<GatewayReplicasSpec> gateway_replicas;
};

struct Scenario {
  std::string name;
  uint64_t seed = 1;
  std::vector<EngineGroup> engines;
  GatewaySpec gateway;
  std::vector<PolicySpec> policies;
  workload::WorkloadSpec workload;
  Nanos max_time = 0;                               // 0: run until every request is done
  std::optional<scale::AutoscaleConfig> autoscale;  // default for every policy
  ScalingSpec scaling;
  std::vector<FailureSpec> failures;  // in the order written
  AdapterSpec adapters;               // LoRA adapters of the requests (count 0: none)

  uint32_t engine_count() const;
  // The policy named `name` (names are unique); null when there is none.
  const PolicySpec* policy(std::string_view name) const;
};

// Parses scenario YAML text; `base_dir` resolves relative paths (profiles, traces). A
// profile that is not a built-in is a file, read through `read_file`. Errors are in the
// format of every config error (core/common/yaml_reader.h), `file` naming the scenario
// file (empty: none): "sim.yaml:7:5: policies[0].warmup.prefixs: unknown field".
Result<Scenario> parse_scenario(const std::string& yaml_text, const std::string& base_dir,
                                const ReadFile& read_file, std::string_view file = {});
// Reads (through `read_file`) and parses a scenario file.
Result<Scenario> load_scenario(const std::string& path, const ReadFile& read_file);

}  // namespace kvgate::workload
