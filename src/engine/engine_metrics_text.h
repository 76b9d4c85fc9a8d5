// Renders an EngineModel's counters as vLLM's /metrics page (Prometheus text, vLLM's
// metric names, labels model_name and engine).
//
// A data-parallel engine (--data-parallel-size N) has N engine cores; vLLM renders one
// page with a series per core, labelled engine="<rank>". Each rank's counters are copied
// on its own engine thread (metrics_view) and the copies rendered together.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "core/engine/engine_model.h"
#include "engine/engine_server.h"

namespace kvgate::engine_server {

// One engine core's counters and configuration, copied (on the thread that owns the
// model) for rendering elsewhere.
struct EngineMetricsView {
  engine::EngineMetrics metrics;
  engine::EngineConfig config;
  std::vector<std::string> lora_running;
  std::vector<std::string> lora_waiting;
};
EngineMetricsView metrics_view(const engine::EngineModel& model);

// With LoRA on (the model's config().max_loras > 0) it adds vllm:lora_requests_info and
// kvgate_engine_lora_{loads,evictions}_total. wall_seconds: now, Unix time
// (vllm:lora_requests_info's value).
std::string render_engine_metrics(const engine::EngineModel& model,
                                  const EngineServerOptions& options, double wall_seconds);

// Engine cores 0..ranks.size()-1, ranks[i] labelled engine="i": each family once, a
// series per rank (LoRA's info gauge from rank 0). REQUIRES: !ranks.empty().
std::string render_engine_metrics(std::span<const EngineMetricsView> ranks,
                                  const EngineServerOptions& options, double wall_seconds);

}  // namespace kvgate::engine_server
