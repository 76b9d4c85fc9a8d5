// What a scrape of an engine's /metrics yields for the router: the one definition that
// the gateway's scraper, the simulator and `kvgate engine`'s own metrics all follow.
//
//   vllm:num_requests_waiting   summed over the endpoint's series (one per engine core)
//   vllm:num_requests_running   summed
//   vllm:kv_cache_usage_perc    averaged (vllm:gpu_cache_usage_perc, its older name, when
//                               the new one is absent)
//   vllm:lora_requests_info     the newest series (largest value: its time): the running
//                               and waiting adapters and max_lora (optional)
//
// A data-parallel rank's endpoint (data_parallel.h) reads only the series of its rank,
// those labelled engine="<rank>", vLLM's label for an engine core.
//
// The simulator reads its engine model's gauges with scrape_of() instead of rendering
// and parsing text; a test checks that both give the same (tests/engine/).
#pragma once

#include <cstdint>
#include <optional>

#include "core/common/result.h"
#include "core/engine/engine_metrics.h"
#include "core/metrics/prometheus_text.h"
#include "core/route/endpoint.h"

namespace kvgate::route {

// The router's reading of one scrape (scraped_at is left to EndpointPool::on_metrics,
// which stamps it). KV usage is clamped to 0..1, counts to 0..4e9. Errors: a gauge above
// is missing. `rank`: only the series labelled engine="<rank>" (a data-parallel rank).
Result<ScrapedMetrics> read_scrape(const metrics::MetricSet& m,
                                   std::optional<uint32_t> rank = std::nullopt);

// What an engine reports of its own latencies, cumulative since it started (summed over
// its series): vllm:time_to_first_token_seconds and vllm:inter_token_latency_seconds (or
// the older vllm:time_per_output_token_seconds), their _sum and _count. The difference
// between two scrapes is the mean over the interval (the status page's sparklines).
struct LatencyTotals {
  double ttft_sum = 0;  // seconds
  uint64_t ttft_count = 0;
  double itl_sum = 0;
  uint64_t itl_count = 0;
};
// nullopt when the engine exports neither histogram.
std::optional<LatencyTotals> read_latency_totals(const metrics::MetricSet& m,
                                                 std::optional<uint32_t> rank = std::nullopt);

// The same reading of an engine model's gauges, as `kvgate engine` exports them.
inline ScrapedMetrics scrape_of(const engine::EngineMetrics& m) {
  return {.waiting = m.waiting_gauge(),
          .running = m.num_requests_running,
          .kv_usage = m.kv_cache_usage};
}

}  // namespace kvgate::route
