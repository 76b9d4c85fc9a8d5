// startup_log: the log lines `kvgate engine` writes as its simulated startup phases end,
// worded and formatted as vLLM's own (so `kvgate coldstart --preset vllm` reads them as it
// reads a real vLLM, and `--preset kvgate-engine` anchors on this exact format):
//
//   (APIServer pid=12) INFO 11-30 03:40:01 [api_server.py:1] vLLM API server version ...
//   (EngineCore_0 pid=12) INFO 11-30 03:40:02 [gpu_model_runner.py:1] Starting to load model m...
//   (EngineCore_0 pid=12) INFO ... [default_loader.py:1] Loading weights took 0.11 seconds
//   (EngineCore_0 pid=12) INFO ... [monitor.py:1] torch.compile takes 0.24 s in total
//   (EngineCore_0 pid=12) INFO ... [gpu_model_runner.py:1] Graph capturing finished in 0 secs, ...
//   (EngineCore_0 pid=12) INFO ... [core.py:1] init engine (profile, create kv cache, warmup
//       model) took 1.20 seconds
//   INFO:     Application startup complete.
//
// One line per phase of core/engine/startup.h, written when the phase ends; the seconds in
// a line are wall seconds (what elapsed, after --time-scale), as vLLM reports its own.
#pragma once

#include <cstdio>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

#include "core/engine/startup.h"

namespace kvgate::engine {

struct StartupLogContext {
  std::string model;  // served model name, for "Starting to load model"
  int pid = 0;
};

// The line that marks the end of `phase` (a name from core/engine/startup.h), which took
// `phase_wall_s` wall seconds; `init_engine_wall_s` is the time since the engine core
// started loading weights (vLLM's "init engine" figure). Unknown phase names give a
// generic "startup phase X done" line.
std::string startup_phase_line(std::string_view phase, double phase_wall_s,
                               double init_engine_wall_s, const StartupLogContext& context,
                               std::time_t now);

// Writes startup_phase_line(...) for now() and flushes `out`.
void log_startup_phase(std::FILE* out, std::string_view phase, double phase_wall_s,
                       double init_engine_wall_s, const StartupLogContext& context);

// The engine's hook: phases[i] has just ended; its wall duration is its simulated one times
// `time_scale`, and the "init engine" figure runs from the start of weight_load.
void log_startup_phase_done(std::FILE* out, const std::vector<StartupPhase>& phases, size_t i,
                            double time_scale, const StartupLogContext& context);

}  // namespace kvgate::engine
