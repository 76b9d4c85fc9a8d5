// Helpers shared by the KV tier tests (host_tier_test.cc, disk_tier_test.cc): an engine
// with 4-token blocks whose copies cost round numbers, and the two prompts whose second
// evicts the first. Inline in a header of its own (the tests compile in unity batches).
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/engine/engine_model.h"
#include "engine_test_support.h"

namespace kvgate::engine::testing {

inline constexpr uint32_t kTierBlockSize = 4;

// 250,000 bytes per token: a block of 4 tokens is 1 MB, copied between host memory and
// the GPU in exactly 1 ms (1 GB/s). `disk_bytes_per_s`: the disk's read bandwidth (0:
// none given).
inline Profile tier_profile(uint32_t gpu_blocks, double disk_bytes_per_s = 0) {
  Profile p = simple_profile(gpu_blocks, kTierBlockSize);
  p.kv_bytes_per_token = 250'000;
  p.host_bytes_per_s = 1e9;
  p.disk_bytes_per_s = disk_bytes_per_s;
  return p;
}

inline EngineConfig tier_config(uint32_t host_blocks, uint32_t disk_blocks = 0) {
  EngineConfig c;
  c.block_size = kTierBlockSize;
  c.num_host_blocks = host_blocks;
  c.num_disk_blocks = disk_blocks;
  return c;
}

// The step shape of a prefill of `n` tokens after `start` cached ones.
inline StepShape prefill_shape(uint64_t start, uint64_t n) {
  return {n, static_cast<double>(n) * (static_cast<double>(start) + (n + 1) / 2.0), 0, 0};
}

// Every event of the steps from `from` on.
inline std::vector<KvEvent> events_since(const Driver& d, size_t from) {
  std::vector<KvEvent> out;
  for (size_t i = from; i < d.steps.size(); ++i) {
    out.insert(out.end(), d.steps[i].kv_events.begin(), d.steps[i].kv_events.end());
  }
  return out;
}

// A's prompt: 8 tokens, 2 blocks.
inline std::vector<kv::TokenId> tier_prompt_a() { return tokens(8, 100); }

// Request 1, A, run to idle (2 cached blocks), then request 2, B: 32 tokens that take all
// 8 blocks of a tier_profile(8) engine, evicting A's (its tail first). Call it under
// ASSERT_NO_FATAL_FAILURE.
inline void run_a_then_b(EngineModel& engine, Driver& d) {
  ASSERT_TRUE(engine.add(request(1, tier_prompt_a(), 1), d.now).ok());
  d.run_until_idle();
  ASSERT_TRUE(engine.add(request(2, tokens(32, 500), 1), d.now).ok());
  d.run_until_idle();
}

}  // namespace kvgate::engine::testing
