// EngineModel: scheduling, prefix caching, eviction, preemption, chunked prefill,
// priorities, metrics and KV events.
#include "core/engine/engine_model.h"

#include <gtest/gtest.h>

#include <set>

#include "core/common/rng.h"
#include "engine_test_support.h"

namespace kvgate::engine {
namespace {

using testing::Driver;
using testing::request;
using testing::simple_profile;
using testing::tokens;

EngineConfig config_with(uint32_t block_size, uint32_t budget = 8192, uint32_t max_seqs = 256) {
  EngineConfig c;
  c.block_size = block_size;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = max_seqs;
  return c;
}

// A prefill of n tokens after `start` cached ones, as the model shapes it.
StepShape prefill_shape(uint64_t start, uint64_t n) {
  return {n, static_cast<double>(n) * (static_cast<double>(start) + (n + 1) / 2.0), 0, 0};
}

TEST(EngineModelTest, PrefixHitShortensTtftExactlyByTheSkippedPrefill) {
  const Profile profile = *builtin_profile("h100-qwen2.5-7b");
  EngineModel engine(EngineConfig{}, profile);
  Driver d(engine);
  ASSERT_TRUE(engine.add(request(1, tokens(1000), 1), d.now).ok());
  d.run_until_idle();
  EXPECT_EQ(d.ttft.at(1),
            profile.preprocess_time(1000) + profile.step_time(prefill_shape(0, 1000)));

  // Same prompt: 62 full blocks cached (992 tokens); the last 8 tokens are computed.
  ASSERT_TRUE(engine.add(request(2, tokens(1000), 1), d.now).ok());
  d.run_until_idle();
  EXPECT_EQ(d.ttft.at(2), profile.preprocess_time(1000) + profile.step_time(prefill_shape(992, 8)));
  EXPECT_EQ(d.steps.back().updates[0].cached_tokens, 992u);

  // Shares its first 500 tokens: 31 blocks (496 tokens) hit.
  std::vector<kv::TokenId> partial = tokens(500);
  std::vector<kv::TokenId> tail = tokens(500, 90000);
  partial.insert(partial.end(), tail.begin(), tail.end());
  EXPECT_EQ(engine.cached_prefix_tokens(partial), 496u);
  ASSERT_TRUE(engine.add(request(3, partial, 1), d.now).ok());
  d.run_until_idle();
  EXPECT_EQ(d.ttft.at(3),
            profile.preprocess_time(1000) + profile.step_time(prefill_shape(496, 504)));

  const EngineMetrics& m = engine.metrics();
  EXPECT_EQ(m.prefix_cache_queries, 3000u);
  EXPECT_EQ(m.prefix_cache_hits, 992u + 496u);
  EXPECT_EQ(m.prompt_tokens, 3000u);
  EXPECT_EQ(m.generation_tokens, 3u);
}

TEST(EngineModelTest, NoPrefixCachingMeansNoHits) {
  EngineConfig c;
  c.enable_prefix_caching = false;
  EngineModel engine(c, simple_profile(1000));
  Driver d(engine);
  for (RequestId id : {1, 2}) {
    ASSERT_TRUE(engine.add(request(id, tokens(100), 1), d.now).ok());
    d.run_until_idle();
  }
  EXPECT_EQ(d.ttft.at(1), d.ttft.at(2));
  EXPECT_EQ(engine.metrics().prefix_cache_hits, 0u);
  for (const StepResult& s : d.steps) EXPECT_TRUE(s.kv_events.empty());
}

TEST(EngineModelTest, EvictsLeastRecentlyUsedBlocksTailFirst) {
  // 8 blocks of 4 tokens.
  EngineModel engine(config_with(4), simple_profile(8, 4));
  Driver d(engine);
  auto run = [&](RequestId id, uint32_t n, uint32_t first) {
    ASSERT_TRUE(engine.add(request(id, tokens(n, first), 1), d.now).ok());
    d.run_until_idle();
  };
  auto removed = [&]() {
    std::vector<EngineBlockHash> out;
    for (const StepResult& s : d.steps) {
      for (const KvEvent& e : s.kv_events) {
        if (auto* r = std::get_if<BlockRemoved>(&e)) {
          out.insert(out.end(), r->block_hashes.begin(), r->block_hashes.end());
        }
      }
    }
    return out;
  };
  auto stored_hashes = [&](size_t step_from) {
    std::vector<EngineBlockHash> out;
    for (size_t i = step_from; i < d.steps.size(); ++i) {
      for (const KvEvent& e : d.steps[i].kv_events) {
        if (auto* s = std::get_if<BlockStored>(&e)) {
          out.insert(out.end(), s->block_hashes.begin(), s->block_hashes.end());
        }
      }
    }
    return out;
  };
  run(1, 8, 100);  // A: 2 blocks
  const auto a = stored_hashes(0);
  size_t mark = d.steps.size();
  run(2, 8, 200);  // B
  const auto b = stored_hashes(mark);
  mark = d.steps.size();
  run(3, 8, 300);  // C
  const auto c = stored_hashes(mark);
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_TRUE(removed().empty());

  run(4, 8, 200);  // B again: its first block is a hit and becomes most recently used
  EXPECT_EQ(engine.metrics().prefix_cache_hits, 4u);
  EXPECT_TRUE(removed().empty());

  run(5, 16, 400);  // D: 4 blocks; 2 never-cached ones, then A (tail first)
  EXPECT_EQ(removed(), (std::vector<EngineBlockHash>{a[1], a[0]}));
  EXPECT_EQ(engine.cached_prefix_tokens(tokens(8, 100)), 0u);

  run(6, 16, 500);  // E: then B's second block, C (tail first), B's touched first block
  EXPECT_EQ(removed(), (std::vector<EngineBlockHash>{a[1], a[0], b[1], c[1], c[0], b[0]}));
}

TEST(EngineModelTest, PreemptsTheLatestRequestWhenBlocksRunOutAndRecomputesIt) {
  // 10 blocks of 4 tokens; each request grows to 8 + 19 = 27 tokens (7 blocks).
  EngineModel engine(config_with(4), simple_profile(10, 4));
  Driver d(engine);
  ASSERT_TRUE(engine.add(request(1, tokens(8, 100), 20), 0).ok());
  ASSERT_TRUE(engine.add(request(2, tokens(8, 200), 20), 0).ok());
  d.run_until_idle();
  std::vector<RequestId> preempted;
  for (const StepResult& s : d.steps) {
    preempted.insert(preempted.end(), s.preempted.begin(), s.preempted.end());
  }
  ASSERT_FALSE(preempted.empty());
  EXPECT_EQ(preempted.front(), 2u);
  EXPECT_EQ(engine.metrics().num_preemptions, preempted.size());
  // Both complete with exactly their tokens, none lost or repeated.
  EXPECT_EQ(d.tokens.at(1).size(), 20u);
  EXPECT_EQ(d.tokens.at(2).size(), 20u);
  EXPECT_LT(d.finished_at.at(1), d.finished_at.at(2));
  EXPECT_EQ(engine.metrics().requests_finished, 2u);
  EXPECT_EQ(engine.metrics().generation_tokens, 40u);
  EXPECT_DOUBLE_EQ(engine.metrics().kv_cache_usage, 0.0);
}

TEST(EngineModelTest, PreemptedRequestResumesWithTheSameOutput) {
  EngineRequest r = request(2, tokens(8, 200), 20);
  r.output_tokens = tokens(20, 7000);
  EngineModel engine(config_with(4), simple_profile(10, 4));
  Driver d(engine);
  ASSERT_TRUE(engine.add(request(1, tokens(8, 100), 20), 0).ok());
  ASSERT_TRUE(engine.add(r, 0).ok());
  d.run_until_idle();
  EXPECT_EQ(d.tokens.at(2), tokens(20, 7000));
  EXPECT_GT(engine.metrics().num_preemptions, 0u);
}

TEST(EngineModelTest, ChunksLongPromptsAndSchedulesDecodesFirst) {
  EngineModel engine(config_with(16, /*budget=*/100), simple_profile(1000));
  Driver d(engine);
  ASSERT_TRUE(engine.add(request(1, tokens(10, 1), 50), 0).ok());
  ASSERT_TRUE(d.step_once());  // request 1 prefilled, first token
  ASSERT_EQ(d.last.updates.size(), 1u);
  ASSERT_TRUE(engine.add(request(2, tokens(250, 5000), 2), d.now).ok());
  // Request 1 decodes one token per step; request 2 gets the other 99 of the budget.
  std::vector<uint64_t> prefill;
  while (d.tokens.count(2) == 0) {
    ASSERT_TRUE(d.step_once());
    EXPECT_EQ(d.last.decode_seqs, 1u);
    prefill.push_back(d.last.prefill_tokens);
    EXPECT_EQ(d.last.updates.front().id, 1u);  // decode first, in running order
  }
  EXPECT_EQ(prefill, (std::vector<uint64_t>{99, 99, 52}));
  d.run_until_idle();
  EXPECT_EQ(d.tokens.at(1).size(), 50u);
  EXPECT_EQ(d.tokens.at(2).size(), 2u);
}

TEST(EngineModelTest, ChunkedPrefillTtftIsTheSumOfChunkSteps) {
  const Profile p = simple_profile(2000);
  EngineModel engine(config_with(16, 8192), p);
  Driver d(engine);
  ASSERT_TRUE(engine.add(request(1, tokens(20000), 1), 0).ok());
  d.run_until_idle();
  ASSERT_EQ(d.steps.size(), 3u);
  EXPECT_EQ(d.steps[0].prefill_tokens, 8192u);
  EXPECT_EQ(d.steps[1].prefill_tokens, 8192u);
  EXPECT_EQ(d.steps[2].prefill_tokens, 3616u);
  EXPECT_TRUE(d.steps[0].updates.empty());
  EXPECT_EQ(d.ttft.at(1), p.step_time(prefill_shape(0, 8192)) +
                              p.step_time(prefill_shape(8192, 8192)) +
                              p.step_time(prefill_shape(16384, 3616)));
}

TEST(EngineModelTest, PriorityOrderThenArrivalOrder) {
  EngineModel engine(config_with(16, 8192, /*max_seqs=*/1), simple_profile(1000));
  Driver d(engine);
  ASSERT_TRUE(engine.add(request(1, tokens(20, 100), 3), 0).ok());
  ASSERT_TRUE(d.step_once());
  ASSERT_TRUE(engine.add(request(2, tokens(20, 200), 3, /*priority=*/5), d.now).ok());
  ASSERT_TRUE(engine.add(request(3, tokens(20, 300), 3, /*priority=*/-1), d.now).ok());
  ASSERT_TRUE(engine.add(request(4, tokens(20, 400), 3, /*priority=*/5), d.now).ok());
  ASSERT_TRUE(engine.add(request(5, tokens(20, 500), 3, /*priority=*/0), d.now).ok());
  EXPECT_EQ(engine.metrics().num_requests_waiting + engine.metrics().num_requests_arriving, 4u);
  d.run_until_idle();
  std::vector<RequestId> order;
  for (const StepResult& s : d.steps) {
    for (const RequestUpdate& u : s.updates) {
      if (u.output_index == 0) order.push_back(u.id);
    }
  }
  EXPECT_EQ(order, (std::vector<RequestId>{1, 3, 5, 2, 4}));
}

TEST(EngineModelTest, RunningBatchIsBoundedByMaxNumSeqs) {
  EngineModel engine(config_with(16, 8192, /*max_seqs=*/3), simple_profile(1000));
  Driver d(engine);
  for (RequestId id = 1; id <= 5; ++id) {
    ASSERT_TRUE(engine.add(request(id, tokens(10, id * 100), 4), 0).ok());
  }
  ASSERT_TRUE(d.step_once());
  EXPECT_EQ(d.last.scheduled_seqs, 3u);
  EXPECT_EQ(engine.metrics().num_requests_running, 3u);
  EXPECT_EQ(engine.metrics().num_requests_waiting, 2u);
  d.run_until_idle();
  EXPECT_EQ(engine.metrics().requests_finished, 5u);
}

// Every BlockStored names a parent already stored (or none for a first block) and new
// hashes; every BlockRemoved names stored hashes; in the end the events describe
// exactly what the pool caches.
TEST(EngineModelTest, KvEventsAreConsistentUnderLoad) {
  EngineModel engine(config_with(16, 512, 16), simple_profile(120));
  Driver d(engine);
  Rng rng(3);
  std::set<EngineBlockHash> stored;
  size_t n_stored = 0, n_removed = 0;
  RequestId next_id = 1;
  for (int round = 0; round < 400; ++round) {
    if (rng.below(2) == 0) {
      // Shared system prompts (8 of them) followed by a unique tail.
      std::vector<kv::TokenId> prompt = tokens(64 + 16 * rng.below(4), 10000 * rng.below(8));
      std::vector<kv::TokenId> tail = tokens(1 + rng.below(100), 1'000'000 + round * 1000);
      prompt.insert(prompt.end(), tail.begin(), tail.end());
      ASSERT_TRUE(engine.add(request(next_id++, prompt, 1 + rng.below(40)), d.now).ok());
    }
    if (!d.step_once()) d.now += kMillisecond;
  }
  d.run_until_idle();
  for (const StepResult& step : d.steps) {
    for (const KvEvent& e : step.kv_events) {
      if (const auto* s = std::get_if<BlockStored>(&e)) {
        ++n_stored;
        ASSERT_FALSE(s->block_hashes.empty());
        EXPECT_EQ(s->token_ids.size(), s->block_hashes.size() * 16);
        EXPECT_EQ(s->block_size, 16u);
        EXPECT_EQ(s->medium, "GPU");
        if (s->parent_block_hash) {
          EXPECT_TRUE(stored.count(*s->parent_block_hash));
        }
        for (EngineBlockHash h : s->block_hashes) EXPECT_TRUE(stored.insert(h).second);
      } else if (const auto* r = std::get_if<BlockRemoved>(&e)) {
        ++n_removed;
        for (EngineBlockHash h : r->block_hashes) EXPECT_EQ(stored.erase(h), 1u);
      }
    }
  }
  EXPECT_GT(n_stored, 50u);
  EXPECT_GT(n_removed, 10u);
  EXPECT_EQ(stored.size(), engine.pool().num_cached());
  EXPECT_GT(engine.metrics().prefix_cache_hits, 0u);
}

TEST(EngineModelTest, StoredEventsCarryChainedEngineHashesNotRouterKeys) {
  EngineModel engine(config_with(16), simple_profile(100));
  Driver d(engine);
  EngineRequest r = request(1, tokens(40), 1);
  r.lora_id = 3;
  r.lora_name = "adapter";
  ASSERT_TRUE(engine.add(r, 0).ok());
  d.run_until_idle();
  ASSERT_EQ(d.steps[0].kv_events.size(), 1u);
  const auto& s = std::get<BlockStored>(d.steps[0].kv_events[0]);
  ASSERT_EQ(s.block_hashes.size(), 2u);
  EXPECT_FALSE(s.parent_block_hash.has_value());
  EXPECT_EQ(s.token_ids, tokens(32));
  EXPECT_EQ(s.lora_id, 3);
  EXPECT_EQ(s.lora_name, "adapter");
  EXPECT_EQ(
      s.block_hashes[1],
      kv::hash_block(s.block_hashes[0], std::span<const kv::TokenId>(tokens(32)).subspan(16)));
  std::vector<kv::BlockKey> router;
  kv::hash_blocks(tokens(40), 16, kv::block_seed("m", "adapter", ""), router);
  EXPECT_NE(router[0], s.block_hashes[0]);

  // Another engine (another process seed) names the same block differently.
  EngineConfig other = config_with(16);
  other.hash_seed = 12345;
  EngineModel engine2(other, simple_profile(100));
  Driver d2(engine2);
  ASSERT_TRUE(engine2.add(r, 0).ok());
  d2.run_until_idle();
  EXPECT_NE(std::get<BlockStored>(d2.steps[0].kv_events[0]).block_hashes[0], s.block_hashes[0]);
}

TEST(EngineModelTest, CacheSaltSeparatesPrefixesAndRidesOnTheChainsFirstEvent) {
  EngineModel engine(config_with(16), simple_profile(100));
  Driver d(engine);
  EngineRequest a = request(1, tokens(40), 20);
  a.cache_salt = "tenant-a";
  ASSERT_TRUE(engine.add(a, 0).ok());
  d.run_until_idle();
  // The prompt's chain starts at the root: its event carries the salt; the block of
  // generated tokens chained to it later does not (it inherits it through its parent).
  std::vector<BlockStored> events;
  for (const StepResult& st : d.steps) {
    for (const KvEvent& e : st.kv_events) events.push_back(std::get<BlockStored>(e));
  }
  ASSERT_GE(events.size(), 2u);
  EXPECT_FALSE(events[0].parent_block_hash.has_value());
  EXPECT_EQ(events[0].cache_salt, "tenant-a");
  EXPECT_TRUE(events[1].parent_block_hash.has_value());
  EXPECT_FALSE(events[1].cache_salt.has_value());

  EXPECT_EQ(engine.cached_prefix_tokens(tokens(40), std::nullopt, {}, "tenant-a"), 32u);
  EXPECT_EQ(engine.cached_prefix_tokens(tokens(40), std::nullopt, {}, "tenant-b"), 0u);
  EXPECT_EQ(engine.cached_prefix_tokens(tokens(40)), 0u);
  EngineRequest b = request(2, tokens(40), 1);
  b.cache_salt = "tenant-b";
  ASSERT_TRUE(engine.add(b, d.now).ok());
  d.run_until_idle();
  EXPECT_EQ(d.steps.back().updates[0].cached_tokens, 0u);
  EngineRequest again = request(3, tokens(40), 1);
  again.cache_salt = "tenant-a";
  ASSERT_TRUE(engine.add(again, d.now).ok());
  d.run_until_idle();
  EXPECT_EQ(d.steps.back().updates[0].cached_tokens, 32u);
}

TEST(EngineModelTest, GeneratedTokensFillBlocksThatAreStoredWithTheirParent) {
  EngineModel engine(config_with(16), simple_profile(100));
  Driver d(engine);
  ASSERT_TRUE(engine.add(request(1, tokens(16), 20), 0).ok());
  d.run_until_idle();
  std::vector<BlockStored> events;
  for (const StepResult& s : d.steps) {
    for (const KvEvent& e : s.kv_events) events.push_back(std::get<BlockStored>(e));
  }
  // Block 0 (the prompt) after the prefill; block 1 (16 generated tokens) once computed.
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].parent_block_hash, events[0].block_hashes[0]);
  std::vector<kv::TokenId> generated(d.tokens.at(1).begin(), d.tokens.at(1).begin() + 16);
  EXPECT_EQ(events[1].token_ids, generated);
}

