// EngineMetrics: the counters, gauges and histograms behind vLLM's `vllm:*` metrics.
//
// Kept by the EngineModel as it steps; the server renders them in Prometheus text, the
// simulator reads them. Counters only grow.
#pragma once

#include <cstdint>

#include "core/engine/histogram.h"

namespace kvgate::engine {

struct EngineMetrics {
  // Gauges.
  uint32_t num_requests_running = 0;   // vllm:num_requests_running
  uint32_t num_requests_waiting = 0;   // vllm:num_requests_waiting (scheduler queue)
  uint32_t num_requests_arriving = 0;  // in preprocessing / KV transfer (not in vLLM)
  double kv_cache_usage = 0;           // vllm:kv_cache_usage_perc, 0..1

  // What vllm:num_requests_waiting reads: every request the engine accepted and has not
  // begun, the arriving ones included (vLLM keeps a request that waits for its KV
  // transfer in its waiting queue; its preprocessing is counted here too, a small
  // difference). The router reads this gauge the same way in the simulator and live
  // (route/scrape.h).
  uint32_t waiting_gauge() const { return num_requests_waiting + num_requests_arriving; }

  // Counters.
  uint64_t prefix_cache_queries = 0;  // vllm:prefix_cache_queries_total (tokens)
  uint64_t prefix_cache_hits = 0;     // vllm:prefix_cache_hits_total (tokens)
  uint64_t prompt_tokens = 0;         // vllm:prompt_tokens_total
  uint64_t generation_tokens = 0;     // vllm:generation_tokens_total
  uint64_t num_preemptions = 0;       // vllm:num_preemptions_total
  uint64_t requests_finished = 0;     // vllm:request_success_total{finished_reason="length"}
  uint64_t requests_aborted = 0;
  uint64_t steps = 0;
  // LoRA (EngineConfig::max_loras > 0): adapters loaded into a slot (on first use or by
  // load_adapter), and of those loads, the ones that evicted another adapter.
  uint64_t lora_loads = 0;
  uint64_t lora_evictions = 0;
  // Host KV tier (EngineConfig::num_host_blocks > 0): blocks copied to host memory on
  // eviction, blocks loaded back for requests, and the prompt tokens those loads served
  // (vLLM counts them apart from prefix_cache_hits too, as external hits).
  uint64_t host_offloaded_blocks = 0;
  uint64_t host_loaded_blocks = 0;
  uint64_t host_cache_hits = 0;  // tokens
  // Disk KV tier (EngineConfig::num_disk_blocks > 0): blocks written to disk (dropped from
  // host memory, or evicted from the GPU with no host tier), blocks loaded from disk for
  // requests, and the prompt tokens those loads served.
  uint64_t disk_offloaded_blocks = 0;
  uint64_t disk_loaded_blocks = 0;
  uint64_t disk_cache_hits = 0;  // tokens
  double busy_seconds = 0;       // sum of step durations

  // Histograms, seconds, vLLM's buckets.
  Histogram time_to_first_token{kTtftBuckets};            // vllm:time_to_first_token_seconds
  Histogram inter_token_latency{kItlBuckets};             // vllm:inter_token_latency_seconds
  Histogram e2e_request_latency{kRequestLatencyBuckets};  // vllm:e2e_request_latency_seconds
  Histogram request_queue_time{kRequestLatencyBuckets};   // vllm:request_queue_time_seconds
};

}  // namespace kvgate::engine
