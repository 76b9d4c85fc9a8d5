// LiveFeed: what keeps one pool's router current while `kvgate serve` runs.
//
// Scraper: a thread GETs every endpoint's /metrics each `scrape_interval`, reads
// vllm:num_requests_waiting and vllm:num_requests_running (summed over the `engine`
// label: a data-parallel server reports one series per engine core) and
// vllm:kv_cache_usage_perc (or the deprecated vllm:gpu_cache_usage_perc; mean over
// engines), and posts EndpointPool::on_metrics to the pool's strand. A failed scrape
// records nothing, so the endpoint's metrics age and, past the router's
// saturation.metrics_max_age, count as stale (saturated); it is counted in
// kvgate_scrape_errors_total.
//
// KV events: one KvEventSubscriber per pool (connect mode for endpoints with
// `kv_events.publisher`, bind mode with the pool's `kv_events_bind`); each delivery is
// posted to the strand and applied to the precise index (clear_endpoint first on a
// resync). The scraper thread also copies the subscriber's and the index's per-endpoint
// counters into the gateway metrics, and keeps each endpoint's TTFT and ITL history from
// its engine's own histograms (latency_history). An endpoint whose scrape failed 3 times
// in a row and then succeeds again is resynced (index entries cleared, subscription made afresh;
// one or two failures are a busy engine or gateway, not a restart): it may be a new
// process. A pool with scrape_interval 0 (configs built in code) runs no scraper.
//
//   auto feed = LiveFeed::start(*pool, metrics);   // stops in its destructor
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "core/common/result.h"
#include "core/kv/event_sequencer.h"
#include "gateway/common/metrics.h"
#include "gateway/data/pool_runtime.h"

namespace kvgate::gateway {

class LiveFeed {
 public:
  // Errors: the pool's kv_events_bind cannot be bound. `pool` and `metrics` must
  // outlive the feed.
  static Result<std::unique_ptr<LiveFeed>> start(PoolRuntime& pool, GatewayMetrics& metrics);
  ~LiveFeed();  // stops the scraper and the subscriber

  // Bind mode: the address the subscriber bound (port * resolved); else empty.
  std::string bound_endpoint() const;

  // One endpoint's KV event stream as the subscriber saw it (the admin API): its
  // counters since the gateway started, across resyncs (next_sequence: the current
  // subscription's), and the resyncs. nullopt when the endpoint has no KV events.
  // Thread-safe.
  struct EndpointEvents {
    kv::SequenceStats events;
    uint64_t resyncs = 0;
  };
  std::optional<EndpointEvents> endpoint_events(route::EndpointId id) const;

  // The engines' own TTFT and ITL (vllm:time_to_first_token_seconds and
  // vllm:inter_token_latency_seconds, read at each scrape): the mean over each step of
  // kHistoryStep, the last kHistorySteps steps, oldest first, in seconds; nullopt in a
  // step without requests. Memory: fixed, per endpoint. Thread-safe.
  static constexpr Nanos kHistoryStep = 5 * kSecond;
  static constexpr size_t kHistorySteps = 60;
  struct LatencyHistory {
    std::vector<std::optional<double>> ttft;
    std::vector<std::optional<double>> itl;
  };
  // One endpoint's; nullopt before its engine reported either histogram.
  std::optional<LatencyHistory> latency_history(route::EndpointId id) const;
  // The pool's: every endpoint's requests together.
  LatencyHistory pool_latency_history() const;

  struct Impl;

 private:
  explicit LiveFeed(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvgate::gateway