TEST(EngineModelTest, AbortFreesBlocksAndReportsNothing) {
  EngineModel engine(config_with(16), simple_profile(100));
  Driver d(engine);
  ASSERT_TRUE(engine.add(request(1, tokens(100), 50), 0).ok());
  ASSERT_TRUE(engine.add(request(2, tokens(100, 9000), 50), 0).ok());
  ASSERT_TRUE(d.step_once());
  EXPECT_GT(engine.metrics().kv_cache_usage, 0.0);
  EXPECT_TRUE(engine.abort(1));
  EXPECT_FALSE(engine.abort(1));
  EXPECT_FALSE(engine.abort(77));
  d.run_until_idle();
  EXPECT_EQ(d.tokens.at(1).size(), 1u);
  EXPECT_EQ(d.tokens.at(2).size(), 50u);
  EXPECT_EQ(engine.metrics().requests_aborted, 1u);
  EXPECT_DOUBLE_EQ(engine.metrics().kv_cache_usage, 0.0);
  EXPECT_EQ(engine.num_requests(), 0u);

  // Aborting while still arriving (in preprocessing) and while waiting.
  Profile slow = simple_profile(100);
  slow.preprocess_s_per_prompt_token = 0.001;
  EngineModel e2(config_with(16, 8192, 1), slow);
  ASSERT_TRUE(e2.add(request(1, tokens(10), 5), 0).ok());
  EXPECT_EQ(e2.next_step_time(0), seconds(0.01));
  ASSERT_TRUE(e2.abort(1));
  EXPECT_FALSE(e2.next_step_time(0).has_value());
}

