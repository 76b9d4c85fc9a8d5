// Benchmarks of the prefix indexes (issue 2's targets):
//   - block-events applied per second (BM_ApplyEvents), realistic 450-block chains;
//   - match latency p50/p99 for a 450-block (7,200-token) prompt with 1M (block,
//     endpoint) pairs held across 8, 64 and 1,024 endpoints (BM_Match);
//   - bytes per (block, endpoint) held (the bytes_per_pair counter of BM_Match).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>

#include "core/common/rng.h"
#include "core/kv/approx_index.h"
#include "core/kv/precise_index.h"

namespace kvgate::kv {
namespace {

constexpr uint32_t kBlockSize = 16;
constexpr size_t kPromptBlocks = 450;  // 7,200 tokens
constexpr size_t kSystemBlocks = 375;  // 6,000-token shared system prompt (llm-d's workload)
constexpr size_t kChunkBlocks = 32;    // blocks per BlockStored event (512-token prefill chunks)

// A workload of requests: G groups share a system prompt, each request adds a question.
struct Workload {
  std::vector<std::vector<TokenId>> tokens;
  std::vector<std::vector<BlockKey>> keys;
  std::vector<uint32_t> group;

  Workload(size_t groups, size_t requests, Rng& rng) {
    std::vector<std::vector<TokenId>> system(groups);
    for (auto& s : system) {
      s.resize(kSystemBlocks * kBlockSize);
      for (auto& t : s) t = static_cast<TokenId>(rng.below(150000));
    }
    uint64_t seed = block_seed("bench", "", "");
    for (size_t r = 0; r < requests; ++r) {
      uint32_t g = static_cast<uint32_t>(rng.below(groups));
      std::vector<TokenId> t = system[g];
      t.resize(kPromptBlocks * kBlockSize);
      for (size_t i = kSystemBlocks * kBlockSize; i < t.size(); ++i) {
        t[i] = static_cast<TokenId>(rng.below(150000));
      }
      std::vector<BlockKey> k;
      hash_blocks(t, kBlockSize, seed, k);
      tokens.push_back(std::move(t));
      keys.push_back(std::move(k));
      group.push_back(g);
    }
  }
};

// The engine's own (opaque) hash of a block: any function of content and endpoint.
uint64_t engine_hash(EndpointId e, BlockKey own) { return own * 0x9E3779B97F4A7C15ULL + e; }

// Stores request r on endpoint e as a run of BlockStored events of kChunkBlocks each.
size_t store_request(PreciseIndex& index, const Workload& w, size_t r, EndpointId e,
                     std::vector<uint64_t>& hashes) {
  const auto& keys = w.keys[r];
  hashes.resize(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) hashes[i] = engine_hash(e, keys[i]);
  for (size_t from = 0; from < keys.size(); from += kChunkBlocks) {
    size_t n = std::min(kChunkBlocks, keys.size() - from);
    BlockStoredEvent ev;
    ev.block_hashes = std::span(hashes).subspan(from, n);
    if (from > 0) ev.parent_block_hash = hashes[from - 1];
    ev.token_ids = std::span(w.tokens[r]).subspan(from * kBlockSize, n * kBlockSize);
    ev.block_size = kBlockSize;
    index.apply_stored(e, ev);
  }
  return keys.size();
}

// Steady state: endpoints keep storing new requests and evicting the question blocks of
// old ones (the shared system prompts stay cached, as on a real engine).
void BM_ApplyEvents(benchmark::State& state) {
  Rng rng(1);
  const EndpointId endpoints = 8;
  Workload w(64, 4096, rng);
  PreciseIndex index({.model = "bench", .block_size = kBlockSize});
  std::vector<uint64_t> hashes;
  size_t r = 0, events = 0;
  std::vector<std::pair<EndpointId, size_t>> live;  // stored (endpoint, request)
  for (auto _ : state) {
    EndpointId e = static_cast<EndpointId>(rng.below(endpoints));
    events += store_request(index, w, r % w.keys.size(), e, hashes);
    live.push_back({e, r % w.keys.size()});
    ++r;
    if (live.size() > 512) {  // evict the oldest request's question blocks
      auto [oe, orq] = live.front();
      live.erase(live.begin());
      hashes.clear();
      for (size_t i = kSystemBlocks; i < kPromptBlocks; ++i) {
        hashes.push_back(engine_hash(oe, w.keys[orq][i]));
      }
      index.apply_removed(oe, {.block_hashes = hashes});
      events += hashes.size();
    }
  }
  state.counters["block_events_per_s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["anomalies"] = static_cast<double>(index.stats(0).anomalies());
}
BENCHMARK(BM_ApplyEvents)->Unit(benchmark::kMicrosecond)->MinTime(2.0);

// 1M (block, endpoint) pairs across `endpoints`; each request lives on its group's home
// endpoint (as a cache-aware router would place it) and, one time in five, on another.
void BM_Match(benchmark::State& state) {
  const EndpointId endpoints = static_cast<EndpointId>(state.range(0));
  Rng rng(2);
  const size_t groups = std::max<size_t>(endpoints, 64);
  Workload w(groups, 6000, rng);
  PreciseIndex index({.model = "bench", .block_size = kBlockSize});
  std::vector<uint64_t> hashes;
  std::vector<size_t> stored;
  for (size_t r = 0; index.held_pairs() < 1'000'000 && r < w.keys.size(); ++r) {
    EndpointId home = w.group[r] % endpoints;
    store_request(index, w, r, home, hashes);
    if (rng.below(5) == 0) {
      store_request(index, w, r, static_cast<EndpointId>(rng.below(endpoints)), hashes);
    }
    stored.push_back(r);
  }
  std::vector<EndpointMatch> out;
  std::vector<double> ns;
  size_t matched_blocks = 0;
  for (auto _ : state) {
    const auto& keys = w.keys[stored[rng.below(stored.size())]];
    out.clear();
    auto t0 = std::chrono::steady_clock::now();
    index.match(keys, 0, out);
    auto t1 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(out.data());
    ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
    for (const auto& m : out) matched_blocks = std::max<size_t>(matched_blocks, m.total_blocks);
  }
  std::sort(ns.begin(), ns.end());
  state.counters["p50_ns"] = ns[ns.size() / 2];
  state.counters["p99_ns"] = ns[ns.size() * 99 / 100];
  state.counters["pairs"] = static_cast<double>(index.held_pairs());
  state.counters["distinct_blocks"] = static_cast<double>(index.distinct_blocks());
  state.counters["bytes_per_pair"] =
      static_cast<double>(index.memory_bytes()) / static_cast<double>(index.held_pairs());
  state.counters["max_match"] = static_cast<double>(matched_blocks);
}
BENCHMARK(BM_Match)->Arg(8)->Arg(64)->Arg(1024)->Unit(benchmark::kMicrosecond)->MinTime(1.0);

// The approximate index on the same shape of traffic: record + match per request.
void BM_ApproxRecordAndMatch(benchmark::State& state) {
  Rng rng(3);
  Workload w(64, 2048, rng);
  ApproxIndex index({});
  std::vector<EndpointMatch> out;
  Nanos now = 0;
  for (auto _ : state) {
    size_t r = rng.below(w.keys.size());
    out.clear();
    index.match(w.keys[r], now, out);
    index.record(static_cast<EndpointId>(w.group[r] % 64), w.keys[r], now);
    now += kMillisecond;
  }
  state.counters["bytes_per_pair"] =
      static_cast<double>(index.memory_bytes()) / static_cast<double>(index.held_pairs());
}
BENCHMARK(BM_ApproxRecordAndMatch)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kvgate::kv

BENCHMARK_MAIN();
