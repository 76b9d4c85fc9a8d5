// The disk KV tier below host memory: host copies dropped for room (GPU evictions, with
// no host tier) are written to disk, loaded back for a later prefix hit at the disk's
// reload cost, and reported as medium DISK so that a precise index keeps the tier.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/engine/engine_model.h"
#include "core/kv/event_apply.h"
#include "core/kv/precise_index.h"
#include "engine_test_support.h"
#include "tier_test_support.h"

namespace kvgate::engine {
// Named after the file, not anonymous: the tests compile in unity batches.
namespace disk_tier_test {

using kv::EngineBlockHash;

using testing::events_since;
using testing::prefill_shape;
using testing::run_a_then_b;

constexpr uint32_t kBs = testing::kTierBlockSize;

// A block of 4 tokens is 1 MB (testing::tier_profile), copied from host memory in 1 ms
// (1 GB/s) and read from disk in 10 ms (100 MB/s): 11 ms from disk to the GPU.
Profile disk_profile(uint32_t gpu_blocks) { return testing::tier_profile(gpu_blocks, 1e8); }

EngineConfig disk_config(uint32_t host_blocks, uint32_t disk_blocks) {
  return testing::tier_config(host_blocks, disk_blocks);
}

// The engine's hashes of the blocks the first BlockStored(GPU) of `steps` names.
std::vector<EngineBlockHash> first_stored(const testing::Driver& d) {
  for (const KvEvent& e : d.steps.front().kv_events) {
    if (auto* s = std::get_if<BlockStored>(&e); s && s->medium == kv::kMediumGpu) {
      return s->block_hashes;
    }
  }
  return {};
}

bool names(const std::vector<EngineBlockHash>& v, EngineBlockHash h) {
  return std::find(v.begin(), v.end(), h) != v.end();
}

kv::EndpointMatch match_prompt(kv::PreciseIndex& index, const std::vector<kv::TokenId>& prompt) {
  std::vector<kv::BlockKey> keys;
  kv::hash_blocks(prompt, kBs, kv::block_seed("m", "", ""), keys);
  std::vector<kv::EndpointMatch> m;
  index.match(keys, 0, m);
  return m.empty() ? kv::EndpointMatch{} : m[0];
}

TEST(DiskTierTest, ReloadTimeAndCreditComeFromTheProfile) {
  EngineModel engine(disk_config(4, 8), disk_profile(8));
  EXPECT_EQ(engine.disk_reload_time(), 11 * kMillisecond);
  EngineConfig faster = disk_config(4, 8);
  faster.disk_bytes_per_s = 1e9;
  EXPECT_EQ(EngineModel(faster, disk_profile(8)).disk_reload_time(), 2 * kMillisecond);
  EXPECT_EQ(EngineModel(disk_config(4, 0), disk_profile(8)).disk_reload_time(), 0);

  // The built-in profiles (docs/engine-model.md): 917,504 B a block at 5 GB/s of disk
  // reads, then 50 GB/s into the GPU: 201.85 us against 344.1 us of prefill compute.
  const Profile h100 = *builtin_profile("h100-qwen2.5-7b");
  EXPECT_NEAR(h100.disk_reload_s(16), 201.85e-6, 0.01e-6);
  EXPECT_NEAR(disk_block_credit(h100, 16), 0.413, 0.001);
  const Profile tp2 = *builtin_profile("2xh100-qwen3-32b");
  EXPECT_NEAR(disk_block_credit(tp2, 16), 0.495, 0.001);
  EXPECT_LT(disk_block_credit(h100, 16), host_block_credit(h100, 16));
}

// A goes to host memory when B evicts it, to disk when C's blocks push it out of host
// memory, and is loaded from disk when it comes back.
TEST(DiskTierTest, HostCopiesDroppedForRoomGoToDiskAndLoadBackAtTheDiskCost) {
  const Profile profile = disk_profile(8);
  EngineModel engine(disk_config(2, 16), profile);
  testing::Driver d(engine);
  kv::PreciseIndex index({.model = "m", .block_size = kBs});

  const std::vector<kv::TokenId> a_prompt = testing::tier_prompt_a();
  // A: 2 cached blocks; B evicts A to host memory.
  ASSERT_NO_FATAL_FAILURE(run_a_then_b(engine, d));
  const std::vector<EngineBlockHash> a = first_stored(d);  // A's, in the first step
  ASSERT_EQ(a.size(), 2u);
  EXPECT_TRUE(engine.host().contains(a[0]));
  EXPECT_EQ(engine.disk().size(), 0u);

  const size_t c_mark = d.steps.size();
  ASSERT_TRUE(engine.add(testing::request(3, testing::tokens(32, 900), 1), d.now).ok());
  d.run_until_idle();  // C evicts B; B's copies push A (and most of B) down to disk
  EXPECT_FALSE(engine.host().contains(a[0]));
  EXPECT_TRUE(engine.disk().contains(a[0]));
  EXPECT_TRUE(engine.disk().contains(a[1]));
  EXPECT_EQ(engine.host().size(), 2u);
  EXPECT_EQ(engine.disk().size(), 8u);  // A's two and six of B's eight
  EXPECT_EQ(engine.metrics().disk_offloaded_blocks, 8u);

  // The disk copies are reported before the host removals they replace.
  const std::vector<KvEvent> c_events = events_since(d, c_mark);
  int disk_stored = -1, cpu_removed = -1;
  for (size_t i = 0; i < c_events.size(); ++i) {
    if (auto* s = std::get_if<BlockStored>(&c_events[i]); s && s->medium == kv::kMediumDisk) {
      disk_stored = static_cast<int>(i);
      EXPECT_TRUE(names(s->block_hashes, a[0]) && names(s->block_hashes, a[1]));
      EXPECT_TRUE(s->token_ids.empty());
      EXPECT_FALSE(s->parent_block_hash.has_value());
    }
    if (auto* r = std::get_if<BlockRemoved>(&c_events[i]); r && r->medium == kv::kMediumCpu) {
      cpu_removed = static_cast<int>(i);
      EXPECT_TRUE(names(r->block_hashes, a[0]));
    }
  }
  ASSERT_GE(disk_stored, 0);
  EXPECT_LT(disk_stored, cpu_removed);

  // The index holds A on disk only.
  kv::apply_events(index, 0, events_since(d, 0));
  EXPECT_EQ(match_prompt(index, a_prompt), (kv::EndpointMatch{0, 0, 2, 2}));
  EXPECT_EQ(index.stats(0).anomalies(), 0u);

  // A again: its first block (the most it may take from cache) comes from disk.
  const size_t mark = d.steps.size();
  ASSERT_TRUE(engine.add(testing::request(4, a_prompt, 1), d.now).ok());
  d.run_until_idle();
  EXPECT_EQ(d.ttft.at(4), profile.step_time(prefill_shape(4, 4)) + 11 * kMillisecond);
  EXPECT_EQ(d.steps[mark].disk_loads, 1u);
  EXPECT_EQ(d.steps[mark].host_loads, 0u);
  EXPECT_EQ(d.steps[mark].updates.at(0).cached_tokens, 4u);
  EXPECT_EQ(engine.metrics().disk_loaded_blocks, 1u);
  EXPECT_EQ(engine.metrics().disk_cache_hits, 4u);
  EXPECT_EQ(engine.metrics().host_loaded_blocks, 0u);
  EXPECT_EQ(engine.cached_prefix_tokens(a_prompt), 4u);  // in GPU memory again
  EXPECT_TRUE(engine.disk().contains(a[0]));             // its disk copy stays

  kv::apply_events(index, 0, events_since(d, mark));
  EXPECT_EQ(index.stats(0).anomalies(), 0u);
  EXPECT_EQ(match_prompt(index, a_prompt).gpu_blocks, 2u);
}

// Without a host tier, a block leaving the GPU goes to disk directly.
TEST(DiskTierTest, WithoutAHostTierEvictedBlocksGoToDisk) {
  const Profile profile = disk_profile(8);
  EngineModel engine(disk_config(0, 16), profile);
  testing::Driver d(engine);
  kv::PreciseIndex index({.model = "m", .block_size = kBs});

  const std::vector<kv::TokenId> a_prompt = testing::tier_prompt_a();
  ASSERT_TRUE(engine.add(testing::request(1, a_prompt, 1), d.now).ok());
  d.run_until_idle();
  const std::vector<EngineBlockHash> a = first_stored(d);
  ASSERT_EQ(a.size(), 2u);
  const size_t b_mark = d.steps.size();
  ASSERT_TRUE(engine.add(testing::request(2, testing::tokens(32, 500), 1), d.now).ok());
  d.run_until_idle();
  EXPECT_TRUE(engine.disk().contains(a[0]));
  EXPECT_EQ(engine.metrics().host_offloaded_blocks, 0u);
  EXPECT_EQ(engine.metrics().disk_offloaded_blocks, 2u);
  // Stored(DISK) comes before the GPU removal, and no CPU event is sent.
  int disk_stored = -1, gpu_removed = -1;
  const std::vector<KvEvent> b_events = events_since(d, b_mark);
  for (size_t i = 0; i < b_events.size(); ++i) {
    if (auto* s = std::get_if<BlockStored>(&b_events[i])) {
      EXPECT_NE(s->medium, kv::kMediumCpu);
      if (s->medium == kv::kMediumDisk) disk_stored = static_cast<int>(i);
    }
    if (auto* r = std::get_if<BlockRemoved>(&b_events[i]); r && r->medium == kv::kMediumGpu) {
      gpu_removed = static_cast<int>(i);
    }
  }
  ASSERT_GE(disk_stored, 0);
  EXPECT_LT(disk_stored, gpu_removed);
  kv::apply_events(index, 0, events_since(d, 0));
  EXPECT_EQ(match_prompt(index, a_prompt), (kv::EndpointMatch{0, 0, 2, 2}));

  const size_t mark = d.steps.size();
  ASSERT_TRUE(engine.add(testing::request(3, a_prompt, 1), d.now).ok());
  d.run_until_idle();
  EXPECT_EQ(d.ttft.at(3), profile.step_time(prefill_shape(4, 4)) + 11 * kMillisecond);
  EXPECT_EQ(d.steps[mark].disk_loads, 1u);
}

TEST(DiskTierTest, ResetPrefixCacheForgetsTheDiskToo) {
  EngineModel engine(disk_config(0, 16), disk_profile(8));
  testing::Driver d(engine);
  ASSERT_NO_FATAL_FAILURE(run_a_then_b(engine, d));
  ASSERT_GT(engine.disk().size(), 0u);
  std::vector<KvEvent> events;
  ASSERT_TRUE(engine.reset_prefix_cache(events));
  EXPECT_EQ(engine.disk().size(), 0u);
}

}  // namespace disk_tier_test
}  // namespace kvgate::engine
