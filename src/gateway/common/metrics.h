// GatewayMetrics: every metric `kvgate serve` exports on /metrics, declared in this one
// place (names, help, labels, buckets) and rendered in Prometheus text format.
//
//   kvgate_requests_total{model,pool,tenant,status}        counter
//   kvgate_time_to_first_token_seconds{model}              histogram (as the client sees it)
//   kvgate_inter_token_latency_seconds{model}              histogram
//   kvgate_request_duration_seconds{model}                 histogram
//   kvgate_prompt_tokens_total{model,tenant}               counter (from usage)
//   kvgate_completion_tokens_total{model,tenant}           counter
//   kvgate_cached_tokens_total{model,tenant}               counter (prompt_tokens_details)
//   kvgate_active_streams                                  gauge
//   kvgate_active_requests                                 gauge
//   kvgate_upstream_errors_total{pool,endpoint,kind}       counter
//   kvgate_upstream_retries_total{pool}                    counter
//   kvgate_routing_decisions_total{pool,policy,reason}     counter
//   kvgate_routing_decision_seconds{pool}                  histogram (tokenize + chat template
//                                                          + block hashes + the decision on
//                                                          the pool's strand, per request)
//   kvgate_chat_template_fallbacks_total{pool,reason}      counter (chat requests routed
//                                                          approximately: bad_request,
//                                                          unsupported_content,
//                                                          request_template_untrusted,
//                                                          render_error)
//   kvgate_engine_tokenize_total{pool,result}             counter (pools whose routing ids
//                                                          come from their engines: hit,
//                                                          prefix, engine, prompt_ids; routed
//                                                          approximately: timeout,
//                                                          engine_error, refused,
//                                                          bad_response,
//                                                          no_endpoint, bad_request,
//                                                          batched_prompt)
//   kvgate_engine_tokenize_background_total{pool,result}  counter (a follow-up's ids fetched
//                                                          after it was routed: stored,
//                                                          failed, skipped)
//   kvgate_session_affinity_requests_total{pool,outcome}   counter (pools with
//                                                          session_affinity: decisions of
//                                                          requests with a session: kept,
//                                                          new, moved_load,
//                                                          moved_unavailable, moved_target)
//   kvgate_session_affinity_{bindings,rebindings,evictions,expirations}_total{pool}
//                                                          counter (the session table's,
//                                                          peers' bindings included)
//   kvgate_session_affinity_sessions{pool}                 gauge (bindings held)
//   kvgate_circuit_breaker_open{pool,endpoint}             gauge
//   kvgate_rate_limited_total{tenant,rule}                 counter (429s; rule "store"
//                                                          when fail-closed refused)
//   kvgate_rate_limit_store_failures_total                 counter (store calls that failed)
//   kvgate_pd_prefill_requests_total{pool,endpoint}        counter (P/D: prefill hops sent)
//   kvgate_pd_local_prefills_total{pool}                   counter (P/D: remote prefill skipped)
//   kvgate_pd_hop_failures_total{pool,hop,kind}            counter (P/D: hop prefill|decode)
//   kvgate_endpoint_{waiting,running,kv_usage}{pool,endpoint}  gauge (last good scrape)
//   kvgate_scrapes_total{pool,endpoint}, kvgate_scrape_errors_total{pool,endpoint}
//   kvgate_kv_event_{batches,gaps,missed,restarts,replayed,decode_errors,anomalies}_total
//                                                          counter {pool,endpoint}
//   kvgate_autoscaler_{desired,current,ready,starting,draining,min,max}_replicas{pool}
//                                                          gauge (pools with `autoscale:`)
//   kvgate_autoscaler_demand_replicas{pool}                gauge (replicas' worth of load)
//   kvgate_autoscaler_signal{pool,signal}                  gauge (per replica, as tracked)
//   kvgate_autoscaler_panic{pool}                          gauge (1 in panic mode)
//   kvgate_autoscaler_decision_info{pool,direction,limited_by}  gauge, 1 (latest decision)
//   kvgate_autoscaler_decisions_total{pool,direction}      counter (up, down, hold)
//   kvgate_autoscaler_replica_restarts_total{pool}         counter (crashed replicas replaced)
//   kvgate_lora_adapter_loads_total{pool,endpoint,adapter,outcome}    counter (LoRA placement:
//                                                          POST /v1/load_lora_adapter; ok,
//                                                          failed)
//   kvgate_lora_adapter_unloads_total{pool,endpoint,adapter,outcome}  counter (likewise, unload)
//   kvgate_predictor_{ttft,tpot}_mape{pool}               gauge (latency targets on: the
//                                                          predictor's mean absolute
//                                                          percentage error, a fraction)
//   kvgate_predictor_samples_total{pool,kind}              counter (kind ttft|tpot: samples
//                                                          the MAPE is over)
//   kvgate_predictor_predictions_total{pool}               counter (decisions the predictor
//                                                          predicted for)
//   kvgate_slo_requests_total{pool,outcome}                counter (requests with latency
//                                                          targets: met, missed, rejected)
//
// Thread-safe (one mutex, taken twice per proxied request; the active gauges are atomics). The
// series maps compare keys transparently, so an update of an existing series looks it up by
// string_view and allocates nothing.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>

