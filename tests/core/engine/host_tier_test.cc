// The host-memory KV tier: HostTier's LRU, and the EngineModel offloading evicted blocks
// there, loading them back for a later prefix hit at the profile's reload cost, and
// reporting both tiers in KV events that keep a precise index exact.
#include "core/engine/host_tier.h"

#include <gtest/gtest.h>

#include "core/engine/engine_model.h"
#include "core/kv/event_apply.h"
#include "core/kv/precise_index.h"
#include "engine_test_support.h"
#include "tier_test_support.h"

namespace kvgate::engine {
// Named after the file, not anonymous: the tests compile in unity batches.
namespace host_tier_test {

using kv::EngineBlockHash;

using testing::events_since;
using testing::prefill_shape;
using testing::run_a_then_b;
using testing::tier_config;
using testing::tier_profile;

constexpr uint32_t kBs = testing::kTierBlockSize;

TEST(HostTierTest, KeepsTheMostRecentlyUsedCopies) {
  HostTier host(2);
  std::vector<EngineBlockHash> dropped;
  EXPECT_TRUE(host.offload(1, dropped));
  EXPECT_TRUE(host.offload(2, dropped));
  EXPECT_FALSE(host.offload(1, dropped));  // already here: touched, not copied again
  EXPECT_TRUE(host.offload(3, dropped));   // full: drops 2, the least recently used
  EXPECT_EQ(dropped, (std::vector<EngineBlockHash>{2}));
  EXPECT_TRUE(host.contains(1));
  EXPECT_TRUE(host.contains(3));
  host.touch(1);
  EXPECT_TRUE(host.offload(4, dropped));  // drops 3: 1 was touched after it
  EXPECT_EQ(dropped, (std::vector<EngineBlockHash>{2, 3}));
  EXPECT_EQ(host.size(), 2u);
  host.clear();
  EXPECT_EQ(host.size(), 0u);
  EXPECT_TRUE(host.offload(5, dropped));
  EXPECT_TRUE(host.offload(6, dropped));
  EXPECT_EQ(dropped.size(), 2u);  // room for two again after clear()

  HostTier off(0);
  EXPECT_FALSE(off.offload(1, dropped));
  EXPECT_FALSE(off.contains(1));
}

TEST(HostTierTest, ReloadTimeAndCreditComeFromTheProfile) {
  EngineModel engine(tier_config(4), tier_profile(8));
  EXPECT_EQ(engine.host_reload_time(), kMillisecond);
  EngineConfig faster = tier_config(4);
  faster.host_bytes_per_s = 4e9;
  EXPECT_EQ(EngineModel(faster, tier_profile(8)).host_reload_time(), kMillisecond / 4);
  EXPECT_EQ(EngineModel(tier_config(0), tier_profile(8)).host_reload_time(), 0);

  // The built-in H100 profile: 57,344 B/token x 16 over 50 GB/s = 18.35 us a block,
  // against 16 x 21.5 us of prefill compute.
  const Profile h100 = *builtin_profile("h100-qwen2.5-7b");
  EXPECT_NEAR(h100.host_reload_s(16), 18.35e-6, 0.01e-6);
  EXPECT_NEAR(host_block_credit(h100, 16), 0.947, 0.001);
}

// A is evicted from the GPU by B, copied to host memory, and hit there when it comes back.
TEST(HostTierTest, EvictedBlocksAreOffloadedAndLoadedBackAtTheReloadCost) {
  const Profile profile = tier_profile(8);
  EngineModel engine(tier_config(16), profile);
  testing::Driver d(engine);
  kv::PreciseIndex index({.model = "m", .block_size = kBs});

  // A: 2 cached blocks; B takes all 8 blocks: A's two are evicted, A's tail first.
  ASSERT_NO_FATAL_FAILURE(run_a_then_b(engine, d));

  std::vector<EngineBlockHash> a_hashes;
  for (const KvEvent& e : d.steps.front().kv_events) {
    if (auto* s = std::get_if<BlockStored>(&e)) a_hashes = s->block_hashes;
  }
  ASSERT_EQ(a_hashes.size(), 2u);
  // The copies are reported before the GPU removals.
  std::vector<KvEvent> b_events = events_since(d, 1);
  std::vector<KvEvent> offload;
  for (const KvEvent& e : b_events) {
    if (auto* s = std::get_if<BlockStored>(&e); s && s->medium == kv::kMediumCpu) {
      offload.push_back(e);
    }
    if (std::holds_alternative<BlockRemoved>(e)) offload.push_back(e);
  }
  ASSERT_EQ(offload.size(), 2u);
  const auto& copied = std::get<BlockStored>(offload[0]);
  EXPECT_EQ(copied.block_hashes, (std::vector<EngineBlockHash>{a_hashes[1], a_hashes[0]}));
  EXPECT_TRUE(copied.token_ids.empty());  // as vLLM's offloading connector
  EXPECT_FALSE(copied.parent_block_hash.has_value());
  EXPECT_EQ(copied.block_size, kBs);
  const auto& evicted = std::get<BlockRemoved>(offload[1]);
  EXPECT_EQ(evicted.medium, kv::kMediumGpu);
  EXPECT_EQ(evicted.block_hashes, copied.block_hashes);
  EXPECT_EQ(engine.metrics().host_offloaded_blocks, 2u);
  EXPECT_TRUE(engine.host().contains(a_hashes[0]));

  // The index holds A in CPU memory only.
  kv::apply_events(index, 0, events_since(d, 0));
  std::vector<kv::BlockKey> a_keys;
  const std::vector<kv::TokenId> a_prompt = testing::tier_prompt_a();
  kv::hash_blocks(a_prompt, kBs, kv::block_seed("m", "", ""), a_keys);
  std::vector<kv::EndpointMatch> m;
  index.match(a_keys, 0, m);
  EXPECT_EQ(m, (std::vector<kv::EndpointMatch>{{0, 0, 2}}));
  EXPECT_EQ(index.stats(0).anomalies(), 0u);

  // A again: its first block (the most it may take from cache) is loaded back from host.
  const size_t mark = d.steps.size();
  ASSERT_TRUE(engine.add(testing::request(3, a_prompt, 1), d.now).ok());
  d.run_until_idle();
  EXPECT_EQ(d.ttft.at(3), profile.step_time(prefill_shape(4, 4)) + kMillisecond);
  EXPECT_EQ(d.steps[mark].host_loads, 1u);
  EXPECT_EQ(d.steps[mark].updates.at(0).cached_tokens, 4u);
  EXPECT_EQ(engine.metrics().host_loaded_blocks, 1u);
  EXPECT_EQ(engine.metrics().host_cache_hits, 4u);
  EXPECT_EQ(engine.metrics().prefix_cache_hits, 0u);     // GPU hits only, as vLLM counts
  EXPECT_EQ(engine.cached_prefix_tokens(a_prompt), 4u);  // back in GPU memory

  // The index sees A in GPU memory again (its head loaded, its tail recomputed), with
  // its copies still in host memory.
  kv::apply_events(index, 0, events_since(d, mark));
  m.clear();
  index.match(a_keys, 0, m);
  EXPECT_EQ(m, (std::vector<kv::EndpointMatch>{{0, 2, 2}}));
  EXPECT_EQ(index.stats(0).anomalies(), 0u);
}

TEST(HostTierTest, WithoutTheTierEvictedBlocksAreRecomputed) {
  const Profile profile = tier_profile(8);
  EngineModel engine(tier_config(0), profile);
  testing::Driver d(engine);
  ASSERT_NO_FATAL_FAILURE(run_a_then_b(engine, d));
  for (const KvEvent& e : events_since(d, 0)) {
    if (auto* s = std::get_if<BlockStored>(&e)) {
      EXPECT_EQ(s->medium, kv::kMediumGpu);
    }
    if (auto* r = std::get_if<BlockRemoved>(&e)) {
      EXPECT_EQ(r->medium, kv::kMediumGpu);
    }
  }
  ASSERT_TRUE(engine.add(testing::request(3, testing::tokens(8, 100), 1), d.now).ok());
  d.run_until_idle();
  EXPECT_EQ(d.ttft.at(3), profile.step_time(prefill_shape(0, 8)));
  EXPECT_EQ(engine.metrics().host_offloaded_blocks, 0u);
  EXPECT_EQ(engine.metrics().host_loaded_blocks, 0u);
}

TEST(HostTierTest, AFullHostTierDropsItsOldestCopies) {
  EngineModel engine(tier_config(1), tier_profile(8));
  testing::Driver d(engine);
  ASSERT_NO_FATAL_FAILURE(run_a_then_b(engine, d));
  // A's tail is copied first, then its head takes the only slot: the tail's copy goes.
  std::vector<KvEvent> events = events_since(d, 1);
  size_t cpu_removed = 0;
  for (const KvEvent& e : events) {
    if (auto* r = std::get_if<BlockRemoved>(&e); r && r->medium == kv::kMediumCpu) {
      cpu_removed += r->block_hashes.size();
    }
  }
  EXPECT_EQ(cpu_removed, 1u);
  EXPECT_EQ(engine.host().size(), 1u);
  // Still consistent for a listener: stored, then dropped, then gone from the GPU.
  kv::PreciseIndex index({.model = "m", .block_size = kBs});
  kv::apply_events(index, 0, events_since(d, 0));
  EXPECT_EQ(index.stats(0).anomalies(), 0u);
  EXPECT_EQ(index.blocks_held(0), 8u + 1u);  // B's 8 in GPU memory, A's head in host
}

TEST(HostTierTest, RunsAreDeterministic) {
  auto run = [] {
    EngineModel engine(tier_config(6), tier_profile(8));
    testing::Driver d(engine);
    for (RequestId id = 1; id <= 12; ++id) {
      const uint32_t first = 100 * static_cast<uint32_t>(id % 4);
      EXPECT_TRUE(
          engine.add(testing::request(id, testing::tokens(12 + 4 * (id % 3), first), 3), d.now)
              .ok());
      d.step_once();
    }
    d.run_until_idle();
    return d.steps;
  };
  const std::vector<StepResult> a = run();
  const std::vector<StepResult> b = run();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) testing::expect_same_step_shape(a[i], b[i]);
}

TEST(HostTierTest, ResetPrefixCacheForgetsTheHostCopies) {
  EngineModel engine(tier_config(16), tier_profile(8));
  testing::Driver d(engine);
  ASSERT_NO_FATAL_FAILURE(run_a_then_b(engine, d));
  ASSERT_GT(engine.host().size(), 0u);
  std::vector<KvEvent> events;
  ASSERT_TRUE(engine.reset_prefix_cache(events));
  EXPECT_EQ(engine.host().size(), 0u);
}

}  // namespace host_tier_test
}  // namespace kvgate::engine
