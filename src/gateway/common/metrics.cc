#include "gateway/common/metrics.h"

#include <algorithm>

#include "core/metrics/prometheus_text.h"

namespace kvgate::gateway {
namespace {

// Latency buckets in seconds: from 1 ms (a cached short prompt) to minutes.
const std::vector<double>& ttft_bounds() {
  static const std::vector<double> b{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,
                                     0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0};
  return b;
}
const std::vector<double>& itl_bounds() {
  static const std::vector<double> b{0.001, 0.005, 0.01,  0.015, 0.02, 0.025, 0.03,
                                     0.04,  0.05,  0.075, 0.1,   0.15, 0.2,   0.3,
                                     0.4,   0.5,   0.75,  1.0,   2.5};
  return b;
}
const std::vector<double>& duration_bounds() {
  static const std::vector<double> b{0.01, 0.05, 0.1,  0.25, 0.5,   1.0,   2.5,  5.0,
                                     10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 640.0};
  return b;
}

// Routing decision buckets: 10 us steps up to 200 us, then coarser to 100 ms (the target
// is a p99 under 1 ms including tokenization).
const std::vector<double>& routing_bounds() {
  static const std::vector<double> b = [] {
    std::vector<double> v;
    for (int us = 10; us <= 200; us += 10) v.push_back(us * 1e-6);
    for (double us : {250.0, 300.0, 400.0, 500.0, 600.0, 700.0, 800.0, 900.0, 1000.0, 1250.0,
                      1500.0, 2000.0, 3000.0, 5000.0, 7500.0, 10000.0, 25000.0, 100000.0}) {
      v.push_back(us * 1e-6);
    }
    return v;
  }();
  return b;
}

metrics::Histogram& series(std::map<std::string, metrics::Histogram, std::less<>>& m,
                           std::string_view key, const std::vector<double>& bounds) {
  auto it = m.find(key);
  if (it == m.end()) it = m.emplace(std::string(key), metrics::Histogram(bounds)).first;
  return it->second;
}

// The value of the series `probe` (a tuple of string_views, and ints), created at zero
// on first use: the lookup allocates only then.
template <typename Map, typename... Parts>
typename Map::mapped_type& slot(Map& m, Parts... parts) {
  const auto probe = std::make_tuple(parts...);
  auto it = m.find(probe);
  if (it == m.end()) it = m.try_emplace(typename Map::key_type(probe)).first;
  return it->second;
}

}  // namespace

void GatewayMetrics::request_done(std::string_view model, std::string_view pool,
                                  std::string_view tenant, int status, double seconds) {
  std::lock_guard lock(mu_);
  ++slot(requests_, model, pool, tenant, status);
  if (!model.empty()) series(duration_, model, duration_bounds()).observe(seconds);
}

void GatewayMetrics::request_finished(const Finished& f) {
  {
    std::lock_guard lock(mu_);
    // Most requests go to the series of the one before: found again by four comparisons,
    // not five map lookups. Series are created when first used, as by the lookups.
    Recent& r = recent_;
    if (r.status != f.status || r.model != f.model || r.pool != f.pool || r.tenant != f.tenant) {
      r = Recent{.model = std::string(f.model),
                 .pool = std::string(f.pool),
                 .tenant = std::string(f.tenant),
                 .status = f.status};
      r.requests = &slot(requests_, f.model, f.pool, f.tenant, f.status);
    }
    ++*r.requests;
    if (!f.model.empty()) {
      if (!r.duration) r.duration = &series(duration_, f.model, duration_bounds());
      r.duration->observe(f.seconds);
    }
    if (f.ttft) {
      if (!r.ttft) r.ttft = &series(ttft_, f.model, ttft_bounds());
      r.ttft->observe(*f.ttft);
    }
    if (f.routing_seconds) {
      if (!r.routing) r.routing = &series(routing_time_, f.pool, routing_bounds());
      r.routing->observe(*f.routing_seconds);
    }
    if (f.has_tokens) {
      if (!r.tokens) r.tokens = &slot(tokens_, f.model, f.tenant);
      r.tokens->prompt += f.prompt_tokens;
      r.tokens->completion += f.completion_tokens;
      r.tokens->cached += f.cached_tokens;
      r.tokens->completion_sq +=
          static_cast<double>(f.completion_tokens) * static_cast<double>(f.completion_tokens);
      ++r.tokens->reports;
    }
  }
  active_requests_.fetch_sub(1, std::memory_order_relaxed);
}

void GatewayMetrics::ttft(std::string_view model, double seconds) {
  std::lock_guard lock(mu_);
  series(ttft_, model, ttft_bounds()).observe(seconds);
}

void GatewayMetrics::itl(std::string_view model, double seconds) {
  std::lock_guard lock(mu_);
  series(itl_, model, itl_bounds()).observe(seconds);
}

void GatewayMetrics::tokens(std::string_view model, std::string_view tenant, uint64_t prompt,
                            uint64_t completion, uint64_t cached) {
  std::lock_guard lock(mu_);
  TokenCounts& t = slot(tokens_, model, tenant);
  t.prompt += prompt;
  t.completion += completion;
  t.cached += cached;
  t.completion_sq += static_cast<double>(completion) * static_cast<double>(completion);
  ++t.reports;
}

void GatewayMetrics::autoscaler(std::string_view pool, const AutoscalerGauges& g) {
  std::lock_guard lock(mu_);
  autoscalers_[std::string(pool)] = g;
  ++autoscaler_decisions_[Key2{pool, g.direction}];
}

scale::UsageTotals GatewayMetrics::usage(std::span<const std::string> models) const {
  std::lock_guard lock(mu_);
  scale::UsageTotals u;
  for (const std::string& model : models) {
    for (auto it = tokens_.lower_bound(Key2{model, ""});
         it != tokens_.end() && std::get<0>(it->first) == model; ++it) {
      u.prompt_tokens += it->second.prompt;
      u.completion_tokens += it->second.completion;
      u.requests += it->second.reports;
      u.completion_tokens_sq += it->second.completion_sq;
    }
    if (auto it = ttft_.find(model); it != ttft_.end()) {
      scale::add_histogram(u.ttft, it->second.snapshot());
    }
    if (auto it = itl_.find(model); it != itl_.end()) {
      scale::add_histogram(u.itl, it->second.snapshot());
    }
  }
  return u;
}

void GatewayMetrics::stream_started() { active_streams_.fetch_add(1, std::memory_order_relaxed); }
void GatewayMetrics::stream_ended() { active_streams_.fetch_sub(1, std::memory_order_relaxed); }
void GatewayMetrics::request_started() { active_requests_.fetch_add(1, std::memory_order_relaxed); }

void GatewayMetrics::upstream_error(std::string_view pool, std::string_view endpoint,
                                    std::string_view kind) {
  std::lock_guard lock(mu_);
  ++slot(upstream_errors_, pool, endpoint, kind);
}

void GatewayMetrics::retry(std::string_view pool) {
  std::lock_guard lock(mu_);
  auto it = retries_.find(pool);
  if (it == retries_.end()) it = retries_.emplace(std::string(pool), 0).first;
  ++it->second;
}

std::atomic<uint64_t>& GatewayMetrics::decision_counter(std::string_view pool,
                                                        std::string_view policy,
                                                        std::string_view reason) {
  std::lock_guard lock(mu_);
  return slot(decisions_, pool, policy, reason);
}

std::atomic<uint64_t>& GatewayMetrics::engine_tokenize_counter(std::string_view pool,
                                                               std::string_view result,
                                                               bool background) {
  std::lock_guard lock(mu_);
  return slot(background ? engine_background_ : engine_tokenize_, pool, result);
}

std::atomic<uint64_t>& GatewayMetrics::session_counter(std::string_view pool,
                                                       std::string_view outcome) {
  std::lock_guard lock(mu_);
  return slot(session_outcomes_, pool, outcome);
}

GatewayMetrics::SessionTable& GatewayMetrics::session_table(std::string_view pool) {
  std::lock_guard lock(mu_);
  auto it = session_tables_.find(pool);
  if (it == session_tables_.end()) it = session_tables_.try_emplace(std::string(pool)).first;
  return it->second;
}

GatewayMetrics::PredictorSeries& GatewayMetrics::predictor(std::string_view pool) {
  std::lock_guard lock(mu_);
  auto it = predictors_.find(pool);
  if (it == predictors_.end()) it = predictors_.try_emplace(std::string(pool)).first;
  return it->second;
}

void GatewayMetrics::slo_outcome(std::string_view pool, std::string_view outcome) {
  std::lock_guard lock(mu_);
  ++slot(slo_outcomes_, pool, outcome);
}

void GatewayMetrics::breaker(std::string_view pool, std::string_view endpoint, bool open) {
  std::lock_guard lock(mu_);
  slot(breakers_, pool, endpoint) = open;
}

void GatewayMetrics::rate_limited(std::string_view tenant, std::string_view rule) {
  std::lock_guard lock(mu_);
  ++slot(rate_limited_, tenant, rule);
}

void GatewayMetrics::chat_template_fallback(std::string_view pool, std::string_view reason) {
  std::lock_guard lock(mu_);
  ++slot(chat_fallbacks_, pool, reason);
}

void GatewayMetrics::rate_limit_store_failure() {
  std::lock_guard lock(mu_);
  ++rate_limit_store_failures_;
}

void GatewayMetrics::pd_prefill(std::string_view pool, std::string_view endpoint) {
  std::lock_guard lock(mu_);
  ++pd_prefills_[Key2{pool, endpoint}];
}

void GatewayMetrics::pd_local_prefill(std::string_view pool) {
  std::lock_guard lock(mu_);
  ++pd_local_prefills_[std::string(pool)];
}

void GatewayMetrics::pd_hop_failure(std::string_view pool, std::string_view hop,
                                    std::string_view kind) {
  std::lock_guard lock(mu_);
  ++pd_hop_failures_[Key3{pool, hop, kind}];
}

void GatewayMetrics::lora_adapter(std::string_view pool, std::string_view endpoint,
                                  std::string_view adapter, bool load, std::string_view outcome) {
  std::lock_guard lock(mu_);
  ++(load ? lora_loads_ : lora_unloads_)[Key4s{pool, endpoint, adapter, outcome}];
}

void GatewayMetrics::scrape(std::string_view pool, std::string_view endpoint, const double* waiting,
                            const double* running, const double* kv_usage) {
  std::lock_guard lock(mu_);
  auto set = [&](std::string_view name, double v) {
    endpoint_values_[Key3{name, pool, endpoint}] = v;
  };
  set("kvgate_scrapes_total", endpoint_values_[Key3{"kvgate_scrapes_total", pool, endpoint}] + 1);
  double& errors = endpoint_values_[Key3{"kvgate_scrape_errors_total", pool, endpoint}];
  if (waiting == nullptr) {
    errors += 1;
    return;
  }
  set("kvgate_endpoint_waiting", *waiting);
  set("kvgate_endpoint_running", *running);
  set("kvgate_endpoint_kv_usage", *kv_usage);
}

void GatewayMetrics::endpoint_value(std::string_view name, std::string_view pool,
                                    std::string_view endpoint, double value) {
  std::lock_guard lock(mu_);
  endpoint_values_[Key3{name, pool, endpoint}] = value;
}

int64_t GatewayMetrics::active_streams() const { return active_streams_.load(); }

std::string GatewayMetrics::render() const {
  std::lock_guard lock(mu_);
  metrics::PrometheusWriter w;
  w.header("kvgate_requests_total", "Requests answered, by model, pool, tenant and status.",
           "counter");
  for (const auto& [k, v] : requests_) {
    const auto& [model, pool, tenant, status] = k;
    w.sample(
        "kvgate_requests_total",
        {{"model", model}, {"pool", pool}, {"tenant", tenant}, {"status", std::to_string(status)}},
        static_cast<double>(v));
  }
  auto histograms = [&](const char* name, const char* help,
                        const std::map<std::string, metrics::Histogram, std::less<>>& m) {
    w.header(name, help, "histogram");
    for (const auto& [model, h] : m) w.histogram_series(name, {{"model", model}}, h.snapshot());
  };
  histograms("kvgate_time_to_first_token_seconds",
             "Time from request received to the first token sent, as the client sees it.", ttft_);
  histograms("kvgate_inter_token_latency_seconds", "Time between token events sent to the client.",
             itl_);
  histograms("kvgate_request_duration_seconds", "Time from request received to its end.",
             duration_);
  auto token_family = [&](const char* name, const char* help, uint64_t TokenCounts::*field) {
    w.header(name, help, "counter");
    for (const auto& [k, t] : tokens_) {
      const auto& [model, tenant] = k;
      w.sample(name, {{"model", model}, {"tenant", tenant}}, static_cast<double>(t.*field));
    }
  };
  token_family("kvgate_prompt_tokens_total", "Prompt tokens, from the engines' usage.",
               &TokenCounts::prompt);
  token_family("kvgate_completion_tokens_total", "Completion tokens, from the engines' usage.",
               &TokenCounts::completion);
  token_family("kvgate_cached_tokens_total",
               "Prompt tokens served from the engines' prefix cache (usage.prompt_tokens_details).",
               &TokenCounts::cached);
  w.gauge("kvgate_active_streams", "Streamed responses in progress.", {},
          static_cast<double>(active_streams_.load()));
  w.gauge("kvgate_active_requests", "Requests in progress (streamed or not).", {},
          static_cast<double>(active_requests_.load()));
  w.header("kvgate_upstream_errors_total",
           "Failed upstream exchanges, by pool, endpoint and kind (connect, timeout, closed, "
           "protocol, status_503).",
           "counter");
  for (const auto& [k, v] : upstream_errors_) {
    const auto& [pool, endpoint, kind] = k;
    w.sample("kvgate_upstream_errors_total",
             {{"pool", pool}, {"endpoint", endpoint}, {"kind", kind}}, static_cast<double>(v));
  }
  w.header("kvgate_upstream_retries_total",
           "Requests sent again to another endpoint before any byte reached the client.",
           "counter");
  for (const auto& [pool, v] : retries_) {
    w.sample("kvgate_upstream_retries_total", {{"pool", pool}}, static_cast<double>(v));
  }
  w.header("kvgate_routing_decisions_total",
           "Routing decisions by pool, policy and reason (ok or the rejection reason).", "counter");
  for (const auto& [k, v] : decisions_) {
    const auto& [pool, policy, reason] = k;
    w.sample("kvgate_routing_decisions_total",
             {{"pool", pool}, {"policy", policy}, {"reason", reason}},
             static_cast<double>(v.load(std::memory_order_relaxed)));
  }
  if (!predictors_.empty()) {
    auto gauge = [&](std::string_view name, std::string_view help, auto field) {
      w.header(name, help, "gauge");
      for (const auto& [pool, p] : predictors_) {
        w.sample(name, {{"pool", pool}}, (p.*field).load(std::memory_order_relaxed));
      }
    };
    gauge("kvgate_predictor_ttft_mape",
          "Latency targets: mean absolute percentage error of the predicted time to first "
          "token, over every sample of the pool (a fraction: 0.1 is 10%).",
          &PredictorSeries::ttft_mape);
    gauge("kvgate_predictor_tpot_mape",
          "Latency targets: mean absolute percentage error of the predicted time per output "
          "token, over every sample of the pool (a fraction).",
          &PredictorSeries::tpot_mape);
    w.header("kvgate_predictor_samples_total",
             "Latency targets: measurements the predictor learned from and was scored on, by "
             "kind (ttft, tpot).",
             "counter");
    for (const auto& [pool, p] : predictors_) {
      w.sample("kvgate_predictor_samples_total", {{"pool", pool}, {"kind", "ttft"}},
               static_cast<double>(p.ttft_samples.load(std::memory_order_relaxed)));
      w.sample("kvgate_predictor_samples_total", {{"pool", pool}, {"kind", "tpot"}},
               static_cast<double>(p.tpot_samples.load(std::memory_order_relaxed)));
    }
    w.header("kvgate_predictor_predictions_total",
             "Latency targets: routing decisions whose chosen endpoint's latency was predicted.",
             "counter");
    for (const auto& [pool, p] : predictors_) {
      w.sample("kvgate_predictor_predictions_total", {{"pool", pool}},
               static_cast<double>(p.predictions.load(std::memory_order_relaxed)));
    }
  }
  w.header("kvgate_slo_requests_total",
           "Requests with latency targets by outcome: met (time to first token, and for a "
           "stream the time per output token, within the targets, as the client saw them), "
           "missed, rejected (slo_unattainable).",
           "counter");
  for (const auto& [k, v] : slo_outcomes_) {
    const auto& [pool, outcome] = k;
    w.sample("kvgate_slo_requests_total", {{"pool", pool}, {"outcome", outcome}},
             static_cast<double>(v));
  }
  w.header("kvgate_engine_tokenize_total",
           "Requests of pools whose routing ids come from their engines (POST /tokenize), by "
           "how the ids were found: hit (cached), prefix (a follow-up: the cached ids of the "
           "conversation so far, its new messages as pseudo-tokens), engine (asked), "
           "prompt_ids (given); or why the request was routed on pseudo-tokens: timeout, "
           "engine_error, refused (a 4xx answer), bad_response, no_endpoint, bad_request, "
           "batched_prompt.",
           "counter");
  for (const auto& [k, v] : engine_tokenize_) {
    const auto& [pool, result] = k;
    w.sample("kvgate_engine_tokenize_total", {{"pool", pool}, {"result", result}},
             static_cast<double>(v.load(std::memory_order_relaxed)));
  }
  w.header("kvgate_engine_tokenize_background_total",
           "Follow-ups routed on their cached prefix whose whole ids were then fetched from an "
           "engine for the next turn: stored, failed, or skipped (too many in flight).",
           "counter");
  for (const auto& [k, v] : engine_background_) {
    const auto& [pool, result] = k;
    w.sample("kvgate_engine_tokenize_background_total", {{"pool", pool}, {"result", result}},
             static_cast<double>(v.load(std::memory_order_relaxed)));
  }
  w.header("kvgate_routing_decision_seconds",
           "Time to route a request: tokenization, chat template, block hashes and the "
           "decision on the pool's strand.",
           "histogram");
  for (const auto& [pool, h] : routing_time_) {
    w.histogram_series("kvgate_routing_decision_seconds", {{"pool", pool}}, h.snapshot());
  }
  w.header("kvgate_session_affinity_requests_total",
           "Routing decisions of requests with a session, in pools with session affinity, by "
           "outcome: kept (on its endpoint), new (no binding: a first turn, evicted or "
           "expired), or moved by the policy because its endpoint was over the load bound "
           "(moved_load), no candidate (moved_unavailable: unhealthy, held, excluded by a "
           "retry, gone) or predicted to miss the request's latency targets (moved_target).",
           "counter");
  for (const auto& [k, v] : session_outcomes_) {
    const auto& [pool, outcome] = k;
    w.sample("kvgate_session_affinity_requests_total", {{"pool", pool}, {"outcome", outcome}},
             static_cast<double>(v.load(std::memory_order_relaxed)));
  }
  struct TableSeries {
    const char* name;
    const char* help;
    std::atomic<uint64_t> SessionTable::*field;
    const char* type;
  };
  const TableSeries table_series[] = {
      {"kvgate_session_affinity_bindings_total",
       "Sessions bound for the first time (by this replica's decisions or its peers').",
       &SessionTable::bound, "counter"},
      {"kvgate_session_affinity_rebindings_total", "Sessions bound to another endpoint.",
       &SessionTable::rebound, "counter"},
      {"kvgate_session_affinity_evictions_total",
       "Bindings dropped for room (the least recently used, at capacity).", &SessionTable::evicted,
       "counter"},
      {"kvgate_session_affinity_expirations_total",
       "Bindings dropped for idling longer than idle_ttl.", &SessionTable::expired, "counter"},
      {"kvgate_session_affinity_sessions", "Session bindings held.", &SessionTable::size, "gauge"},
  };
  for (const TableSeries& series : table_series) {
    w.header(series.name, series.help, series.type);
    for (const auto& [pool, t] : session_tables_) {
      w.sample(series.name, {{"pool", pool}},
               static_cast<double>((t.*series.field).load(std::memory_order_relaxed)));
    }
  }
  w.header("kvgate_circuit_breaker_open", "1 while an endpoint's circuit breaker is open.",
           "gauge");
  for (const auto& [k, open] : breakers_) {
    const auto& [pool, endpoint] = k;
    w.sample("kvgate_circuit_breaker_open", {{"pool", pool}, {"endpoint", endpoint}}, open ? 1 : 0);
  }
  w.header("kvgate_rate_limited_total",
           "Requests refused with 429 by a rate limit, by tenant and rule (\"store\": the "
           "counter store failed and on_store_failure is fail-closed).",
           "counter");
  for (const auto& [k, v] : rate_limited_) {
    const auto& [tenant, rule] = k;
    w.sample("kvgate_rate_limited_total", {{"tenant", tenant}, {"rule", rule}},
             static_cast<double>(v));
  }
  w.header("kvgate_chat_template_fallbacks_total",
           "Chat requests the pool's chat template could not render exactly, routed on their "
           "raw text instead, by pool and reason (bad_request, unsupported_content, "
           "request_template_untrusted, render_error).",
           "counter");
  for (const auto& [k, v] : chat_fallbacks_) {
    const auto& [pool, reason] = k;
    w.sample("kvgate_chat_template_fallbacks_total", {{"pool", pool}, {"reason", reason}},
             static_cast<double>(v));
  }
  w.header("kvgate_rate_limit_store_failures_total",
           "Rate-limit counter store calls (check or charge) that failed.", "counter");
  w.sample("kvgate_rate_limit_store_failures_total", {},
           static_cast<double>(rate_limit_store_failures_));
  w.header("kvgate_pd_prefill_requests_total",
           "Disaggregated requests: prefill hops sent, by pool and prefill endpoint.", "counter");
  for (const auto& [k, v] : pd_prefills_) {
    const auto& [pool, endpoint] = k;
    w.sample("kvgate_pd_prefill_requests_total", {{"pool", pool}, {"endpoint", endpoint}},
             static_cast<double>(v));
  }
  w.header("kvgate_pd_local_prefills_total",
           "Requests of a disaggregated pool whose remote prefill was skipped (the decode "
           "endpoint prefills itself: little of the prompt uncached there).",
           "counter");
  for (const auto& [pool, v] : pd_local_prefills_) {
    w.sample("kvgate_pd_local_prefills_total", {{"pool", pool}}, static_cast<double>(v));
  }
  w.header("kvgate_pd_hop_failures_total",
           "Failed hops of disaggregated requests, by pool, hop (prefill, decode) and kind "
           "(connect, timeout, closed, protocol, status_NNN, no_kv_transfer_params).",
           "counter");
  for (const auto& [k, v] : pd_hop_failures_) {
    const auto& [pool, hop, kind] = k;
    w.sample("kvgate_pd_hop_failures_total", {{"pool", pool}, {"hop", hop}, {"kind", kind}},
             static_cast<double>(v));
  }
  for (const bool load : {true, false}) {
    const char* name =
        load ? "kvgate_lora_adapter_loads_total" : "kvgate_lora_adapter_unloads_total";
    w.header(name,
             load ? "LoRA adapters the placement loaded on an endpoint "
                    "(POST /v1/load_lora_adapter), by outcome (ok, failed)."
                  : "LoRA adapters the placement unloaded from an endpoint "
                    "(POST /v1/unload_lora_adapter), by outcome (ok, failed).",
             "counter");
    for (const auto& [k, v] : load ? lora_loads_ : lora_unloads_) {
      const auto& [pool, endpoint, adapter, outcome] = k;
      w.sample(name,
               {{"pool", pool}, {"endpoint", endpoint}, {"adapter", adapter}, {"outcome", outcome}},
               static_cast<double>(v));
    }
  }
  struct Family {
    const char* name;
    const char* help;
    const char* type;
  };
  static constexpr Family kFamilies[] = {
      {"kvgate_endpoint_waiting", "Requests waiting at the endpoint (last good scrape).", "gauge"},
      {"kvgate_endpoint_running", "Requests running at the endpoint (last good scrape).", "gauge"},
      {"kvgate_endpoint_kv_usage", "KV cache usage of the endpoint, 0..1 (last good scrape).",
       "gauge"},
      {"kvgate_scrapes_total", "Scrapes of the endpoint's /metrics.", "counter"},
      {"kvgate_scrape_errors_total", "Failed scrapes (the router's view of it goes stale).",
       "counter"},
      {"kvgate_kv_event_batches_total", "KV event batches applied to the precise index.",
       "counter"},
      {"kvgate_kv_event_gaps_total", "Gaps detected in the KV event sequence.", "counter"},
      {"kvgate_kv_event_missed_total", "KV event batches lost (not recovered by replay).",
       "counter"},
      {"kvgate_kv_event_restarts_total",
       "Engine restarts seen (sequence back to 0, or /metrics down then up: resynced).", "counter"},
      {"kvgate_kv_event_replayed_total", "KV event batches recovered through replay.", "counter"},
      {"kvgate_kv_event_decode_errors_total", "KV event messages that failed to decode.",
       "counter"},
      {"kvgate_kv_event_anomalies_total",
       "Events the precise index ignored (unknown parent or removed block, block size mismatch).",
       "counter"},
  };
  for (const Family& f : kFamilies) {
    w.header(f.name, f.help, f.type);
    for (auto it = endpoint_values_.lower_bound(Key3{f.name, "", ""});
         it != endpoint_values_.end() && std::get<0>(it->first) == f.name; ++it) {
      w.sample(f.name, {{"pool", std::get<1>(it->first)}, {"endpoint", std::get<2>(it->first)}},
               it->second);
    }
  }
  render_autoscalers(w);
  return w.take();
}

void GatewayMetrics::render_autoscalers(metrics::PrometheusWriter& w) const {
  if (autoscalers_.empty()) return;
  struct Gauge {
    const char* name;
    const char* help;
    int32_t AutoscalerGauges::*field;
  };
  static constexpr Gauge kGauges[] = {
      {"kvgate_autoscaler_desired_replicas",
       "Replicas the autoscaler wants for the pool (what KEDA or an HPA should scale to).",
       &AutoscalerGauges::desired},
      {"kvgate_autoscaler_current_replicas", "Replicas ready or starting (not draining).",
       &AutoscalerGauges::current},
      {"kvgate_autoscaler_ready_replicas", "Replicas serving.", &AutoscalerGauges::ready},
      {"kvgate_autoscaler_starting_replicas", "Replicas launched and not yet healthy.",
       &AutoscalerGauges::starting},
      {"kvgate_autoscaler_draining_replicas", "Replicas finishing their requests before they stop.",
       &AutoscalerGauges::draining},
      {"kvgate_autoscaler_min_replicas", "Lower bound in force (after the schedule).",
       &AutoscalerGauges::min},
      {"kvgate_autoscaler_max_replicas", "Upper bound in force (after the schedule).",
       &AutoscalerGauges::max},
  };
  for (const Gauge& g : kGauges) {
    w.header(g.name, g.help, "gauge");
    for (const auto& [pool, a] : autoscalers_) w.sample(g.name, {{"pool", pool}}, a.*g.field);
  }
  w.header("kvgate_autoscaler_demand_replicas",
           "Replicas' worth of load the policy measured (before rounding and behavior).", "gauge");
  for (const auto& [pool, a] : autoscalers_) {
    w.sample("kvgate_autoscaler_demand_replicas", {{"pool", pool}}, a.demand);
  }
  w.header("kvgate_autoscaler_signal",
           "The tracked signal's value per ready replica, as the autoscaler read it.", "gauge");
  for (const auto& [pool, a] : autoscalers_) {
    if (a.signal_value && !a.signal.empty()) {
      w.sample("kvgate_autoscaler_signal", {{"pool", pool}, {"signal", a.signal}}, *a.signal_value);
    }
  }
  w.header("kvgate_autoscaler_panic", "1 while the pool's autoscaler is in panic mode.", "gauge");
  for (const auto& [pool, a] : autoscalers_) {
    w.sample("kvgate_autoscaler_panic", {{"pool", pool}}, a.panic ? 1 : 0);
  }
  w.header("kvgate_autoscaler_decision_info",
           "The latest decision: its direction (up, down, hold) and what held the count back "
           "(empty: nothing). The full reason is in the log.",
           "gauge");
  for (const auto& [pool, a] : autoscalers_) {
    w.sample("kvgate_autoscaler_decision_info",
             {{"pool", pool}, {"direction", a.direction}, {"limited_by", a.limited_by}}, 1);
  }
  if (std::any_of(autoscalers_.begin(), autoscalers_.end(),
                  [](const auto& kv) { return kv.second.horizon.has_value(); })) {
    w.header("kvgate_autoscaler_horizon",
             "The horizon policy's latest inputs (input: arrival_rate, forecast_rate, band, "
             "rate_per_replica, ttft_correction, startup_seconds, ...).",
             "gauge");
    for (const auto& [pool, a] : autoscalers_) {
      if (!a.horizon) continue;
      for (const scale::NamedInput& in : scale::named_inputs(*a.horizon)) {
        w.sample("kvgate_autoscaler_horizon", {{"pool", pool}, {"input", std::string(in.name)}},
                 in.value);
      }
    }
  }
  w.header("kvgate_autoscaler_decisions_total", "Autoscaler decisions by direction.", "counter");
  for (const auto& [k, v] : autoscaler_decisions_) {
    const auto& [pool, direction] = k;
    w.sample("kvgate_autoscaler_decisions_total", {{"pool", pool}, {"direction", direction}},
             static_cast<double>(v));
  }
  w.header("kvgate_autoscaler_replica_restarts_total",
           "Replicas that exited on their own and were replaced.", "counter");
  for (const auto& [pool, a] : autoscalers_) {
    w.sample("kvgate_autoscaler_replica_restarts_total", {{"pool", pool}},
             static_cast<double>(a.restarts));
  }
}

}  // namespace kvgate::gateway