#include "core/metrics/histogram.h"
#include "core/scale/horizon.h"
#include "core/scale/usage_window.h"

namespace kvgate::gateway {

// One autoscaler decision as exported (autoscale_loop.h fills it every interval).
struct AutoscalerGauges {
  int32_t desired = 0, current = 0, ready = 0, starting = 0, draining = 0;
  int32_t min = 0, max = 0;
  double demand = 0;
  std::string signal;                  // the tracked signal's name; empty for the planner
  std::optional<double> signal_value;  // per replica; none without a measurement
  bool panic = false;
  std::string direction;                        // "up", "down" or "hold"
  std::string limited_by;                       // scale::Decision::limited_by
  uint64_t restarts = 0;                        // crashed replicas replaced so far
  std::optional<scale::HorizonInputs> horizon;  // the horizon policy's inputs
};

class GatewayMetrics {
 public:
  void request_done(std::string_view model, std::string_view pool, std::string_view tenant,
                    int status, double seconds);
  void ttft(std::string_view model, double seconds);
  void itl(std::string_view model, double seconds);
  void tokens(std::string_view model, std::string_view tenant, uint64_t prompt, uint64_t completion,
              uint64_t cached);
  void stream_started();
  void stream_ended();
  void request_started();
  // The end of a proxied request (request_started's pair) in one update: request_done,
  // its time to first token, routing time and token counts when known.
  struct Finished {
    std::string_view model, pool, tenant;
    int status = 0;
    double seconds = 0;
    std::optional<double> ttft;
    std::optional<double> routing_seconds;  // from the prompt to the first pick, by pool
    bool has_tokens = false;
    uint64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
  };
  void request_finished(const Finished& f);
  void upstream_error(std::string_view pool, std::string_view endpoint, std::string_view kind);
  void retry(std::string_view pool);
  // The counter of routing decisions (pool, policy, reason), created at zero: a caller
  // that keeps it counts a decision with one atomic increment (it lives as long as this
  // object).
  std::atomic<uint64_t>& decision_counter(std::string_view pool, std::string_view policy,
                                          std::string_view reason);
  // The counters of the engine fallback (engine_tokenizer.h), created at zero and kept
  // by the caller as decision_counter's. `background`: kvgate_engine_tokenize_background.
  std::atomic<uint64_t>& engine_tokenize_counter(std::string_view pool, std::string_view result,
                                                 bool background = false);
  // Session affinity (pools with `session_affinity:`): the counter of accepted decisions
  // of requests with a session whose route::SessionOutcome is `outcome` (its to_string),
  // created at zero and kept by the caller as decision_counter's.
  std::atomic<uint64_t>& session_counter(std::string_view pool, std::string_view outcome);
  // A pool's session table (route::SessionAffinity::stats() and size()), as its strand
  // last copied it; created at zero, kept by the caller (it lives as long as this object).
  struct SessionTable {
    std::atomic<uint64_t> bound{0}, rebound{0}, evicted{0}, expired{0}, size{0};
  };
  SessionTable& session_table(std::string_view pool);
  void breaker(std::string_view pool, std::string_view endpoint, bool open);
  // One scrape of an endpoint's /metrics; the values are null when it failed.
  void scrape(std::string_view pool, std::string_view endpoint, const double* waiting,
              const double* running, const double* kv_usage);
  // Sets a per-endpoint value exported under family `name` (one of those listed above).
  void endpoint_value(std::string_view name, std::string_view pool, std::string_view endpoint,
                      double value);

  // Disaggregated prefill/decode (disagg_flow.h): a prefill hop sent to `endpoint`; a
  // request of a disaggregated pool that its decode endpoint prefills itself; a hop that
  // failed (`hop` "prefill" or "decode", `kind` as for upstream errors).
  void pd_prefill(std::string_view pool, std::string_view endpoint);
  void pd_local_prefill(std::string_view pool);
  void pd_hop_failure(std::string_view pool, std::string_view hop, std::string_view kind);
  // The latest decision of a pool's autoscaler; counts one decision of its direction.
  void autoscaler(std::string_view pool, const AutoscalerGauges& g);
  // Token counts and TTFT/ITL histograms summed over `models` (a pool's), cumulative:
  // what the autoscaler's UsageWindow differences.
  scale::UsageTotals usage(std::span<const std::string> models) const;

