// Cost of the engine model's step loop under full load.
//
// The model must be cheap enough that one core drives ~100 simulated engines at 1x time
// scale (issue 4: at most 1% of a core per engine under full load). Each benchmark keeps
// an engine saturated: `in_flight` requests (at most 256 run, the rest wait), prompts
// of 1,000-2,000 tokens sharing 1,024-token system prompts, 100-400 output tokens, and
// a new request added whenever one finishes. Counters:
//   sim_step_ms        mean simulated duration of a step
//   core_share_at_1x   CPU time per simulated second (0.01 = 1% of a core; Google
//                      Benchmark prints it as a time, e.g. "2.7ms" = 0.0027 = 0.27%)
//   seqs_per_step      sequences computed per step (256 = the batch is full)
#include <benchmark/benchmark.h>

#include <vector>

#include "core/common/rng.h"
#include "core/engine/engine_model.h"

namespace kvgate::engine {
namespace {

struct Workload {
  std::vector<std::vector<kv::TokenId>> prompts;
  Rng rng{42};
  RequestId next_id = 1;
  uint32_t min_out = 100;
  uint32_t max_out = 400;

  Workload() {
    for (uint32_t i = 0; i < 64; ++i) {
      std::vector<kv::TokenId> p;
      const uint32_t system = i % 16;
      for (uint32_t t = 0; t < 1024; ++t) p.push_back(system * 100000 + t);
      const uint32_t extra = (i * 37) % 1000;  // 1,024-2,023 tokens before the tail
      for (uint32_t t = 0; t < extra; ++t) p.push_back(5'000'000 + i * 10000 + t);
      prompts.push_back(std::move(p));
    }
  }

  EngineRequest next() {
    EngineRequest r;
    r.id = next_id++;
    r.prompt = prompts[rng.below(prompts.size())];
    // Unique last tokens so each request also has private blocks.
    for (uint32_t t = 0; t < 32; ++t) r.prompt.push_back(9'000'000 + r.id * 64 + t);
    r.max_tokens = min_out + static_cast<uint32_t>(rng.below(max_out - min_out + 1));
    return r;
  }
};

void run_full_load(benchmark::State& state, bool kv_events, uint32_t min_out = 100,
                   uint32_t max_out = 400) {
  const uint32_t in_flight = static_cast<uint32_t>(state.range(0));
  EngineConfig config;
  config.emit_kv_events = kv_events;
  EngineModel engine(config, *builtin_profile("h100-qwen2.5-7b"));
  Workload work;
  work.min_out = min_out;
  work.max_out = max_out;
  Nanos now = 0;
  for (uint32_t i = 0; i < in_flight; ++i) (void)engine.add(work.next(), now);
  StepResult r;
  // Warm up into steady state (prefills done, cache populated, blocks recycled).
  for (int i = 0; i < 3000; ++i) {
    now = engine.next_step_time(now).value_or(now);
    engine.step(now, r);
    now = r.end();
    for (const RequestUpdate& u : r.updates) {
      if (u.finished) (void)engine.add(work.next(), now);
    }
  }
  double sim_seconds = 0;
  uint64_t running = 0;
  for (auto _ : state) {
    now = engine.next_step_time(now).value_or(now);
    engine.step(now, r);
    now = r.end();
    sim_seconds += to_seconds(r.duration);
    running += r.scheduled_seqs;
    for (const RequestUpdate& u : r.updates) {
      if (u.finished) (void)engine.add(work.next(), now);
    }
    benchmark::DoNotOptimize(r);
  }
  state.counters["sim_step_ms"] =
      benchmark::Counter(sim_seconds * 1e3 / static_cast<double>(state.iterations()));
  state.counters["core_share_at_1x"] =
      benchmark::Counter(sim_seconds, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["seqs_per_step"] =
      benchmark::Counter(static_cast<double>(running) / static_cast<double>(state.iterations()));
  state.counters["preemptions"] =
      benchmark::Counter(static_cast<double>(engine.metrics().num_preemptions));
}

void BM_StepFullLoad(benchmark::State& state) { run_full_load(state, true); }
void BM_StepFullLoadNoEvents(benchmark::State& state) { run_full_load(state, false); }
// Long outputs: nearly every step is 256 decodes and nothing else.
void BM_StepDecodeHeavy(benchmark::State& state) { run_full_load(state, true, 2000, 4000); }

BENCHMARK(BM_StepFullLoad)->Arg(256)->Arg(300)->Arg(5000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_StepFullLoadNoEvents)->Arg(300)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_StepDecodeHeavy)->Arg(300)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kvgate::engine

BENCHMARK_MAIN();
