#include "engine/engine_metrics_text.h"

#include <functional>

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

EngineMetricsView metrics_view(const engine::EngineModel& model) {
  EngineMetricsView v{.metrics = model.metrics(), .config = model.config()};
  if (v.config.max_loras > 0) model.lora_adapters(v.lora_running, v.lora_waiting);
  return v;
}

std::string render_engine_metrics(const engine::EngineModel& model,
                                  const EngineServerOptions& options, double wall_seconds) {
  const EngineMetricsView view = metrics_view(model);
  return render_engine_metrics(std::span(&view, 1), options, wall_seconds);
}

std::string render_engine_metrics(std::span<const EngineMetricsView> ranks,
                                  const EngineServerOptions& options, double wall_seconds) {
  std::vector<metrics::Labels> labels;
  for (size_t r = 0; r < ranks.size(); ++r) {
    labels.push_back({{"model_name", options.served_model_name}, {"engine", std::to_string(r)}});
  }
  metrics::PrometheusWriter w;
  // One family, a series per rank.
  using Value = std::function<double(const engine::EngineMetrics&)>;
  auto family = [&](std::string_view name, std::string_view help, std::string_view type,
                    const Value& value) {
    w.header(name, help, type);
    for (size_t r = 0; r < ranks.size(); ++r) w.sample(name, labels[r], value(ranks[r].metrics));
  };
  using Hist = std::function<const engine::Histogram&(const engine::EngineMetrics&)>;
  auto histogram = [&](std::string_view name, std::string_view help, const Hist& h) {
    w.header(name, help, "histogram");
    for (size_t r = 0; r < ranks.size(); ++r) {
      w.histogram_series(name, labels[r], snapshot(h(ranks[r].metrics)));
    }
  };
  auto count = [](uint64_t v) { return static_cast<double>(v); };
  family("vllm:num_requests_running", "Number of requests in model execution batches.", "gauge",
         [](const engine::EngineMetrics& m) { return m.num_requests_running; });
  family("vllm:num_requests_waiting", "Number of requests waiting to be processed.", "gauge",
         [](const engine::EngineMetrics& m) { return m.waiting_gauge(); });
  family("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", "gauge",
         [](const engine::EngineMetrics& m) { return m.kv_cache_usage; });
  if (options.deprecated_gpu_cache_metric) {
    family("vllm:gpu_cache_usage_perc",
           "GPU KV-cache usage. 1 means 100 percent usage. DEPRECATED: use "
           "vllm:kv_cache_usage_perc.",
           "gauge", [](const engine::EngineMetrics& m) { return m.kv_cache_usage; });
  }
  family("vllm:prefix_cache_queries_total",
         "Prefix cache queries, in terms of number of queried tokens.", "counter",
         [&](const engine::EngineMetrics& m) { return count(m.prefix_cache_queries); });
  family("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.",
         "counter", [&](const engine::EngineMetrics& m) { return count(m.prefix_cache_hits); });
  family("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.",
         "counter", [&](const engine::EngineMetrics& m) { return count(m.num_preemptions); });
  family("vllm:prompt_tokens_total", "Number of prefill tokens processed.", "counter",
         [&](const engine::EngineMetrics& m) { return count(m.prompt_tokens); });
  family("vllm:generation_tokens_total", "Number of generation tokens processed.", "counter",
         [&](const engine::EngineMetrics& m) { return count(m.generation_tokens); });
  // One family, a series per reason and rank: "length" for finished requests, "abort"
  // for those aborted (the client went away, as vLLM counts them).
  w.header("vllm:request_success_total", "Count of successfully processed requests.", "counter");
  for (size_t r = 0; r < ranks.size(); ++r) {
    metrics::Labels finished = labels[r];
    finished.emplace_back("finished_reason", "length");
    w.sample("vllm:request_success_total", finished, count(ranks[r].metrics.requests_finished));
    finished.back().second = "abort";
    w.sample("vllm:request_success_total", finished, count(ranks[r].metrics.requests_aborted));
  }
  histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
            [](const engine::EngineMetrics& m) -> const engine::Histogram& {
              return m.time_to_first_token;
            });
  histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
            [](const engine::EngineMetrics& m) -> const engine::Histogram& {
              return m.inter_token_latency;
            });
  histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
            [](const engine::EngineMetrics& m) -> const engine::Histogram& {
              return m.e2e_request_latency;
            });
  histogram("vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            [](const engine::EngineMetrics& m) -> const engine::Histogram& {
              return m.request_queue_time;
            });
  w.header("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", "gauge");
  for (size_t r = 0; r < ranks.size(); ++r) {
    const engine::EngineConfig& c = ranks[r].config;
    w.sample("vllm:cache_config_info",
             {{"block_size", std::to_string(c.block_size)},
              {"enable_prefix_caching", c.enable_prefix_caching ? "True" : "False"},
              {"num_gpu_blocks", std::to_string(c.num_gpu_blocks)},
              {"engine", std::to_string(r)}},
             1);
  }
  const EngineMetricsView& first = ranks.front();
  if (first.config.max_loras > 0) {
    // vLLM's: the adapters with running and with waiting requests, comma-joined, and the
    // time the combination was seen (a consumer reads the newest series; vLLM keeps the
    // old ones, this shows the current one).
    auto joined = [](const std::vector<std::string>& names) {
      std::string out;
      for (const std::string& n : names) out += (out.empty() ? "" : ",") + n;
      return out;
    };
    w.gauge("vllm:lora_requests_info", "Running stats on lora requests.",
            {{"max_lora", std::to_string(first.config.max_loras)},
             {"running_lora_adapters", joined(first.lora_running)},
             {"waiting_lora_adapters", joined(first.lora_waiting)}},
            wall_seconds);
    // Not vLLM's: the model's slot traffic (docs/engine.md).
    family("kvgate_engine_lora_loads_total",
           "LoRA adapters loaded into a slot (POST /v1/load_lora_adapter, --lora-modules, "
           "or a request for an adapter in no slot).",
           "counter", [&](const engine::EngineMetrics& m) { return count(m.lora_loads); });
    family("kvgate_engine_lora_evictions_total",
           "LoRA loads that evicted another adapter (the least recently used one no running "
           "request uses).",
           "counter", [&](const engine::EngineMetrics& m) { return count(m.lora_evictions); });
  }
  return w.take();
}

}  // namespace kvgate::engine_server
