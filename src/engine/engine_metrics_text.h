// Renders an EngineModel's counters as vLLM's /metrics page (Prometheus text, vLLM's
// metric names, labels model_name and engine).
#pragma once

#include <string>

#include "core/engine/engine_model.h"
#include "engine/engine_server.h"

namespace kvgate::engine_server {

// wall_seconds: now, Unix time (vllm:lora_requests_info's value, with LoRA on).
std::string render_engine_metrics(const engine::EngineModel& model,
                                  const EngineServerOptions& options, double wall_seconds);

}  // namespace kvgate::engine_server
