// EngineModel under random load, aborts and tight memory: its invariants hold.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "core/common/rng.h"
#include "core/engine/engine_model.h"
#include "engine_test_support.h"

namespace kvgate::engine {
namespace {

using testing::request;
using testing::simple_profile;
using testing::tokens;

struct Params {
  uint64_t seed;
  uint32_t blocks;
  uint32_t budget;
  uint32_t max_seqs;
  bool caching;
};

class EngineModelRandomTest : public ::testing::TestWithParam<Params> {};

TEST_P(EngineModelRandomTest, EveryRequestGetsExactlyItsTokensWithinTheLimits) {
  const Params& p = GetParam();
  EngineConfig c;
  c.block_size = 16;
  c.max_num_batched_tokens = p.budget;
  c.max_num_seqs = p.max_seqs;
  c.enable_prefix_caching = p.caching;
  Profile profile = simple_profile(p.blocks);
  profile.preprocess_s_per_prompt_token = 1e-6;
  EngineModel engine(c, profile);
  Rng rng(p.seed);

  std::map<RequestId, uint32_t> expected;  // live request -> max_tokens
  std::map<RequestId, uint32_t> received;
  std::set<RequestId> aborted;
  RequestId next_id = 1;
  Nanos now = 0;
  StepResult r;
  uint64_t preemptions = 0;
  for (int round = 0; round < 3000; ++round) {
    const uint64_t dice = rng.below(10);
    if (dice < 4) {
      std::vector<kv::TokenId> prompt = tokens(16 * rng.below(6), 100000 * rng.below(5));
      std::vector<kv::TokenId> tail = tokens(1 + rng.below(200), 10'000'000 + next_id * 1000);
      prompt.insert(prompt.end(), tail.begin(), tail.end());
      EngineRequest req =
          request(next_id, prompt, 1 + rng.below(60), static_cast<int32_t>(rng.below(3)));
      const uint32_t max_tokens = req.max_tokens;
      if (engine.add(std::move(req), now).ok()) expected[next_id] = max_tokens;
      ++next_id;
    } else if (dice == 4 && !expected.empty()) {
      auto it = expected.begin();
      std::advance(it, static_cast<long>(rng.below(expected.size())));
      ASSERT_TRUE(engine.abort(it->first));
      aborted.insert(it->first);
      expected.erase(it);
    }
    std::optional<Nanos> t = engine.next_step_time(now);
    if (!t) {
      now += kMillisecond;
      continue;
    }
    ASSERT_GE(*t, now);
    now = *t;
    engine.step(now, r);
    ASSERT_GE(r.duration, 0);
    ASSERT_LE(r.prefill_tokens + r.decode_seqs, p.budget);
    ASSERT_LE(r.scheduled_seqs, p.max_seqs);
    ASSERT_EQ(r.duration == 0, r.scheduled_seqs == 0);
    preemptions += r.preempted.size();
    for (const RequestUpdate& u : r.updates) {
      ASSERT_FALSE(aborted.count(u.id));
      ASSERT_TRUE(expected.count(u.id));
      ASSERT_EQ(u.output_index, received[u.id]);
      ++received[u.id];
      if (u.finished) {
        ASSERT_EQ(received[u.id], expected[u.id]);
        expected.erase(u.id);
      }
    }
    now = r.end();
    const EngineMetrics& m = engine.metrics();
    ASSERT_LE(m.kv_cache_usage, 1.0);
    ASSERT_LE(m.num_requests_running, p.max_seqs);
  }
  // Drain.
  for (int i = 0; i < 100000; ++i) {
    std::optional<Nanos> t = engine.next_step_time(now);
    if (!t) break;
    now = *t;
    engine.step(now, r);
    preemptions += r.preempted.size();
    for (const RequestUpdate& u : r.updates) {
      ASSERT_EQ(u.output_index, received[u.id]);
      ++received[u.id];
      if (u.finished) {
        ASSERT_EQ(received[u.id], expected[u.id]);
        expected.erase(u.id);
      }
    }
    now = r.end();
  }
  EXPECT_TRUE(expected.empty()) << expected.size() << " requests never finished";
  EXPECT_EQ(engine.num_requests(), 0u);
  EXPECT_DOUBLE_EQ(engine.metrics().kv_cache_usage, 0.0);
  EXPECT_EQ(engine.pool().num_free(), engine.pool().num_blocks());
  EXPECT_EQ(engine.metrics().num_preemptions, preemptions);
  if (p.blocks <= 100) {
    EXPECT_GT(preemptions, 0u);  // tight memory does preempt
  }
}

INSTANTIATE_TEST_SUITE_P(Loads, EngineModelRandomTest,
                         ::testing::Values(Params{1, 2000, 8192, 256, true},
                                           Params{2, 80, 256, 32, true},
                                           Params{3, 120, 64, 8, true},
                                           Params{4, 100, 512, 64, false}));

}  // namespace
}  // namespace kvgate::engine