TEST(EngineModelTest, RejectsBadRequests) {
  EngineConfig c = config_with(16);
  c.max_model_len = 100;
  EngineModel engine(c, simple_profile(4));
  EXPECT_FALSE(engine.add(request(1, {}, 1), 0).ok());
  EXPECT_FALSE(engine.add(request(1, tokens(10), 0), 0).ok());
  Status too_long = engine.add(request(1, tokens(90), 20), 0);
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.error().find("maximum context length"), std::string::npos);
  EXPECT_FALSE(engine.add(request(1, tokens(60), 20), 0).ok());  // 5 blocks > 4
  ASSERT_TRUE(engine.add(request(1, tokens(10), 5), 0).ok());
  EXPECT_FALSE(engine.add(request(1, tokens(10), 5), 0).ok());  // duplicate id
  EXPECT_EQ(engine.num_requests(), 1u);
}

TEST(EngineModelTest, RequestsWaitForPreprocessingAndKvTransfer) {
  Profile p = simple_profile(1000);
  p.preprocess_s_per_prompt_token = 1e-5;
  EngineConfig c = config_with(16);
  c.role = Role::kDecode;
  EngineModel engine(c, p);
  Driver d(engine);
  EngineRequest r = request(1, tokens(1000), 3);
  r.remote_kv = true;
  r.kv_transfer_time = 5 * kMillisecond;
  ASSERT_TRUE(engine.add(r, 0).ok());
  EXPECT_FALSE(engine.has_work());
  EXPECT_EQ(engine.next_step_time(0), seconds(0.01) + 5 * kMillisecond);
  d.run_until_idle();
  // The 62 transferred blocks are not computed: only the last 8 tokens are.
  EXPECT_EQ(d.steps[0].prefill_tokens, 8u);
  EXPECT_EQ(d.steps[0].updates[0].cached_tokens, 992u);
  EXPECT_EQ(d.ttft.at(1), seconds(0.015) + p.step_time(prefill_shape(992, 8)));
  EXPECT_EQ(engine.metrics().prefix_cache_hits, 0u);  // transferred, not a cache hit
  EXPECT_EQ(d.tokens.at(1).size(), 3u);
}

