// A prompt shared with the engine (EngineRequest::shared_prompt), with or without the
// engine's own hashes of it (EngineModel::hash_prompt, as the simulator resends
// prompts), steps exactly like a prompt handed over as a copy; hashes made by another
// engine or for another LoRA are ignored, never trusted. Event vectors handed back with
// StepResult::recycle change no event.
#include <gtest/gtest.h>

#include <memory>

#include "core/common/rng.h"
#include "core/engine/engine_model.h"
#include "engine_test_support.h"

namespace kvgate::engine {
namespace {

using testing::request;
using testing::simple_profile;
using testing::tokens;

void expect_same_step(const StepResult& a, const StepResult& b) {
  testing::expect_same_step_shape(a, b);
  if (::testing::Test::HasFatalFailure()) return;
  ASSERT_EQ(a.updates.size(), b.updates.size());
  for (size_t i = 0; i < a.updates.size(); ++i) {
    testing::expect_same_update(a.updates[i], b.updates[i]);
  }
}

// How engine `b` receives the prompts.
enum class Mode {
  kShared,             // shared_prompt, no hashes
  kSharedHashed,       // shared_prompt + its own hash_prompt
  kForeignHashes,      // shared_prompt + hashes made by an engine with another seed
  kWrongLora,          // shared_prompt + hashes made without the request's LoRA
  kHashesOfOtherCopy,  // hashes of an equal prompt in another object
};

void run_side_by_side(Mode mode) {
  EngineConfig config;
  config.block_size = 16;
  config.max_num_batched_tokens = 256;
  config.max_num_seqs = 12;
  config.vocab_size = 151643;
  config.hash_seed = 77;
  Profile profile = simple_profile(40);  // tight: requests get preempted
  profile.preprocess_s_per_prompt_token = 1e-6;
  EngineModel a(config, profile), b(config, profile);
  EngineConfig other_seed = config;
  other_seed.hash_seed = 78;
  EngineModel foreign(other_seed, profile);

  // A few prompts resent many times, with lengths that are not block multiples (the
  // block across a prompt's end holds prompt and output tokens).
  Rng rng(9);
  std::vector<SharedPrompt> prompts;
  std::vector<std::shared_ptr<const PromptHashes>> hashes;
  for (uint32_t p = 0; p < 12; ++p) {
    std::vector<kv::TokenId> t = tokens(16 * (p % 4), 100000 * (p % 3));
    std::vector<kv::TokenId> tail = tokens(1 + rng.below(70), 10'000'000 + p * 1000);
    t.insert(t.end(), tail.begin(), tail.end());
    prompts.push_back(std::make_shared<const std::vector<kv::TokenId>>(std::move(t)));
    switch (mode) {
      case Mode::kShared:
        hashes.push_back(nullptr);
        break;
      case Mode::kSharedHashed:
      case Mode::kWrongLora:
        hashes.push_back(b.hash_prompt(prompts.back()));
        break;
      case Mode::kForeignHashes:
        hashes.push_back(foreign.hash_prompt(prompts.back()));
        break;
      case Mode::kHashesOfOtherCopy:
        hashes.push_back(
            b.hash_prompt(std::make_shared<const std::vector<kv::TokenId>>(*prompts.back())));
        break;
    }
  }

  Nanos now = 0;
  StepResult ra, rb;
  RequestId next_id = 1;
  uint64_t preempted = 0, stored = 0;
  for (int round = 0; round < 3000; ++round) {
    if (rng.below(3) == 0) {
      const size_t p = rng.below(prompts.size());
      const uint32_t max_tokens = 1 + static_cast<uint32_t>(rng.below(200));
      EngineRequest copy = request(next_id, *prompts[p], max_tokens);
      EngineRequest shared;
      shared.id = next_id;
      shared.max_tokens = max_tokens;
      shared.shared_prompt = prompts[p];
      shared.prompt_hashes = hashes[p];
      if (next_id % 5 == 0) {  // some given output tokens
        copy.output_tokens = shared.output_tokens = tokens(1 + rng.below(40), 555);
      }
      if (mode == Mode::kWrongLora && next_id % 2 == 0) copy.lora_id = shared.lora_id = 3;
      const bool ok_a = a.add(std::move(copy), now).ok();
      const bool ok_b = b.add(std::move(shared), now).ok();
      ASSERT_EQ(ok_a, ok_b);
      ++next_id;
    }
    if (!testing::step_both(a, b, now, ra, rb)) {
      if (::testing::Test::HasFailure()) return;
      now += 5 * kMillisecond;
      continue;
    }
    expect_same_step(ra, rb);
    if (::testing::Test::HasFatalFailure()) return;
    preempted += ra.preempted.size();
    for (const KvEvent& e : ra.kv_events) stored += std::holds_alternative<BlockStored>(e);
    // As the simulator does: b's next events are written into these vectors.
    rb.recycle(rb.kv_events);
    now = ra.end();
  }
  EXPECT_GT(preempted, 0u);  // tight memory: recomputed prompts too
  EXPECT_GT(stored, 100u);
  EXPECT_FALSE(rb.spare_tokens.empty());
  EXPECT_EQ(a.metrics().prefix_cache_hits, b.metrics().prefix_cache_hits);
  EXPECT_EQ(a.metrics().generation_tokens, b.metrics().generation_tokens);
  EXPECT_GT(a.metrics().prefix_cache_hits, 0u);
}

TEST(EngineSharedPrompt, SharedPromptStepsLikeACopy) { run_side_by_side(Mode::kShared); }
TEST(EngineSharedPrompt, OwnHashesStepLikeHashingAgain) { run_side_by_side(Mode::kSharedHashed); }
TEST(EngineSharedPrompt, HashesOfAnotherEngineAreIgnored) {
  run_side_by_side(Mode::kForeignHashes);
}
TEST(EngineSharedPrompt, HashesForAnotherLoraAreIgnored) { run_side_by_side(Mode::kWrongLora); }
TEST(EngineSharedPrompt, HashesOfAnotherPromptObjectAreIgnored) {
  run_side_by_side(Mode::kHashesOfOtherCopy);
}

TEST(EngineSharedPrompt, HashPromptMatchesTheCachedPrefixWalk) {
  EngineConfig config;
  config.block_size = 16;
  config.hash_seed = 5;
  EngineModel m(config, simple_profile(64));
  auto prompt = std::make_shared<const std::vector<kv::TokenId>>(tokens(16 * 3 + 7));
  auto h = m.hash_prompt(prompt);
  ASSERT_EQ(h->hashes().size(), 3u);
  EXPECT_EQ(h->prompt(), prompt);
  // Run it once: its three full blocks are cached under exactly these hashes.
  EngineRequest r;
  r.id = 1;
  r.shared_prompt = prompt;
  r.prompt_hashes = h;
  r.max_tokens = 1;
  ASSERT_TRUE(m.add(std::move(r), 0).ok());
  testing::Driver d(m);
  d.run_until_idle();
  for (EngineBlockHash x : h->hashes()) EXPECT_NE(m.pool().lookup(x), kNoBlock);
  EXPECT_EQ(m.cached_prefix_tokens(*prompt), 48u);
}

TEST(EngineSharedPrompt, EmptyPromptsAreRefused) {
  EngineModel m(EngineConfig{}, simple_profile(64));
  EngineRequest none;
  none.id = 1;
  EXPECT_FALSE(m.add(none, 0).ok());
  EngineRequest empty;
  empty.id = 2;
  empty.shared_prompt = std::make_shared<const std::vector<kv::TokenId>>();
  EXPECT_FALSE(m.add(empty, 0).ok());
  EXPECT_EQ(m.num_requests(), 0u);
}

}  // namespace
}  // namespace kvgate::engine
