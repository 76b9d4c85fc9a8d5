#include "engine/engine_metrics_text.h"

#include "core/metrics/prometheus_text.h"

namespace kvgate::engine_server {
namespace {

metrics::HistogramSnapshot snapshot(const engine::Histogram& h) {
  metrics::HistogramSnapshot s;
  s.bounds = h.bounds();
  s.counts = h.counts();
  s.sum = h.sum();
  s.count = h.count();
  return s;
}

}  // namespace

std::string render_engine_metrics(const engine::EngineModel& model,
                                  const EngineServerOptions& options, double wall_seconds) {
  const engine::EngineMetrics& m = model.metrics();
  const metrics::Labels labels = {{"model_name", options.served_model_name}, {"engine", "0"}};
  metrics::PrometheusWriter w;
  w.gauge("vllm:num_requests_running", "Number of requests in model execution batches.", labels,
          m.num_requests_running);
  w.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", labels,
          m.waiting_gauge());
  w.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", labels,
          m.kv_cache_usage);
  if (options.deprecated_gpu_cache_metric) {
    w.gauge("vllm:gpu_cache_usage_perc",
            "GPU KV-cache usage. 1 means 100 percent usage. DEPRECATED: use "
            "vllm:kv_cache_usage_perc.",
            labels, m.kv_cache_usage);
  }
  w.counter("vllm:prefix_cache_queries_total",
            "Prefix cache queries, in terms of number of queried tokens.", labels,
            static_cast<double>(m.prefix_cache_queries));
  w.counter("vllm:prefix_cache_hits_total",
            "Prefix cache hits, in terms of number of cached tokens.", labels,
            static_cast<double>(m.prefix_cache_hits));
  w.counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.",
            labels, static_cast<double>(m.num_preemptions));
  w.counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", labels,
            static_cast<double>(m.prompt_tokens));
  w.counter("vllm:generation_tokens_total", "Number of generation tokens processed.", labels,
            static_cast<double>(m.generation_tokens));
  metrics::Labels finished = labels;
  finished.emplace_back("finished_reason", "length");
  // One family, a series per reason: "length" for finished requests, "abort" for those
  // aborted (the client went away, as vLLM counts them).
  w.header("vllm:request_success_total", "Count of successfully processed requests.", "counter");
  w.sample("vllm:request_success_total", finished, static_cast<double>(m.requests_finished));
  finished.back().second = "abort";
  w.sample("vllm:request_success_total", finished, static_cast<double>(m.requests_aborted));
  w.histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
              labels, snapshot(m.time_to_first_token));
  w.histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
              labels, snapshot(m.inter_token_latency));
  w.histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
              labels, snapshot(m.e2e_request_latency));
  w.histogram("vllm:request_queue_time_seconds",
              "Histogram of time spent in WAITING phase for request.", labels,
              snapshot(m.request_queue_time));
  const engine::EngineConfig& c = model.config();
  w.gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
          {{"block_size", std::to_string(c.block_size)},
           {"enable_prefix_caching", c.enable_prefix_caching ? "True" : "False"},
           {"num_gpu_blocks", std::to_string(c.num_gpu_blocks)},
           {"engine", "0"}},
          1);
  if (c.max_loras > 0) {
    // vLLM's: the adapters with running and with waiting requests, comma-joined, and the
    // time the combination was seen (a consumer reads the newest series; vLLM keeps the
    // old ones, this shows the current one).
    std::vector<std::string> running, waiting;
    model.lora_adapters(running, waiting);
    auto joined = [](const std::vector<std::string>& names) {
      std::string out;
      for (const std::string& n : names) out += (out.empty() ? "" : ",") + n;
      return out;
    };
    w.gauge("vllm:lora_requests_info", "Running stats on lora requests.",
            {{"max_lora", std::to_string(c.max_loras)},
             {"running_lora_adapters", joined(running)},
             {"waiting_lora_adapters", joined(waiting)}},
            wall_seconds);
    // Not vLLM's: the model's slot traffic (docs/engine.md).
    w.counter("kvgate_engine_lora_loads_total",
              "LoRA adapters loaded into a slot (POST /v1/load_lora_adapter, --lora-modules, "
              "or a request for an adapter in no slot).",
              labels, static_cast<double>(m.lora_loads));
    w.counter("kvgate_engine_lora_evictions_total",
              "LoRA loads that evicted another adapter (the least recently used one no running "
              "request uses).",
              labels, static_cast<double>(m.lora_evictions));
  }
  return w.take();
}

}  // namespace kvgate::engine_server
