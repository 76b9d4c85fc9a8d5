// Benchmarks of the warm-up's hot-prefix table (core/kv/hot_prefixes.h), which the gateway
// feeds on every routed request under a per-pool mutex:
//   - BM_Observe: one 7,200-token prompt (450 blocks of 16: a 6,000-token system prompt of
//     one of G customers plus a unique question), table at steady state;
//   - BM_Top: choosing the warm-up set (16 prefixes) from that table.
#include <benchmark/benchmark.h>

#include "core/common/rng.h"
#include "core/kv/hot_prefixes.h"

namespace kvgate::kv {
namespace {

constexpr uint32_t kBlockSize = 16;
constexpr size_t kPromptBlocks = 450;
constexpr size_t kSystemBlocks = 375;

struct Requests {
  std::vector<std::vector<TokenId>> tokens;
  std::vector<std::vector<BlockKey>> keys;

  Requests(size_t groups, size_t n, Rng& rng) {
    std::vector<std::vector<TokenId>> system(groups);
    for (auto& s : system) {
      s.resize(kSystemBlocks * kBlockSize);
      for (auto& t : s) t = static_cast<TokenId>(rng.below(150000));
    }
    const uint64_t seed = block_seed("bench", "", "");
    for (size_t r = 0; r < n; ++r) {
      std::vector<TokenId> t = system[rng.below(groups)];
      t.resize(kPromptBlocks * kBlockSize);
      for (size_t i = kSystemBlocks * kBlockSize; i < t.size(); ++i) {
        t[i] = static_cast<TokenId>(rng.below(150000));
      }
      std::vector<BlockKey> k;
      hash_blocks(t, kBlockSize, seed, k);
      tokens.push_back(std::move(t));
      keys.push_back(std::move(k));
    }
  }
};

void BM_Observe(benchmark::State& state) {
  Rng rng(7);
  Requests reqs(static_cast<size_t>(state.range(0)), 4096, rng);
  HotPrefixes hot(kBlockSize);
  Nanos now = 0;
  for (size_t i = 0; i < reqs.keys.size(); ++i) {  // steady state first
    hot.observe(reqs.keys[i], {.token_ids = reqs.tokens[i]}, now += kMillisecond);
  }
  size_t i = 0;
  for (auto _ : state) {
    const size_t r = i++ % reqs.keys.size();
    hot.observe(reqs.keys[r], {.token_ids = reqs.tokens[r]}, now += kMillisecond);
  }
  state.counters["entries"] = static_cast<double>(hot.size());
  state.counters["stored_MB"] = static_cast<double>(hot.stored_tokens()) * 4 / 1e6;
}
BENCHMARK(BM_Observe)->Arg(16)->Arg(256);

void BM_Top(benchmark::State& state) {
  Rng rng(7);
  Requests reqs(static_cast<size_t>(state.range(0)), 4096, rng);
  HotPrefixes hot(kBlockSize);
  Nanos now = 0;
  for (size_t i = 0; i < reqs.keys.size(); ++i) {
    hot.observe(reqs.keys[i], {.token_ids = reqs.tokens[i]}, now += kMillisecond);
  }
  for (auto _ : state) benchmark::DoNotOptimize(hot.top(16, now));
  state.counters["entries"] = static_cast<double>(hot.size());
}
BENCHMARK(BM_Top)->Arg(16)->Arg(256);

}  // namespace
}  // namespace kvgate::kv

BENCHMARK_MAIN();
