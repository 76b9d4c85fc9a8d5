// Endpoint discovery at fleet scale: 1,000 endpoints in one pool, churn of one endpoint
// replaced at a time (the issue's 10 endpoints per second is ten of these a second).
//
//   BM_ReconcileChurn        one source report of the whole 1,000-endpoint set with one
//                            endpoint gone and one new (what a DNS answer, a file re-read
//                            or a Kubernetes event costs the reconciler)
//   BM_ReconcileUnchanged    the same set again (a resync or DNS re-resolve that finds
//                            nothing)
//   BM_PodEvent              one WATCH event line: JSON parse + pod -> endpoint
//   BM_RouterAddRemove       the router's part: remove one endpoint (and its index
//                            entries) and add one, in a pool of 1,000 whose precise index
//                            holds 64 blocks per endpoint
//
//   build/release/discovery_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <boost/json.hpp>

#include "core/discovery/reconciler.h"
#include "core/kv/approx_index.h"
#include "core/kv/precise_index.h"
#include "core/route/router.h"
#include "discovery/k8s_objects.h"

namespace kvgate::discovery {
namespace {

constexpr int kEndpoints = 1000;

DiscoveredEndpoint endpoint(int i) {
  DiscoveredEndpoint e;
  e.spec.url = fmt::format("http://10.{}.{}.{}:8000", i / 65536, (i / 256) % 256, i % 256);
  e.spec.zone = fmt::format("z{}", i % 3);
  e.kv_events =
      KvEventsAddress{.publisher = fmt::format("tcp://10.0.{}.{}:5557", i / 256, i % 256)};
  return e;
}

void BM_ReconcileChurn(benchmark::State& state) {
  Reconciler r({.grace = 0});
  const size_t s = r.add_source("k8s");
  std::vector<DiscoveredEndpoint> set;
  for (int i = 0; i < kEndpoints; ++i) set.push_back(endpoint(i));
  (void)r.report(s, 0, set);
  int next = kEndpoints;
  size_t oldest = 0;
  Nanos now = 0;
  for (auto _ : state) {
    set[oldest] = endpoint(next++);  // one leaves, one joins
    oldest = (oldest + 1) % set.size();
    auto actions = r.report(s, ++now, set);
    benchmark::DoNotOptimize(actions);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ReconcileChurn)->Unit(benchmark::kMicrosecond);

void BM_ReconcileUnchanged(benchmark::State& state) {
  Reconciler r({.grace = 0});
  const size_t s = r.add_source("dns");
  std::vector<DiscoveredEndpoint> set;
  for (int i = 0; i < kEndpoints; ++i) set.push_back(endpoint(i));
  (void)r.report(s, 0, set);
  Nanos now = 0;
  for (auto _ : state) {
    auto actions = r.report(s, ++now, set, /*resync=*/true);
    benchmark::DoNotOptimize(actions);
  }
}
BENCHMARK(BM_ReconcileUnchanged)->Unit(benchmark::kMicrosecond);

void BM_PodEvent(benchmark::State& state) {
  const std::string line =
      R"({"type":"MODIFIED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"vllm-6d8f-x7k2p","generateName":"vllm-6d8f-","namespace":"llm","uid":"0b8d1c3e-6a57-4d2e-9d7c-1f2e3a4b5c6d","resourceVersion":"48211","creationTimestamp":"2026-12-01T10:00:00Z","labels":{"app":"vllm","kvgate.io/role":"decode","topology.kubernetes.io/zone":"eu-west-1a","pod-template-hash":"6d8f"},"annotations":{"kvgate.io/kv-events-port":"5557"}},"spec":{"containers":[{"name":"vllm","image":"vllm/vllm-openai:v0.11.0","ports":[{"name":"http","containerPort":8000,"protocol":"TCP"}]}],"nodeName":"node-3","restartPolicy":"Always"},"status":{"phase":"Running","conditions":[{"type":"Initialized","status":"True"},{"type":"Ready","status":"True"},{"type":"ContainersReady","status":"True"},{"type":"PodScheduled","status":"True"}],"hostIP":"10.0.3.4","podIP":"10.244.3.17","podIPs":[{"ip":"10.244.3.17"}],"startTime":"2026-12-01T10:00:00Z"}}})";
  KubernetesSourceConfig c;
  c.selector = "app=vllm";
  for (auto _ : state) {
    boost::json::value v = boost::json::parse(line);
    auto eps = pod_endpoints(v.at("object"), c);
    benchmark::DoNotOptimize(eps);
  }
}
BENCHMARK(BM_PodEvent)->Unit(benchmark::kMicrosecond);

void BM_RouterAddRemove(benchmark::State& state) {
  kv::PreciseIndex precise{{.model = "m", .block_size = 16}};
  kv::ApproxIndex approx{{}};
  route::RouterConfig config;
  config.block_size = 16;
  config.policy = {"kv-cost", {}};
  auto router = route::Router::create(config, {.precise = &precise, .approx = &approx});
  if (!router) std::abort();
  constexpr int kBlocks = 64;
  // Each endpoint holds 64 blocks of one of 200 shared prefixes (the engine's hashes).
  std::vector<kv::TokenId> tokens(kBlocks * 16);
  for (size_t t = 0; t < tokens.size(); ++t) tokens[t] = static_cast<kv::TokenId>(t);
  auto fill = [&](route::EndpointId id, int seed) {
    std::vector<uint64_t> hashes;
    for (int b = 0; b < kBlocks; ++b)
      hashes.push_back(static_cast<uint64_t>((seed % 200) * 1000 + b + 1));
    tokens[0] = static_cast<kv::TokenId>(seed % 200);
    precise.apply_stored(id, {.block_hashes = hashes, .token_ids = tokens, .block_size = 16});
  };
  std::vector<route::EndpointId> ids;
  for (int i = 0; i < kEndpoints; ++i) {
    auto id = (*router)->add_endpoint(endpoint(i).spec, 0);
    if (!id) std::abort();
    fill(*id, i);
    ids.push_back(*id);
  }
  int next = kEndpoints;
  size_t oldest = 0;
  for (auto _ : state) {
    (*router)->remove_endpoint(ids[oldest]);
    auto id = (*router)->add_endpoint(endpoint(next).spec, 0);
    if (!id) std::abort();
    fill(*id, next++);
    ids[oldest] = *id;
    oldest = (oldest + 1) % ids.size();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RouterAddRemove)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kvgate::discovery

BENCHMARK_MAIN();
