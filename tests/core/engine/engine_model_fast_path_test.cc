// The simulator's fast paths change nothing: an engine that reports only first and last
// tokens (EngineConfig::report_decode_tokens = false, as `kvgate sim` runs it) steps
// exactly like one that reports every token, and FastMod is exactly `%`.
#include <gtest/gtest.h>

#include <limits>

#include "core/common/fast_mod.h"
#include "core/common/rng.h"
#include "core/engine/engine_model.h"
#include "engine_test_support.h"

namespace kvgate::engine {
namespace {

using testing::request;
using testing::simple_profile;
using testing::tokens;

TEST(FastMod, EqualsTheRemainderForEveryKindOfDivisor) {
  Rng rng(11);
  for (uint32_t d :
       {1u, 2u, 3u, 7u, 10u, 151643u, 1u << 31, std::numeric_limits<uint32_t>::max()}) {
    FastMod m(d);
    for (uint64_t a : {uint64_t{0}, uint64_t{1}, uint64_t{d} - 1, uint64_t{d},
                       std::numeric_limits<uint64_t>::max()}) {
      EXPECT_EQ(m.mod(a), a % d) << a << " % " << d;
    }
    for (int i = 0; i < 20000; ++i) {
      const uint64_t a = rng.next();
      ASSERT_EQ(m.mod(a), a % d) << a << " % " << d;
    }
  }
}

bool reported_by_simulator(const RequestUpdate& u) { return u.output_index == 0 || u.finished; }

void expect_same_histogram(const Histogram& a, const Histogram& b) {
  EXPECT_EQ(a.counts(), b.counts());
  EXPECT_EQ(a.count(), b.count());
  EXPECT_DOUBLE_EQ(a.sum(), b.sum());
}

// Random arrivals with shared prefixes, tight KV (preemptions) and chunked prefill, fed
// identically to both engines; every step must match.
TEST(EngineModelFastPath, ReportingOnlyFirstAndLastTokensStepsIdentically) {
  EngineConfig full;
  full.block_size = 16;
  full.max_num_batched_tokens = 256;
  full.max_num_seqs = 12;
  full.vocab_size = 151643;
  EngineConfig lean = full;
  lean.report_decode_tokens = false;
  Profile profile = simple_profile(90);
  profile.preprocess_s_per_prompt_token = 1e-6;
  profile.decode_s_per_ctx_token = 1e-8;
  EngineModel a(full, profile), b(lean, profile);

  Rng rng(5);
  Nanos now = 0;
  StepResult ra, rb;
  RequestId next_id = 1;
  uint64_t skipped = 0, preempted = 0;
  for (int round = 0; round < 4000; ++round) {
    if (rng.below(3) == 0) {
      std::vector<kv::TokenId> prompt = tokens(16 * rng.below(8), 100000 * rng.below(4));
      std::vector<kv::TokenId> tail = tokens(1 + rng.below(120), 10'000'000 + next_id * 1000);
      prompt.insert(prompt.end(), tail.begin(), tail.end());
      const uint32_t max_tokens = 1 + static_cast<uint32_t>(rng.below(150));
      const bool ok_a = a.add(request(next_id, prompt, max_tokens), now).ok();
      const bool ok_b = b.add(request(next_id, prompt, max_tokens), now).ok();
      ASSERT_EQ(ok_a, ok_b);
      ++next_id;
    }
    if (!testing::step_both(a, b, now, ra, rb)) {
      if (::testing::Test::HasFailure()) return;
      now += 5 * kMillisecond;
      continue;
    }
    testing::expect_same_step_shape(ra, rb);
    if (::testing::Test::HasFatalFailure()) return;
    preempted += ra.preempted.size();
    size_t j = 0;
    for (const RequestUpdate& u : ra.updates) {
      if (!reported_by_simulator(u)) {
        ++skipped;
        continue;
      }
      ASSERT_LT(j, rb.updates.size());
      testing::expect_same_update(u, rb.updates[j++]);
    }
    EXPECT_EQ(j, rb.updates.size());
    now = ra.end();
  }
  EXPECT_GT(skipped, 1000u);  // the lean engine really left updates out
  EXPECT_GT(preempted, 0u);   // and the memory was tight enough to preempt

  const EngineMetrics &ma = a.metrics(), &mb = b.metrics();
  EXPECT_EQ(ma.generation_tokens, mb.generation_tokens);
  EXPECT_EQ(ma.prefix_cache_hits, mb.prefix_cache_hits);
  EXPECT_EQ(ma.requests_finished, mb.requests_finished);
  EXPECT_EQ(ma.num_preemptions, mb.num_preemptions);
  EXPECT_EQ(ma.num_requests_running, mb.num_requests_running);
  EXPECT_EQ(ma.kv_cache_usage, mb.kv_cache_usage);
  expect_same_histogram(ma.inter_token_latency, mb.inter_token_latency);
  expect_same_histogram(ma.time_to_first_token, mb.time_to_first_token);
  expect_same_histogram(ma.e2e_request_latency, mb.e2e_request_latency);
}

}  // namespace
}  // namespace kvgate::engine
