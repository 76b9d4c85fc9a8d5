// Flow-control queue cost: one enqueue and one dispatch (pop) with 10,000 requests
// queued over 1,000 tenants, in all three bands, a tenth of them with deadlines; each
// operation timed on its own so that percentiles can be reported (p50_ns, p99_ns
// counters; "Time" is the mean of an enqueue + pop pair). The queue stays at 10,000:
// every iteration queues one request and dispatches one.
//
// Memory: BM_FlowQueueMemory fills a queue with 100,000 requests over 1,000 tenants and
// reports the heap bytes per queued request (mallinfo2 before and after).
//
//   build/release/flow_queue_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "core/common/rng.h"
#include "core/route/flow_queue.h"

namespace kvgate::route {
namespace {

constexpr int kTenants = 1000;

std::vector<std::string> tenant_names() {
  std::vector<std::string> names;
  for (int i = 0; i < kTenants; ++i) names.push_back(fmt::format("tenant-{:04d}", i));
  return names;
}

FlowQueueConfig bench_config() {
  FlowQueueConfig c;
  c.enabled = true;
  c.max_requests = 1'000'000;
  c.max_wait.fill(0);
  return c;
}

FlowQueue::Entry entry(RequestId id, const std::string& tenant, Rng& rng, Nanos now) {
  FlowQueue::Entry e;
  e.id = id;
  e.tenant = tenant;
  e.weight = 1 + static_cast<double>(id % 4);
  const uint64_t r = rng.next();
  e.band = static_cast<Criticality>(r % 3);
  e.prompt_tokens = 100 + static_cast<uint32_t>((r >> 8) % 4000);
  e.expected_output_tokens = 50 + static_cast<uint32_t>((r >> 20) % 500);
  if ((r >> 32) % 10 == 0) e.deadline = now + 3600 * kSecond + static_cast<Nanos>((r >> 40) % 1000);
  return e;
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

void BM_FlowQueueEnqueueDispatch(benchmark::State& state) {
  const int queued = static_cast<int>(state.range(0));
  const auto names = tenant_names();
  FlowQueue q(bench_config());
  Rng rng(7);
  std::vector<FlowQueue::Removed> evicted;
  RequestId next = 1;
  Nanos now = 0;
  for (int i = 0; i < queued; ++i) {
    (void)q.enqueue(entry(next, names[rng.next() % kTenants], rng, now), now, evicted);
    ++next;
  }
  std::vector<double> enq_ns, pop_ns;
  enq_ns.reserve(1 << 20);
  pop_ns.reserve(1 << 20);
  using Clock = std::chrono::steady_clock;
  for (auto _ : state) {
    now += kMillisecond;
    FlowQueue::Entry e = entry(next++, names[rng.next() % kTenants], rng, now);
    const auto t0 = Clock::now();
    FlowRefusal r = q.enqueue(e, now, evicted);
    const auto t1 = Clock::now();
    auto popped = q.pop(now);
    const auto t2 = Clock::now();
    benchmark::DoNotOptimize(r);
    benchmark::DoNotOptimize(popped);
    if (enq_ns.size() < enq_ns.capacity()) {
      enq_ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
      pop_ns.push_back(std::chrono::duration<double, std::nano>(t2 - t1).count());
    }
  }
  state.counters["queued"] = static_cast<double>(q.size());
  state.counters["enqueue_p50_ns"] = percentile(enq_ns, 0.50);
  state.counters["enqueue_p99_ns"] = percentile(enq_ns, 0.99);
  state.counters["pop_p50_ns"] = percentile(pop_ns, 0.50);
  state.counters["pop_p99_ns"] = percentile(pop_ns, 0.99);
}
BENCHMARK(BM_FlowQueueEnqueueDispatch)->Arg(10'000)->Arg(100'000);

// A queued request leaves early (client gone), then another comes: remove + enqueue.
void BM_FlowQueueRemove(benchmark::State& state) {
  const auto names = tenant_names();
  FlowQueue q(bench_config());
  Rng rng(9);
  std::vector<FlowQueue::Removed> evicted;
  std::vector<RequestId> ids;
  RequestId next = 1;
  for (int i = 0; i < 10'000; ++i) {
    (void)q.enqueue(entry(next, names[rng.next() % kTenants], rng, 0), 0, evicted);
    ids.push_back(next++);
  }
  std::vector<double> ns;
  ns.reserve(1 << 20);
  using Clock = std::chrono::steady_clock;
  for (auto _ : state) {
    const size_t k = rng.next() % ids.size();
    const auto t0 = Clock::now();
    bool removed = q.remove(ids[k]);
    const auto t1 = Clock::now();
    benchmark::DoNotOptimize(removed);
    (void)q.enqueue(entry(next, names[rng.next() % kTenants], rng, 0), 0, evicted);
    ids[k] = next++;
    if (ns.size() < ns.capacity())
      ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
  }
  state.counters["remove_p50_ns"] = percentile(ns, 0.50);
  state.counters["remove_p99_ns"] = percentile(ns, 0.99);
}
BENCHMARK(BM_FlowQueueRemove);

void BM_FlowQueueMemory(benchmark::State& state) {
  const auto names = tenant_names();
  for (auto _ : state) {
    Rng rng(11);
    std::vector<FlowQueue::Removed> evicted;
    const size_t before = mallinfo2().uordblks;
    auto q = std::make_unique<FlowQueue>(bench_config());
    for (int i = 0; i < 100'000; ++i) {
      (void)q->enqueue(
          entry(static_cast<RequestId>(i + 1), names[static_cast<size_t>(i) % kTenants], rng, 0), 0,
          evicted);
    }
    const size_t after = mallinfo2().uordblks;
    state.counters["queued"] = static_cast<double>(q->size());
    state.counters["bytes_per_request"] = static_cast<double>(after - before) / 100'000.0;
    state.counters["MiB_total"] = static_cast<double>(after - before) / (1024.0 * 1024.0);
  }
}
BENCHMARK(BM_FlowQueueMemory)->Iterations(1);

}  // namespace
}  // namespace kvgate::route

BENCHMARK_MAIN();
