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

// The horizon policy (issue #24's budget: <= 100 us at 512 replicas): Holt-Winters on
// the arrival rate, the error band, the queueing model, the TTFT correction, the burst
// path and the scale-down guard, every decision; the load swings so that it scales both
// ways and picks victims.
void BM_DecideHorizon(benchmark::State& state) {
  AutoscaleConfig c;
  c.policy = PolicyKind::kHorizon;
  c.max_replicas = 1000;
  c.forecast = {.method = ForecastMethod::kHoltWinters, .season = 3600 * kSecond};
  c.horizon.replica = {.prefill_tokens_per_s = 46000, .itl_s = 0.0077, .kv_tokens = 32768};
  c.behavior.scale_down.stabilization_window = 0;
  auto a = Autoscaler::make(c);
  const int n = static_cast<int>(state.range(0));
  PoolSignals s = pool(n);
  s.mean_prompt_tokens = 1536;
  s.mean_generation_tokens = 256;
  s.generation_tokens_sd = 40;
  s.prefix_hit_rate = 0.4;
  s.ttft = {.p50 = 0.2, .p90 = 0.5, .p99 = 0.9, .mean = 0.3, .samples = 1000};
  Nanos now = 1000 * kSecond;
  for (auto _ : state) {
    const double phase = static_cast<double>((now / kSecond) % 3600) / 3600;
    s.arrival_rate = 7.7 * n * (0.7 + 0.25 * phase);
    s.waiting = static_cast<double>((now / kSecond) % 7);
    Decision d = a->decide(s, now);
    benchmark::DoNotOptimize(d);
    now += 15 * kSecond;
  }
}
BENCHMARK(BM_DecideHorizon)->Arg(8)->Arg(64)->Arg(512);

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
