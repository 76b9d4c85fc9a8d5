// The cost of one autoscaling decision. The gateway decides every few seconds per pool
// and the simulator every virtual interval for a whole simulated day, so this is about
// the simulator's budget: a day of 15 s ticks is 5,760 decisions per pool.
#include <benchmark/benchmark.h>

#include <string>

#include "core/scale/autoscaler.h"

namespace kvgate::scale {
namespace {

PoolSignals pool(int replicas) {
  PoolSignals s;
  for (int i = 0; i < replicas; ++i) {
    s.replicas.push_back({.id = "replica-" + std::to_string(i),
                          .phase = i % 8 == 0 ? ReplicaPhase::kStarting : ReplicaPhase::kReady,
                          .launched_at = 0,
                          .ready_at = i % 8 == 0 ? 0 : 200 * kSecond,
                          .in_flight = static_cast<uint32_t>(i % 5)});
  }
  return s;
}

void BM_DecideTarget(benchmark::State& state) {
  AutoscaleConfig c;
  c.signal = Signal::kWaiting;
  c.target = 4;
  c.max_replicas = 1000;
  c.tracking.panic.enabled = true;
  c.forecast.method = ForecastMethod::kHoltWinters;
  auto a = Autoscaler::make(c);
  PoolSignals s = pool(static_cast<int>(state.range(0)));
  Nanos now = 1000 * kSecond;
  for (auto _ : state) {
    s.waiting = static_cast<double>((now / kSecond) % 400);
    Decision d = a->decide(s, now);
    benchmark::DoNotOptimize(d);
    now += 15 * kSecond;
  }
}
BENCHMARK(BM_DecideTarget)->Arg(8)->Arg(64)->Arg(512);

void BM_DecidePlanner(benchmark::State& state) {
  AutoscaleConfig c;
  c.policy = PolicyKind::kPlanner;
  c.role = PoolRole::kDecode;
  c.max_replicas = 1000;
  c.decode_profile = *DecodeProfile::make(
      {{.context_tokens = 1000, .points = {{0.010, 500}, {0.020, 1500}, {0.040, 2500}}},
       {.context_tokens = 3000, .points = {{0.010, 300}, {0.020, 900}, {0.040, 1500}}}});
  c.forecast.method = ForecastMethod::kHoltWinters;
  auto a = Autoscaler::make(c);
  PoolSignals s = pool(static_cast<int>(state.range(0)));
  s.mean_prompt_tokens = 1500;
  s.mean_generation_tokens = 1000;
  s.itl = {.mean = 0.03, .samples = 100};
  Nanos now = 1000 * kSecond;
  for (auto _ : state) {
    s.generation_tokens_per_s = static_cast<double>((now / kSecond) % 40000);
    Decision d = a->decide(s, now);
    benchmark::DoNotOptimize(d);
    now += 15 * kSecond;
  }
}
BENCHMARK(BM_DecidePlanner)->Arg(8)->Arg(64)->Arg(512);

void BM_SelectVictims(benchmark::State& state) {
  PoolSignals s = pool(static_cast<int>(state.range(0)));
  const int32_t count = static_cast<int32_t>(state.range(0) / 4);
  for (auto _ : state) {
    auto v = select_victims(s.replicas, count, 10'000 * kSecond, {});
    benchmark::DoNotOptimize(v);
  }
}
BENCHMARK(BM_SelectVictims)->Arg(64)->Arg(512);

}  // namespace
}  // namespace kvgate::scale

BENCHMARK_MAIN();
