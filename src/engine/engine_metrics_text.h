// Renders an EngineModel's counters as vLLM's /metrics page (Prometheus text, vLLM's
// metric names, labels model_name and engine).
#pragma once

#include <string>

#include "core/engine/engine_model.h"
#include "engine/engine_server.h"

namespace kvgate::engine_server {

// With LoRA on (the model's config().max_loras > 0) it adds vllm:lora_requests_info and
// kvgate_engine_lora_{loads,evictions}_total. wall_seconds: now, Unix time
// (vllm:lora_requests_info's value).
std::string render_engine_metrics(const engine::EngineModel& model,
                                  const EngineServerOptions& options, double wall_seconds);

}  // namespace kvgate::engine_server
