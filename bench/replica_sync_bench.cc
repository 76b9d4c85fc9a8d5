// CPU per routing event shared between gateway replicas (docs/replicas.md):
//   - Publish: what the data path pays per request on the router's strand (the routed
//     event appended to the Outbox with its prompt's block keys, then prefill done and
//     finished), plus the batch's encoding off the data path, per request;
//   - Apply: decoding a peer's batch and applying every request of it through PeerSync
//     (Router::commit with the approximate index, on_first_token, on_finished), per
//     request.
// Prompts of 128 blocks (2,048 tokens at block size 16) drawn from 1,024 conversations
// over 16 endpoints; batches of 100 requests (5 ms at 20,000 requests/s).
//   - ApplyBatch: what one replica of a fleet of 4 applies per flush: 3 peers' batches of
//     8 requests each (routed, and the previous batch's first tokens and ends), decoded
//     and applied, against an index that already holds the fleet's history; per applied
//     peer request. Args: blocks per prompt (7; 112, the CPU bench's 1,792-token prompts),
//     and cold caches (1: 8 MiB written between rounds, untimed, as a gateway's other work
//     would between two replies).
//
//   build/release/replica_sync_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only
//   build/release/replica_sync_bench --benchmark_filter=ApplyBatch --benchmark_repetitions=5
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "core/cluster/peer_sync.h"
#include "core/common/rng.h"

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

// --- ApplyBatch.

constexpr int kPeers = 3;
constexpr int kPeerBatch = 8;       // requests per peer batch (flush_batch's default)
constexpr int kRounds = 64;         // distinct batches per peer, replayed
constexpr int kFleetEndpoints = 4;  // the CPU bench's engines
constexpr int kPrefixes = 32;       // shared prefixes, as in the CPU bench
constexpr int kFleetConversations = 2048;
constexpr int kFillerPrompts = 1000;  // 10 blocks each: ~10k blocks of other traffic

std::string fleet_url(uint64_t endpoint) { return fmt::format("http://10.0.0.{}:8000", endpoint); }

// Each conversation: one of the shared prefixes (6/7 of the prompt), then blocks of its
// own (1/7, at least one).
std::vector<std::vector<kv::BlockKey>> fleet_prompts(uint32_t blocks) {
  const uint32_t own = std::max<uint32_t>(1, blocks / 7);
  const uint32_t shared = blocks - own;
  std::vector<std::vector<kv::BlockKey>> out(kFleetConversations);
  std::vector<kv::TokenId> tokens(size_t{blocks} * kBs);
  for (int c = 0; c < kFleetConversations; ++c) {
    const auto prefix = static_cast<kv::TokenId>(c % kPrefixes);
    std::iota(tokens.begin(), tokens.begin() + shared * kBs, prefix * 1'000'000);
    std::iota(tokens.begin() + shared * kBs, tokens.end(),
              static_cast<kv::TokenId>(100'000'000 + c * 10'000));
    kv::hash_blocks(tokens, kBs, kv::block_seed("m", "", ""), out[c]);
  }
  return out;
}

void BM_ApplyBatch(benchmark::State& state) {
  const auto blocks = static_cast<uint32_t>(state.range(0));
  const bool cold = state.range(1) != 0;
  const auto prompts = fleet_prompts(blocks);
  kv::ApproxIndex approx({});
  route::RouterConfig c;
  c.block_size = kBs;
  c.overlap_source = route::OverlapSource::kApprox;
  auto created = route::Router::create(c, {.approx = &approx});
  if (!created) std::abort();
  std::unique_ptr<route::Router> router = std::move(*created);
  for (int e = 0; e < kFleetEndpoints; ++e) {
    if (!router->add_endpoint({.url = fleet_url(static_cast<uint64_t>(e))}, 0)) std::abort();
  }
  Rng rng(5);
  // The history: every conversation and the other traffic recorded once, interleaved.
  {
    std::vector<kv::TokenId> tokens(10 * kBs);
    std::vector<kv::BlockKey> keys;
    for (int i = 0; i < std::max(kFleetConversations, kFillerPrompts); ++i) {
      if (i < kFleetConversations) {
        approx.record(static_cast<kv::EndpointId>(rng.below(kFleetEndpoints)), prompts[i], 0);
      }
      if (i < kFillerPrompts) {
        std::iota(tokens.begin(), tokens.end(), static_cast<kv::TokenId>(500'000'000 + i * 1000));
        keys.clear();
        kv::hash_blocks(tokens, kBs, kv::block_seed("m", "", ""), keys);
        approx.record(static_cast<kv::EndpointId>(rng.below(kFleetEndpoints)), keys, 0);
      }
    }
  }
  // Each peer's batches: round r routes requests r*8+1..r*8+8 and ends round r-1's (the
  // first round ends the last one's, so the rounds replay in a loop).
  std::vector<std::vector<std::string>> wires(kPeers);
  for (int p = 0; p < kPeers; ++p) {
    Outbox out(fmt::format("gw-{}", p + 1), "main");
    route::Decision d;
    for (int r = 0; r < kRounds; ++r) {
      for (int i = 0; i < kPeerBatch; ++i) {
        const uint64_t id = static_cast<uint64_t>(r * kPeerBatch + i + 1);
        const auto& keys = prompts[rng.below(kFleetConversations)];
        route::RouteRequest req{.id = id, .keys = keys, .prompt_tokens = blocks * kBs};
        out.routed(req, d, fleet_url(rng.below(kFleetEndpoints)), "", 0);
      }
      const int prev = (r + kRounds - 1) % kRounds;
      for (int i = 0; i < kPeerBatch; ++i) {
        const uint64_t id = static_cast<uint64_t>(prev * kPeerBatch + i + 1);
        out.load(EventKind::kPrefillDone, id, 0);
        out.load(EventKind::kFinished, id, 0, 4);
      }
      wires[p].push_back(encode(*out.take(0)));
    }
  }
  PeerSync sync(*router, "gw-0", {});
  std::vector<uint64_t> seqs(kPeers, 0);
  std::vector<uint64_t> junk(size_t{1} << 20);  // 8 MiB
  Nanos now = kSecond;
  size_t round = 0;
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      for (size_t i = 0; i < junk.size(); i += 8) junk[i] += round;
      benchmark::DoNotOptimize(junk.data());
      state.ResumeTiming();
    }
    now += 25 * kMillisecond;
    for (int p = 0; p < kPeers; ++p) {
      Result<EventBatch> b = decode(wires[p][round % kRounds]);
      if (!b) std::abort();
      b->seq = ++seqs[p];  // replayed rounds go on the peer's sequence
      sync.apply(*b, now);
    }
    ++round;
  }
  state.SetItemsProcessed(state.iterations() * kPeers * kPeerBatch);
  state.counters["index_blocks"] = static_cast<double>(approx.distinct_blocks());
  state.counters["peer_requests_left"] = static_cast<double>(sync.peer_requests());
  state.counters["unknown_endpoint"] = static_cast<double>(sync.stats().unknown_endpoint);
}
BENCHMARK(BM_ApplyBatch)->Args({7, 0})->Args({112, 0});
// Cold rounds spend ~1 ms untimed each evicting the caches: a fixed count keeps it short.
BENCHMARK(BM_ApplyBatch)->Args({7, 1})->Args({112, 1})->Iterations(2000);

}  // namespace
}  // namespace kvgate::cluster

BENCHMARK_MAIN();
