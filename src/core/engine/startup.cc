#include "core/engine/startup.h"

namespace kvgate::engine {
namespace {

// The seed document's table: vLLM on Modal H100s, Qwen2.5-7B on one GPU and
// Qwen2.5-32B on two; median (min-max) seconds over four fresh-container starts.
constexpr StartupTable k7b{
    "7b",
    {{{"python_imports", 28, 23, 33},
      {"engine_worker_start", 34, 31, 36},
      {"weight_load", 11, 10, 18},
      {"torch_compile", 24, 20, 25},
      {"cuda_graph_capture", 12, 11, 13},
      {"flashinfer_jit_kv_setup", 84, 84, 86},
      {"server_up", 4, 3, 6}}},
    {{{"python_imports", 23, 17, 27},
      {"engine_worker_start", 18, 17, 20},
      {"weight_load", 6, 5, 9},
      {"torch_compile", 2, 1, 2},
      {"cuda_graph_capture", 10, 10, 13},
      {"flashinfer_jit_kv_setup", 6, 3, 8},
      {"server_up", 4, 3, 5}}},
};

constexpr StartupTable k32b{
    "32b",
    {{{"python_imports", 29, 17, 52},
      {"engine_worker_start", 62, 49, 75},
      {"weight_load", 28, 23, 48},
      {"torch_compile", 58, 47, 83},
      {"cuda_graph_capture", 104, 86, 214},
      {"flashinfer_jit_kv_setup", 86, 81, 101},
      {"server_up", 7, 6, 10}}},
    {{{"python_imports", 20, 15, 32},
      {"engine_worker_start", 50, 35, 63},
      {"weight_load", 10, 8, 17},
      {"torch_compile", 3, 2, 3},
      {"cuda_graph_capture", 34, 25, 229},
      {"flashinfer_jit_kv_setup", 6, 5, 7},
      {"server_up", 6, 5, 10}}},
};

}  // namespace

std::optional<StartupMode> parse_startup_mode(std::string_view text) {
  if (text == "none") return StartupMode::kNone;
  if (text == "cold") return StartupMode::kCold;
  if (text == "caches-kept") return StartupMode::kCachesKept;
  return std::nullopt;
}

std::string_view startup_mode_name(StartupMode mode) {
  switch (mode) {
    case StartupMode::kNone:
      return "none";
    case StartupMode::kCold:
      return "cold";
    case StartupMode::kCachesKept:
      return "caches-kept";
  }
  return "none";
}

const StartupTable& startup_table_7b() { return k7b; }
const StartupTable& startup_table_32b() { return k32b; }

const StartupTable* startup_table(std::string_view model) {
  if (model == "7b") return &k7b;
  if (model == "32b") return &k32b;
  return nullptr;
}

std::vector<StartupPhase> sample_startup(const StartupTable& table, StartupMode mode, Rng& rng) {
  std::vector<StartupPhase> phases;
  if (mode == StartupMode::kNone) return phases;
  const auto& stats = mode == StartupMode::kCold ? table.cold : table.caches_kept;
  phases.reserve(stats.size());
  for (const PhaseStats& s : stats) {
    // Two-piece uniform: P(x <= median) = 1/2, support [min, max].
    const double u = rng.uniform();
    const double x = u < 0.5 ? s.min_s + (s.median_s - s.min_s) * (u / 0.5)
                             : s.median_s + (s.max_s - s.median_s) * ((u - 0.5) / 0.5);
    phases.push_back({s.name, seconds(x)});
  }
  return phases;
}

Nanos total_duration(const std::vector<StartupPhase>& phases) {
  Nanos total = 0;
  for (const StartupPhase& p : phases) total += p.duration;
  return total;
}

}  // namespace kvgate::engine