  // LoRA placement (lora_placer.h): an adapter loaded (`load`) or unloaded on an endpoint,
  // `outcome` "ok" or "failed".
  void lora_adapter(std::string_view pool, std::string_view endpoint, std::string_view adapter,
                    bool load, std::string_view outcome);

  // Latency targets (docs/router.md): a pool's predictor figures, created at zero on
  // first use and kept by the caller as decision_counter's; written on the pool's strand.
  struct PredictorSeries {
    std::atomic<double> ttft_mape{0}, tpot_mape{0};
    std::atomic<uint64_t> ttft_samples{0}, tpot_samples{0};
    std::atomic<uint64_t> predictions{0};
  };
  PredictorSeries& predictor(std::string_view pool);
  // A request with latency targets ended: `outcome` "met", "missed" or "rejected".
  void slo_outcome(std::string_view pool, std::string_view outcome);

  void rate_limited(std::string_view tenant, std::string_view rule);
  // A chat request the pool's template could not render exactly (routed approximately).
  void chat_template_fallback(std::string_view pool, std::string_view reason);
  void rate_limit_store_failure();
  int64_t active_streams() const;
  // The Prometheus text exposition of everything above.
  std::string render() const;

 private:
  void render_autoscalers(metrics::PrometheusWriter& w) const;  // REQUIRES: mu_ held

  using Key2 = std::tuple<std::string, std::string>;
  using Key3 = std::tuple<std::string, std::string, std::string>;
  using Key4 = std::tuple<std::string, std::string, std::string, int>;  // status last
  using Key4s = std::tuple<std::string, std::string, std::string, std::string>;
  struct TokenCounts {
    uint64_t prompt = 0, completion = 0, cached = 0;
    uint64_t reports = 0;      // requests whose usage was counted
    double completion_sq = 0;  // sum of completion^2 over them (the autoscaler's spread)
  };

  mutable std::mutex mu_;
  std::map<Key4, uint64_t, std::less<>> requests_;
  std::map<std::string, metrics::Histogram, std::less<>> ttft_, itl_, duration_;
  std::map<Key2, TokenCounts, std::less<>> tokens_;
  std::atomic<int64_t> active_streams_{0};  // updated without mu_
  std::atomic<int64_t> active_requests_{0};
  std::map<Key3, uint64_t, std::less<>> upstream_errors_;
  std::map<std::string, uint64_t, std::less<>> retries_;
  std::map<Key3, std::atomic<uint64_t>, std::less<>> decisions_;          // nodes stay put
  std::map<std::string, metrics::Histogram, std::less<>> routing_time_;   // by pool
  std::map<Key2, std::atomic<uint64_t>, std::less<>> engine_tokenize_;    // nodes stay put
  std::map<Key2, std::atomic<uint64_t>, std::less<>> engine_background_;  // likewise
  std::map<Key2, std::atomic<uint64_t>, std::less<>> session_outcomes_;   // nodes stay put
  std::map<std::string, SessionTable, std::less<>> session_tables_;       // likewise
  std::map<Key2, bool, std::less<>> breakers_;
  std::map<Key2, uint64_t, std::less<>> rate_limited_;
  std::map<Key2, uint64_t, std::less<>> chat_fallbacks_;
  uint64_t rate_limit_store_failures_ = 0;
  std::map<Key2, uint64_t> pd_prefills_;
  std::map<std::string, uint64_t> pd_local_prefills_;
  std::map<Key3, uint64_t> pd_hop_failures_;
  // (family, pool, endpoint) -> value: scraped gauges and counters copied from elsewhere.
  std::map<Key3, double, std::less<>> endpoint_values_;
  std::map<std::string, AutoscalerGauges> autoscalers_;  // by pool
  std::map<Key2, uint64_t> autoscaler_decisions_;        // (pool, direction)
  // (pool, endpoint, adapter, outcome)
  std::map<Key4s, uint64_t> lora_loads_, lora_unloads_;
  std::map<std::string, PredictorSeries, std::less<>> predictors_;  // by pool; nodes stay put
  std::map<Key2, uint64_t, std::less<>> slo_outcomes_;              // (pool, outcome)
  // The series the last request_finished updated (map nodes: their addresses stay).
  struct Recent {
    std::string model, pool, tenant;
    int status = -1;
    uint64_t* requests = nullptr;
    metrics::Histogram* duration = nullptr;
    metrics::Histogram* ttft = nullptr;
    metrics::Histogram* routing = nullptr;
    TokenCounts* tokens = nullptr;
  };
  Recent recent_;  // under mu_
};

}  // namespace kvgate::gateway
