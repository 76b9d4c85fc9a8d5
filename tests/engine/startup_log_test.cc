#include "engine/startup_log.h"

#include <gtest/gtest.h>

#include "core/coldstart/phase_matcher.h"
#include "core/coldstart/phase_patterns.h"

namespace kvgate::engine {
namespace {

const char* kPhases[] = {"python_imports", "engine_worker_start", "weight_load",
                         "torch_compile",  "cuda_graph_capture",  "flashinfer_jit_kv_setup",
                         "server_up"};

TEST(StartupLogTest, LinesReadLikeVllms) {
  StartupLogContext ctx{"Qwen/Qwen2.5-7B-Instruct", 42};
  std::time_t t = 1'700'000'000;
  EXPECT_NE(startup_phase_line("weight_load", 0.113, 0, ctx, t)
                .find("] Loading weights took 0.11 seconds"),
            std::string::npos);
  EXPECT_NE(startup_phase_line("engine_worker_start", 0.3, 0, ctx, t)
                .find("Starting to load model Qwen/Qwen2.5-7B-Instruct..."),
            std::string::npos);
  std::string init = startup_phase_line("flashinfer_jit_kv_setup", 0.84, 1.2, ctx, t);
  EXPECT_NE(init.find("init engine (profile, create kv cache, warmup model) took 1.20 seconds"),
            std::string::npos);
  EXPECT_EQ(init.rfind("(EngineCore_0 pid=42) INFO ", 0), 0u) << init;
  EXPECT_EQ(startup_phase_line("server_up", 0.04, 0, ctx, t),
            "INFO:     Application startup complete.");
}

// Every phase line ends exactly its own phase under both presets, in order.
TEST(StartupLogTest, BothPresetsTimeEveryPhase) {
  for (std::string_view preset : coldstart::preset_names()) {
    Result<coldstart::PhaseMatcher> m =
        coldstart::PhaseMatcher::compile(*coldstart::preset_patterns(preset));
    ASSERT_TRUE(m.ok());
    StartupLogContext ctx{"m", 7};
    for (size_t i = 0; i < std::size(kPhases); ++i) {
      m->feed(seconds(static_cast<double>(i + 1)),
              startup_phase_line(kPhases[i], 1.0, 1.0, ctx, 1'700'000'000));
      ASSERT_TRUE(m->end_times()[i]) << preset << " " << kPhases[i];
    }
    for (const auto& d : m->durations()) EXPECT_EQ(*d, kSecond);
  }
}

}  // namespace
}  // namespace kvgate::engine
