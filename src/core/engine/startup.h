// Startup: how long a new engine takes from launch to answering /health.
//
// The phases and figures are the vLLM cold starts timed on H100s in the seed document
// (section "Why a new replica takes minutes"): per phase a median and a range over four
// runs, for a 7B model on one GPU and a 32B model on two, with compile caches lost
// (`cold`, what a new pod gets by default) or kept (`caches-kept`). Each phase is drawn
// independently so that it has exactly the table's median and stays within its range:
// half of the draws uniform in [min, median], half uniform in [median, max].
//
//   Rng rng(seed);
//   std::vector<StartupPhase> phases = sample_startup(profile.startup, StartupMode::kCold, rng);
//   Nanos ready_after = total_duration(phases);  // ~200 s for the 7B, cold
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/common/rng.h"
#include "core/common/time.h"

namespace kvgate::engine {

enum class StartupMode : uint8_t { kNone, kCold, kCachesKept };

// "none" | "cold" | "caches-kept"
std::optional<StartupMode> parse_startup_mode(std::string_view text);
std::string_view startup_mode_name(StartupMode mode);

// One measured phase: median and range in seconds.
struct PhaseStats {
  std::string_view name;
  double median_s;
  double min_s;
  double max_s;
};

inline constexpr size_t kNumStartupPhases = 7;

// Phase names, in order: python_imports, engine_worker_start, weight_load,
// torch_compile, cuda_graph_capture, flashinfer_jit_kv_setup, server_up.
struct StartupTable {
  std::string_view model;  // "7b" | "32b"
  std::array<PhaseStats, kNumStartupPhases> cold;
  std::array<PhaseStats, kNumStartupPhases> caches_kept;
};

// The seed document's tables.
const StartupTable& startup_table_7b();
const StartupTable& startup_table_32b();
// "7b" | "32b"; nullptr otherwise.
const StartupTable* startup_table(std::string_view model);

struct StartupPhase {
  std::string_view name;  // points into the static table
  Nanos duration;
};

// Draws every phase's duration. kNone gives an empty list (instant start).
std::vector<StartupPhase> sample_startup(const StartupTable& table, StartupMode mode, Rng& rng);

Nanos total_duration(const std::vector<StartupPhase>& phases);

}  // namespace kvgate::engine
