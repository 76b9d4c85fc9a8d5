// Report: what one simulated run measured, summarised per policy and per stage.
//
// The simulator records one RequestRecord per request and samples the engines' waiting
// queues at every metrics scrape; summarize() turns that into the figures llm-d's
// benchmark reports, computed the same way (see docs/sim.md):
//   - TTFT percentiles over every non-warmup request that got a first token;
//   - mean ITL weighted by tokens (decode time / decode tokens);
//   - output tokens/s as the mean over non-warmup stages of each stage's throughput
//     (output tokens of the requests sent in the stage / the time from the stage's first
//     arrival to its last finish), which is how inference-perf's summary is built; the
//     plain overall rate is reported beside it;
//   - prefix-cache hit rate: prompt tokens the engines found cached / prompt tokens;
//   - mean waiting queue per engine (time average of the scrape samples);
//   - rejected requests.
// `kvgate bench` records the same RequestRecords from a live endpoint
// (loadgen/load_generator.h), so both print the same table and write the same files
// (report_files.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/time.h"
#include "core/route/latency_predictor.h"
#include "workload/workload.h"

namespace kvgate::workload {

struct RequestRecord {
  uint32_t stage = 0;
  uint32_t endpoint = 0;
  Nanos arrival = 0;
  Nanos first_token = -1;  // -1: none (rejected or unfinished)
  Nanos finish = -1;
  uint32_t prompt_tokens = 0;
  uint32_t cached_tokens = 0;  // prompt tokens found in the engine's prefix cache
  uint32_t output_tokens = 0;  // tokens actually produced
  bool rejected = false;
  // Latency targets the request carried (workload `targets`), 0 = none.
  Nanos ttft_target = 0;
  Nanos tpot_target = 0;
  // Disaggregated: refused by the decode engine after its prefill was computed (the
  // prefill work is wasted); rejected is set too.
  bool rejected_after_prefill = false;
  uint32_t prefill_engine = UINT32_MAX;  // UINT32_MAX: prefilled where it decodes
  // Flow control: the tenant (multi-tenant workloads), how long it waited in the
  // gateway's queue (-1: never queued), and why it was refused ("" when it was not).
  uint32_t tenant = 0;
  Nanos queue_wait = -1;
  std::string_view reject_reason;
  // Injected failures (kvgate sim's failures:): the gateway gave up on it (lost: a 502,
  // or a stream ended by an error event), retried it on another endpoint (times), or
  // moved its stream to another endpoint.
  bool failed = false;
  uint16_t retries = 0;
  bool migrated = false;
  // Session affinity (the simulator, a policy with session_affinity:): its first routing
  // carried a session, and affinity kept it on its endpoint, or its bound endpoint could
  // not keep it and the policy chose (over the load bound, no candidate, off target).
  bool session = false;
  bool session_kept = false;
  bool session_moved = false;
};

// One scrape-time sample of the cluster.
struct ClusterSample {
  Nanos at = 0;
  double mean_waiting = 0;   // mean over engines of waiting requests
  double mean_kv_usage = 0;  // mean over engines, 0..1
  // Disaggregated clusters: the same over prefill-role and decode-role engines.
  double prefill_waiting = 0;
  double decode_kv_usage = 0;
  // Mean over prefill engines of the prompt tokens routed there and not yet prefilled,
  // as the router counts them (its queue, what early rejection predicts from).
  double prefill_queued_tokens = 0;
  // Mean over prefill engines of the share of the last scrape interval they spent
  // computing, 0..1 (a step's time spread over the intervals it covers).
  double prefill_busy = 0;
  double queued = 0;  // flow control: requests waiting in the gateway's queue
};

// One autoscaler control tick (autoscaled runs only).
struct ScaleSample {
  Nanos at = 0;
  uint32_t ready = 0;          // replicas serving
  uint32_t starting = 0;       // launched, not yet healthy
  uint32_t draining = 0;       // finishing their requests before they stop
  int32_t desired = 0;         // the decision's desired replicas
  double arrival_qps = 0;      // arrivals at the gateway over the last interval, per second
  double waiting = 0;          // waiting requests in the pool (as scraped)
  double gpu_utilization = 0;  // mean over ready replicas, 0..1
};

// One replica's life, by engine index (RequestRecord::endpoint).
struct ReplicaLife {
  Nanos launched_at = 0;
  Nanos ready_at = 0;     // -1: never became ready (cancelled while starting, or the run ended)
  Nanos drained_at = -1;  // -1: never drained
  Nanos stopped_at = -1;  // -1: still up when the run ended
  // When it joined routing: ready_at, or the end of its warm-up (-1: never).
  Nanos admitted_at = -1;
  uint32_t warmup_requests = 0;  // warm-up requests answered
  uint64_t warmup_tokens = 0;    // their prompt tokens
};

struct PolicyRun {
  std::string policy;
  std::vector<RequestRecord> requests;
  std::vector<ClusterSample> samples;
  Nanos end_time = 0;       // virtual time when the run ended
  double wall_seconds = 0;  // real time the run took
  double cpu_seconds = 0;   // CPU time the run took (the machine may be shared)
  uint64_t events = 0;      // events processed
  // Autoscaling (scaling_spec.h). GPU-seconds count every replica from launch (it holds
  // its GPUs while it boots) to stop, times the GPUs per replica.
  bool autoscaled = false;
  double gpu_seconds = 0;
  uint32_t launches = 0;  // replicas launched after the start
  std::vector<ScaleSample> scale;
  std::vector<ReplicaLife> replicas;
  // Injected failures: whether the scenario had any (the report then shows the figures
  // below), and how often an endpoint's circuit breaker opened.
  bool failures_injected = false;
  uint64_t breaker_openings = 0;
  // LoRA (the scenario has adapters): adapters the engines loaded into a slot (on first
  // use or by the placement's loads), the loads that evicted another adapter, and the
  // placement's load and unload actions.
  bool lora = false;
  uint64_t adapter_loads = 0;
  uint64_t adapter_evictions = 0;
  uint64_t placement_actions = 0;
  // Session affinity: whether the policy keeps it (the report then shows the session
  // figures; runs where no policy does print what they printed before it existed).
  bool sessions = false;
  // Latency targets: whether the policy has them on or the workload attaches any (the
  // report then shows the figures below), whether the policy predicts, and the
  // predictor's errors over the run (summed over gateway replicas).
  bool latency_targets = false;
  bool predictor = false;
  route::PredictionError predictor_ttft;
  route::PredictionError predictor_tpot;
};

struct StageSummary {
  double qps = 0;
  bool warmup = false;
  uint64_t requests = 0;
  double ttft_p50 = 0, ttft_p90 = 0, ttft_mean = 0;  // seconds
  double output_tps = 0;
  double requests_per_s = 0;
  double hit_rate = 0;
};

struct Summary {
  std::string policy;
  uint64_t requests = 0;  // non-warmup requests sent
  uint64_t completed = 0;
  uint64_t rejected = 0;
  uint64_t rejected_after_prefill = 0;  // of which after a wasted prefill
  uint64_t wasted_prefill_tokens = 0;   // prompt tokens prefilled for nothing
  double ttft_p50 = 0, ttft_p90 = 0, ttft_p99 = 0, ttft_mean = 0;  // seconds
  double itl_mean = 0;                                             // seconds
  double output_tps = 0;          // mean of per-stage throughputs (llm-d's summary)
  double output_tps_overall = 0;  // all output tokens / span of the run
  double hit_rate = 0;
  double mean_waiting = 0;
  double mean_kv_usage = 0;
  double speedup = 0;      // virtual seconds per wall second
  double speedup_cpu = 0;  // virtual seconds per CPU second
  // Injected failures (shown only when failure_report: a run without failures prints
  // what it printed before they existed). Non-warm-up requests lost, retried at least
  // once, and whose stream migrated; breaker openings over the whole run.
  bool failure_report = false;
  uint64_t failed = 0;
  uint64_t retried = 0;
  uint64_t migrated = 0;
  uint64_t breaker_openings = 0;
  // LoRA (shown only when lora_report, as failures): the engines' adapter loads, per
  // minute of the run (thrash), evictions, and the placement's actions.
  bool lora_report = false;
  uint64_t adapter_loads = 0;
  double adapter_loads_per_min = 0;
  uint64_t adapter_evictions = 0;
  uint64_t placement_actions = 0;
  // Session affinity (shown only when session_report, as failures; 0 for a policy
  // without it beside one with): non-warm-up requests routed with a session, of which
  // affinity kept on their endpoint (the hit rate: kept / session requests) and of which
  // the policy moved from theirs; the rest had no binding (first turns, evicted, expired).
  bool session_report = false;
  uint64_t session_requests = 0;
  uint64_t session_kept = 0;
  uint64_t session_moved = 0;
  double session_hit_rate = 0;
  // Latency targets (shown only when latency_report, as failures): non-warm-up requests
  // carrying a target; the share of those with a TTFT target whose TTFT (arrival to first
  // token) met it, of those with a TPOT target whose mean time per output token over
  // decode met it, and of all of them that met every target they carry; a refused or lost
  // request meets none. p90 TTFT of the requests without targets. The predictor's MAPE
  // (fractions; predictor false: none).
  bool latency_report = false;
  bool predictor = false;
  uint64_t targeted = 0;
  double ttft_target_met = 0;
  double tpot_target_met = 0;
  double slo_met = 0;
  double untargeted_ttft_p90 = 0;
  double ttft_mape = 0, tpot_mape = 0;
  uint64_t ttft_samples = 0, tpot_samples = 0;
  std::vector<StageSummary> stages;
};

Summary summarize(const PolicyRun& run, const std::vector<workload::StageInfo>& stages);

// The q-quantile (0..1) of `values`, linear interpolation; 0 for an empty input.
double quantile(std::vector<double> values, double q);

// Renderings of a scenario's summaries (one per policy, same arrivals).
std::string format_table(const std::string& scenario, const std::vector<Summary>& summaries);
std::string summary_csv(const std::vector<Summary>& summaries);
std::string stages_csv(const std::vector<Summary>& summaries);
std::string report_json(const std::string& scenario, uint64_t seed,
                        const std::vector<Summary>& summaries);

}  // namespace kvgate::workload