TEST(EngineModelTest, PrefillRoleFinishesAtTheFirstToken) {
  EngineConfig c = config_with(16);
  c.role = Role::kPrefill;
  EngineModel engine(c, simple_profile(1000));
  Driver d(engine);
  ASSERT_TRUE(engine.add(request(1, tokens(100), 500), 0).ok());
  d.run_until_idle();
  ASSERT_EQ(d.tokens.at(1).size(), 1u);
  EXPECT_TRUE(d.steps.back().updates[0].finished);
}

TEST(EngineModelTest, PrefillForRemoteDecodeHoldsItsBlocksUntilReleased) {
  EngineConfig c = config_with(16);
  c.role = Role::kPrefill;
  EngineModel engine(c, simple_profile(100));
  Driver d(engine);
  EngineRequest r = request(1, tokens(100), 1);
  r.hold_kv_after_finish = true;
  ASSERT_TRUE(engine.add(r, 0).ok());
  d.run_until_idle();
  EXPECT_TRUE(d.steps.back().updates[0].finished);
  EXPECT_DOUBLE_EQ(engine.metrics().kv_cache_usage, 0.07);  // 7 of 100 blocks
  EXPECT_EQ(engine.num_requests(), 1u);
  EXPECT_FALSE(engine.has_work());
  EXPECT_FALSE(engine.release(2));
  EXPECT_TRUE(engine.release(1));
  EXPECT_FALSE(engine.release(1));
  EXPECT_DOUBLE_EQ(engine.metrics().kv_cache_usage, 0.0);
  EXPECT_EQ(engine.num_requests(), 0u);
  EXPECT_EQ(engine.cached_prefix_tokens(tokens(100)), 96u);  // still cached
}

