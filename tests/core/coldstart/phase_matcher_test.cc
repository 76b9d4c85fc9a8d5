#include "core/coldstart/phase_matcher.h"

#include <gtest/gtest.h>

#include "core/coldstart/phase_patterns.h"

namespace kvgate::coldstart {
namespace {

// Real vLLM V1 log lines (wording and prefix as vLLM prints them; times and sizes vary).
const char* kVllmLog[] = {
    "(APIServer pid=41428) INFO 10-06 15:55:02 [api_server.py:1896] vLLM API server version "
    "0.11.0",
    "(APIServer pid=41428) INFO 10-06 15:55:02 [utils.py:233] non-default args: {'model': 'x'}",
    "(EngineCore_DP0 pid=41565) INFO 10-06 15:55:40 [gpu_model_runner.py:2602] Starting to load "
    "model Qwen/Qwen2.5-7B-Instruct...",
    "(EngineCore_DP0 pid=41565) INFO 10-06 15:55:51 [default_loader.py:267] Loading weights took "
    "10.52 seconds",
    "(EngineCore_DP0 pid=41565) INFO 10-06 15:55:52 [gpu_model_runner.py:2653] Model loading took "
    "14.25 GiB and 11.3 seconds",
    "(EngineCore_DP0 pid=41565) INFO 10-06 15:56:16 [monitor.py:34] torch.compile takes 23.71 s in "
    "total",
    "(EngineCore_DP0 pid=41565) INFO 10-06 15:56:18 [gpu_worker.py:298] Available KV cache memory: "
    "51.2 GiB",
    "(EngineCore_DP0 pid=41565) INFO 10-06 15:56:28 [gpu_model_runner.py:3480] Graph capturing "
    "finished in 12 secs, took 0.52 GiB",
    "(EngineCore_DP0 pid=41565) INFO 10-06 15:57:52 [core.py:210] init engine (profile, create kv "
    "cache, warmup model) took 120.87 seconds",
    "(APIServer pid=41428) INFO 10-06 15:57:55 [api_server.py:1971] Starting vLLM API server 0 on "
    "http://0.0.0.0:8000",
    "(APIServer pid=41428) INFO:     Application startup complete.",
};
const double kAt[] = {28, 28.1, 62, 73, 74, 97, 99, 109, 193, 196, 197};

TEST(PhaseMatcherTest, TimesEveryVllmPhaseFromRealLogLines) {
  Result<PatternSet> set = preset_patterns("vllm");
  ASSERT_TRUE(set.ok());
  Result<PhaseMatcher> m = PhaseMatcher::compile(*set);
  ASSERT_TRUE(m.ok());
  for (size_t i = 0; i < std::size(kVllmLog); ++i) m->feed(seconds(kAt[i]), kVllmLog[i]);
  EXPECT_TRUE(m->all_seen());
  std::vector<std::optional<Nanos>> d = m->durations();
  ASSERT_EQ(d.size(), 7u);
  const double expected[] = {28, 34, 11, 24, 12, 84, 4};  // the seed's 7B cold medians
  for (size_t i = 0; i < 7; ++i) {
    ASSERT_TRUE(d[i]) << i;
    EXPECT_NEAR(to_seconds(*d[i]), expected[i], 1e-6) << set->phases[i].name;
  }
}

TEST(PhaseMatcherTest, MissingPhaseCountsTowardsTheNextOneSeen) {
  Result<PhaseMatcher> m = PhaseMatcher::compile(*preset_patterns("vllm"));
  ASSERT_TRUE(m.ok());
  // --enforce-eager: no torch.compile and no graph capture lines.
  m->feed(seconds(10), "INFO 01-01 00:00:00 [api_server.py:1] vLLM API server version 0.9");
  m->feed(seconds(20), "Starting to load model m...");
  m->feed(seconds(25), "Loading weights took 5 seconds");
  m->feed(seconds(100), "init engine (profile, create kv cache, warmup model) took 80 seconds");
  m->feed(seconds(103), "INFO:     Application startup complete.");
  auto d = m->durations();
  EXPECT_FALSE(m->all_seen());
  EXPECT_FALSE(d[3]);
  EXPECT_FALSE(d[4]);
  EXPECT_NEAR(to_seconds(*d[5]), 75, 1e-9);
  EXPECT_NEAR(to_seconds(*d[6]), 3, 1e-9);
}

TEST(PhaseMatcherTest, FirstMatchEndsAPhaseAndEarlierPhasesAreNotReopened) {
  PatternSet set{"t", {{"a", "a", {"alpha"}}, {"b", "b", {"beta"}}}};
  Result<PhaseMatcher> m = PhaseMatcher::compile(set);
  ASSERT_TRUE(m.ok());
  m->feed(seconds(1), "alpha (worker 0)");
  m->feed(seconds(2), "alpha (worker 1)");  // ignored: phase a already ended
  m->feed(seconds(3), "nothing");
  m->feed(seconds(4), "beta");
  m->feed(seconds(5), "alpha again");
  auto ends = m->end_times();
  EXPECT_EQ(ends[0], seconds(1));
  EXPECT_EQ(ends[1], seconds(4));
  auto d = m->durations();
  EXPECT_EQ(*d[1], seconds(3));
}

TEST(PhaseMatcherTest, LaterPhaseLineBeforeEarlierSkipsTheEarlier) {
  PatternSet set{"t", {{"a", "a", {"alpha"}}, {"b", "b", {"beta"}}}};
  Result<PhaseMatcher> m = PhaseMatcher::compile(set);
  ASSERT_TRUE(m.ok());
  m->feed(seconds(2), "beta");
  m->feed(seconds(3), "alpha");  // too late: the order says a ends before b
  EXPECT_FALSE(m->end_times()[0]);
  EXPECT_EQ(*m->durations()[1], seconds(2));
}

TEST(PhaseMatcherTest, KvgateEnginePresetIgnoresLookalikeLines) {
  Result<PhaseMatcher> m = PhaseMatcher::compile(*preset_patterns("kvgate-engine"));
  ASSERT_TRUE(m.ok());
  m->feed(seconds(1), "echo: vLLM API server version 1");  // not the engine's format
  EXPECT_FALSE(m->end_times()[0]);
  m->feed(seconds(2),
          "(APIServer pid=5) INFO 11-30 03:40:01 [api_server.py:1] vLLM API server "
          "version kvgate-engine");
  EXPECT_EQ(m->end_times()[0], seconds(2));
}

TEST(PhaseMatcherTest, RejectsBadRegex) {
  PatternSet set{"t", {{"a", "a", {"(unclosed"}}}};
  Result<PhaseMatcher> m = PhaseMatcher::compile(set);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().find("phase 'a'"), std::string::npos);
}

}  // namespace
}  // namespace kvgate::coldstart
