// CPU per routing event shared between gateway replicas (docs/replicas.md):
//   - Publish: what the data path pays per request on the router's strand (the routed
//     event appended to the Outbox with its prompt's block keys, then prefill done and
//     finished), plus the batch's encoding off the data path, per request;
//   - Apply: decoding a peer's batch and applying every request of it through PeerSync
//     (Router::commit with the approximate index, on_first_token, on_finished), per
//     request.
// Prompts of 128 blocks (2,048 tokens at block size 16) drawn from 1,024 conversations
// over 16 endpoints; batches of 100 requests (5 ms at 20,000 requests/s).
//
//   build/release/replica_sync_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <numeric>

#include "core/cluster/peer_sync.h"

namespace kvgate::cluster {
namespace {

constexpr uint32_t kBs = 16;
constexpr int kEndpoints = 16;
constexpr int kConversations = 1024;
constexpr uint32_t kBlocks = 128;
constexpr int kBatch = 100;

std::vector<std::vector<kv::BlockKey>> make_prompts() {
  std::vector<std::vector<kv::BlockKey>> out(kConversations);
  for (int c = 0; c < kConversations; ++c) {
    std::vector<kv::TokenId> tokens(kBlocks * kBs);
    std::iota(tokens.begin(), tokens.end(), static_cast<kv::TokenId>(c) * 1'000'000);
    kv::hash_blocks(tokens, kBs, kv::block_seed("m", "", ""), out[c]);
  }
  return out;
}

std::unique_ptr<route::Router> make_router(kv::ApproxIndex& approx) {
  route::RouterConfig c;
  c.block_size = kBs;
  c.overlap_source = route::OverlapSource::kApprox;
  auto r = route::Router::create(c, {.approx = &approx});
  if (!r) std::abort();
  for (int e = 0; e < kEndpoints; ++e) {
    auto id = (*r)->add_endpoint({.url = fmt::format("http://10.0.0.{}:8000", e)}, 0);
    if (!id) std::abort();
  }
  return std::move(*r);
}

void BM_Publish(benchmark::State& state) {
  const auto prompts = make_prompts();
  Outbox out("gw-a", "main");
  route::Decision d;
  const std::string url = "http://10.0.0.7:8000";
  std::string wire;
  uint64_t id = 0;
  Nanos now = 0;
  size_t bytes = 0;
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) {
      const auto& keys = prompts[id % kConversations];
      route::RouteRequest r{.id = ++id, .keys = keys, .prompt_tokens = kBlocks * kBs};
      out.routed(r, d, url, "", now);
      out.load(EventKind::kPrefillDone, id, now);
      out.load(EventKind::kFinished, id, now, 100);
    }
    now += 5 * kMillisecond;
    std::optional<EventBatch> b = out.take(now);
    wire.clear();
    encode(*b, wire);
    bytes = wire.size();
    benchmark::DoNotOptimize(wire.data());
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
  state.counters["bytes_per_request"] = static_cast<double>(bytes) / kBatch;
}
BENCHMARK(BM_Publish);

void BM_Apply(benchmark::State& state) {
  const auto prompts = make_prompts();
  kv::ApproxIndex approx({});
  auto router = make_router(approx);
  PeerSync sync(*router, "gw-b", {});
  Outbox out("gw-a", "main");
  route::Decision d;
  uint64_t id = 0;
  Nanos now = 0;
  // Batches prepared up front: routed in one, done and finished in the next.
  std::vector<std::string> wires;
  for (int b = 0; b < 64; ++b) {
    for (int i = 0; i < kBatch; ++i) {
      const auto& keys = prompts[id % kConversations];
      route::RouteRequest r{.id = ++id, .keys = keys, .prompt_tokens = kBlocks * kBs};
      out.routed(r, d, fmt::format("http://10.0.0.{}:8000", id % kEndpoints), "", now);
      out.load(EventKind::kPrefillDone, id, now);
      out.load(EventKind::kFinished, id, now, 100);
    }
    wires.push_back(encode(*out.take(now)));
  }
  size_t next = 0;
  for (auto _ : state) {
    Result<EventBatch> b = decode(wires[next % wires.size()]);
    if (!b) std::abort();
    // The batches are replayed round after round with the same request ids: each round
    // comes from a peer of its own, so that its requests are new ones.
    b->replica = fmt::format("gw-{}", next / wires.size());
    now += 5 * kMillisecond;
    sync.apply(*b, now);
    ++next;
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
  state.counters["peer_requests_left"] = static_cast<double>(sync.peer_requests());
}
BENCHMARK(BM_Apply);

}  // namespace
}  // namespace kvgate::cluster

BENCHMARK_MAIN();