TEST(EngineModelTest, MetricsHistogramsAndTimings) {
  EngineModel engine(config_with(16), simple_profile(1000));
  Driver d(engine);
  ASSERT_TRUE(engine.add(request(1, tokens(100), 10), 0).ok());
  ASSERT_TRUE(engine.add(request(2, tokens(100, 5000), 10), 0).ok());
  d.run_until_idle();
  const EngineMetrics& m = engine.metrics();
  EXPECT_EQ(m.time_to_first_token.count(), 2u);
  EXPECT_EQ(m.inter_token_latency.count(), 18u);
  EXPECT_EQ(m.e2e_request_latency.count(), 2u);
  EXPECT_EQ(m.request_queue_time.count(), 2u);
  EXPECT_EQ(m.time_to_first_token.cumulative(m.time_to_first_token.bounds().size()), 2u);
  EXPECT_EQ(m.generation_tokens, 20u);
  EXPECT_EQ(m.prompt_tokens, 200u);
  EXPECT_EQ(m.steps, d.steps.size());
  const RequestUpdate& last = d.steps.back().updates.back();
  EXPECT_TRUE(last.finished);
  EXPECT_EQ(last.e2e, d.now);
  EXPECT_EQ(last.queue_time, 0);
}

TEST(EngineModelTest, ResetPrefixCacheOnlyWhenIdle) {
  EngineModel engine(config_with(16), simple_profile(100));
  Driver d(engine);
  ASSERT_TRUE(engine.add(request(1, tokens(40), 3), 0).ok());
  ASSERT_TRUE(d.step_once());
  std::vector<KvEvent> events;
  EXPECT_FALSE(engine.reset_prefix_cache(events));
  d.run_until_idle();
  EXPECT_GT(engine.cached_prefix_tokens(tokens(40)), 0u);
  EXPECT_TRUE(engine.reset_prefix_cache(events));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<AllBlocksCleared>(events[0]));
  EXPECT_EQ(engine.cached_prefix_tokens(tokens(40)), 0u);
}

}  // namespace
}  // namespace kvgate::engine
