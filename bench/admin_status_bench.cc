// What one refresh of the admin status page (GET /admin/ui, docs/gateway.md) costs the
// gateway: the admin API calls the page makes per refresh, against a pool of 100
// endpoints that were scraped and whose approximate index holds 2,000 routed prompts of
// 128 blocks. Per iteration: a page of 25 endpoints with the pool summary, the same with
// the TTFT/ITL histories (the page asks for them every 5 s: counted every time here),
// and the recent requests. `gateway_cpu_us` is the process's CPU time less the
// benchmark thread's own (the HTTP client), per refresh: the admin listener's and the
// pool's threads. The bound is 1,000 us.
//
//   build/release/admin_status_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <ctime>
#include <numeric>
#include <thread>

#include "env/system_clock.h"
#include "gateway/control/admin_api.h"
#include "gateway/data/pool_runtime.h"
#include "io/http_client.h"

namespace kvgate::gateway {
namespace {

namespace asio = boost::asio;

constexpr int kEndpoints = 100;
constexpr int kPrompts = 2000;
constexpr uint32_t kBlocks = 128;

double cpu_seconds(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

void BM_StatusPageRefresh(benchmark::State& state) {
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  GatewayMetrics metrics;
  const Clock& clock = env::system_clock();
  PoolConfig config;
  config.name = "main";
  config.router.policy = {"kv-cost", {}};
  config.router.overlap_source = route::OverlapSource::kApprox;
  for (int i = 0; i < kEndpoints; ++i) {
    config.endpoints.push_back({.url = fmt::format("http://10.0.{}.{}:8000", i / 250, i % 250)});
  }
  auto pool = PoolRuntime::create(config, {}, io.get_executor(), metrics, clock);
  if (!pool) {
    state.SkipWithError(pool.error().c_str());
    return;
  }
  std::thread thread([&] { io.run(); });
  // Scraped endpoints, and an approximate index that holds what 2,000 prompts taught it.
  asio::co_spawn(io, (*pool)->with_router([&](route::Router& r) {
    for (route::EndpointId id : r.pool().ids()) {
      r.pool().on_metrics(id, {.waiting = id % 4, .running = id % 9, .kv_usage = 0.4}, clock.now());
    }
  }),
                 asio::use_future)
      .get();
  std::vector<kv::BlockKey> keys(kBlocks);
  for (int p = 0; p < kPrompts; ++p) {
    std::iota(keys.begin(), keys.end(), static_cast<kv::BlockKey>(p) * 1'000'000);
    route::RouteRequest r{
        .id = static_cast<route::RequestId>(p + 1), .keys = keys, .prompt_tokens = kBlocks * 16};
    asio::co_spawn(io, (*pool)->pick(r, {}), asio::use_future).get();
    (*pool)->finished(r.id, true);
  }
  auto admin = AdminApi::start({.address = "127.0.0.1", .port = 0, .token = "t0k"},
                               io.get_executor(), {{pool->get(), nullptr}}, clock);
  if (!admin) {
    state.SkipWithError(admin.error().c_str());
    return;
  }
  const std::string base = fmt::format("http://127.0.0.1:{}", (*admin)->port());
  const std::vector<io::HttpHeader> auth = {{"Authorization", "Bearer t0k"}};
  io::HttpKeepAliveClient client;
  auto get = [&](const std::string& path) {
    auto r = client.fetch("GET", base + path, {}, auth, std::chrono::milliseconds(5000));
    if (!r || r->status != 200) std::abort();
    return r->body.size();
  };
  size_t bytes = 0;
  double gateway_cpu = 0;
  for (auto _ : state) {
    const double process0 = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID);
    const double own0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
    bytes = get("/admin/pools/main/endpoints?offset=25&limit=25");
    bytes += get("/admin/pools/main/endpoints?offset=25&limit=25&history=1");
    bytes += get("/admin/pools/main/recent");
    gateway_cpu += (cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - process0) -
                   (cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - own0);
  }
  state.counters["gateway_cpu_us"] =
      benchmark::Counter(gateway_cpu * 1e6 / static_cast<double>(state.iterations()));
  state.counters["bytes"] = static_cast<double>(bytes);
  (*admin)->stop();
  work.reset();
  io.stop();
  thread.join();
}
BENCHMARK(BM_StatusPageRefresh)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace kvgate::gateway

BENCHMARK_MAIN();
