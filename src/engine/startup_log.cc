#include "engine/startup_log.h"

#include <fmt/format.h>

namespace kvgate::engine {
namespace {

// vLLM's "INFO MM-DD HH:MM:SS [file.py:line]" prefix, with the process tag V1 adds.
std::string prefix(std::string_view process, std::string_view file, int pid, std::time_t now) {
  std::tm tm{};
  localtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%m-%d %H:%M:%S", &tm);
  return fmt::format("({} pid={}) INFO {} [{}:1] ", process, pid, stamp, file);
}

}  // namespace

std::string startup_phase_line(std::string_view phase, double phase_wall_s,
                               double init_engine_wall_s, const StartupLogContext& context,
                               std::time_t now) {
  const int pid = context.pid;
  if (phase == "python_imports") {
    return prefix("APIServer", "api_server.py", pid, now) +
           "vLLM API server version kvgate-engine (simulated startup)";
  }
  if (phase == "engine_worker_start") {
    return prefix("EngineCore_0", "gpu_model_runner.py", pid, now) +
           fmt::format("Starting to load model {}...", context.model);
  }
  if (phase == "weight_load") {
    return prefix("EngineCore_0", "default_loader.py", pid, now) +
           fmt::format("Loading weights took {:.2f} seconds", phase_wall_s);
  }
  if (phase == "torch_compile") {
    return prefix("EngineCore_0", "monitor.py", pid, now) +
           fmt::format("torch.compile takes {:.2f} s in total", phase_wall_s);
  }
  if (phase == "cuda_graph_capture") {
    return prefix("EngineCore_0", "gpu_model_runner.py", pid, now) +
           fmt::format("Graph capturing finished in {:.0f} secs, took 0.00 GiB", phase_wall_s);
  }
  if (phase == "flashinfer_jit_kv_setup") {
    return prefix("EngineCore_0", "core.py", pid, now) +
           fmt::format("init engine (profile, create kv cache, warmup model) took {:.2f} seconds",
                       init_engine_wall_s);
  }
  if (phase == "server_up") return "INFO:     Application startup complete.";
  return prefix("APIServer", "startup.py", pid, now) +
         fmt::format("startup phase {} done in {:.2f} seconds", phase, phase_wall_s);
}

void log_startup_phase_done(std::FILE* out, const std::vector<StartupPhase>& phases, size_t i,
                            double time_scale, const StartupLogContext& context) {
  if (i >= phases.size()) return;
  double init_s = 0;
  bool loading = false;
  for (size_t j = 0; j <= i; ++j) {
    loading = loading || phases[j].name == "weight_load";
    if (loading) init_s += to_seconds(phases[j].duration) * time_scale;
  }
  log_startup_phase(out, phases[i].name, to_seconds(phases[i].duration) * time_scale, init_s,
                    context);
}

void log_startup_phase(std::FILE* out, std::string_view phase, double phase_wall_s,
                       double init_engine_wall_s, const StartupLogContext& context) {
  std::string line =
      startup_phase_line(phase, phase_wall_s, init_engine_wall_s, context, std::time(nullptr));
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), out);
  std::fflush(out);
}

}  // namespace kvgate::engine
