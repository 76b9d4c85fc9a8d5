// Every built-in policy and scorer, on hand-built candidates.
#include <gtest/gtest.h>

#include <map>

#include "core/engine/profile.h"
#include "core/route/builtins.h"
#include "core/route/registry.h"

namespace kvgate::route {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace policies_test {

constexpr uint32_t kBs = 16;

class PoliciesTest : public ::testing::Test {
 protected:
  Registry registry_ = Registry::with_builtins();
  RouterConfig config_;
  EndpointPool pool_{kBs};
  std::vector<Endpoint> endpoints_;
  std::vector<kv::BlockKey> keys_;
  RouteRequest request_;
  Rng rng_{1};

  void SetUp() override { config_.block_size = kBs; }

  // n endpoints with the given in-flight counts.
  void set_endpoints(std::vector<uint32_t> in_flight) {
    endpoints_.clear();
    for (size_t i = 0; i < in_flight.size(); ++i) {
      Endpoint e;
      e.id = static_cast<EndpointId>(i);
      e.load.in_flight = in_flight[i];
      endpoints_.push_back(e);
    }
  }
  std::vector<Candidate> candidates() {
    std::vector<Candidate> c;
    for (const Endpoint& e : endpoints_) {
      c.push_back({.endpoint = &e, .load = effective_load(e, 0, config_.saturation)});
    }
    return c;
  }
  void set_prompt(uint32_t blocks) {
    keys_.resize(blocks);
    for (uint32_t i = 0; i < blocks; ++i) keys_[i] = 1000 + i;
    request_.keys = keys_;
    request_.prompt_tokens = blocks * kBs;
  }
  RouteContext context() {
    RouteContext ctx{request_, config_, pool_, 0};
    ctx.block_size = kBs;
    ctx.request_blocks =
        pool_.request_blocks(request_.prompt_tokens, request_.expected_output_tokens, keys_.size());
    return ctx;
  }
  std::unique_ptr<Policy> make_policy(PolicyConfig config) {
    auto p = registry_.make_policy(config);
    EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error());
    return p.ok() ? std::move(*p) : nullptr;
  }
  // How often each endpoint wins in n picks.
  std::map<EndpointId, int> histogram(Policy& p, int n) {
    std::map<EndpointId, int> h;
    for (int i = 0; i < n; ++i) {
      auto c = candidates();
      h[c[p.pick(context(), c, rng_)].endpoint->id]++;
    }
    return h;
  }
};

TEST_F(PoliciesTest, RegistryKnowsEveryBuiltin) {
  EXPECT_EQ(registry_.policy_names(),
            (std::vector<std::string>{"approx-prefix", "kv-cost", "least-request", "load",
                                      "power-of-two", "random", "round-robin", "scorers"}));
  EXPECT_EQ(registry_.filter_names(), (std::vector<std::string>{"healthy", "saturation"}));
  EXPECT_EQ(registry_.scorer_names(),
            (std::vector<std::string>{"kv-utilization", "prefix", "queue"}));
}

TEST_F(PoliciesTest, BadConfigIsAnErrorNotADefault) {
  EXPECT_FALSE(registry_.make_policy({"no-such-policy", {}}).ok());
  EXPECT_FALSE(registry_.make_policy({"kv-cost", {{"overlap_wieght", "2"}}}).ok());
  EXPECT_FALSE(registry_.make_policy({"kv-cost", {{"overlap_weight", "two"}}}).ok());
  EXPECT_FALSE(registry_.make_policy({"kv-cost", {{"overlap_weight", "-1"}}}).ok());
  EXPECT_FALSE(registry_.make_policy({"random", {{"x", "1"}}}).ok());
  EXPECT_FALSE(registry_.make_policy({"scorers", {{"nope", "1"}}}).ok());
  EXPECT_FALSE(registry_.make_policy({"load", {{"prefix", "1"}}}).ok());
  EXPECT_FALSE(registry_.make_policy({"approx-prefix", {{"cache_threshold", "1.5"}}}).ok());
  EXPECT_TRUE(registry_.make_policy({"kv-cost", {{"overlap_weight", "2.5"}}}).ok());
}

TEST_F(PoliciesTest, RandomCoversEveryEndpointEvenly) {
  set_endpoints({0, 0, 0, 0});
  auto p = make_policy({"random", {}});
  auto h = histogram(*p, 4000);
  ASSERT_EQ(h.size(), 4u);
  for (auto [id, n] : h) EXPECT_NEAR(n, 1000, 150) << id;
}

TEST_F(PoliciesTest, RoundRobinCycles) {
  set_endpoints({5, 0, 9});
  auto p = make_policy({"round-robin", {}});
  std::vector<EndpointId> got;
  for (int i = 0; i < 6; ++i) {
    auto c = candidates();
    got.push_back(c[p->pick(context(), c, rng_)].endpoint->id);
  }
  EXPECT_EQ(got, (std::vector<EndpointId>{0, 1, 2, 0, 1, 2}));
}

TEST_F(PoliciesTest, LeastRequestTakesFewestInFlightAndSplitsTies) {
  set_endpoints({3, 1, 1, 2});
  auto p = make_policy({"least-request", {}});
  auto h = histogram(*p, 2000);
  EXPECT_EQ(h.count(0), 0u);
  EXPECT_EQ(h.count(3), 0u);
  EXPECT_NEAR(h[1], 1000, 120);  // ties broken at random, not by order
  EXPECT_NEAR(h[2], 1000, 120);
}

TEST_F(PoliciesTest, PowerOfTwoNeverPicksTheWorst) {
  set_endpoints({0, 1, 2, 10});
  auto p = make_policy({"power-of-two", {}});
  auto h = histogram(*p, 3000);
  EXPECT_EQ(h.count(3), 0u);  // whichever pair contains 3, the other wins
  // P(0 wins) = P(0 drawn) = 1/2; P(1) = 1/3 (pairs 1-2, 1-3); P(2) = 1/6 (2-3).
  EXPECT_NEAR(h[0], 1500, 150);
  EXPECT_NEAR(h[1], 1000, 150);
  EXPECT_NEAR(h[2], 500, 120);
  set_endpoints({4});
  auto c = candidates();
  EXPECT_EQ(p->pick(context(), c, rng_), 0u);
}

TEST_F(PoliciesTest, LoadUsesQueueAndKvOnly) {
  set_endpoints({0, 0, 0});
  endpoints_[0].metrics = ScrapedMetrics{.waiting = 4, .kv_usage = 0.1};
  endpoints_[1].metrics = ScrapedMetrics{.waiting = 0, .kv_usage = 0.7};
  endpoints_[2].metrics = ScrapedMetrics{.waiting = 1, .kv_usage = 0.2};
  auto p = make_policy({"load", {}});
  EXPECT_FALSE(p->uses_overlap());
  auto c = candidates();
  // queue scores 0, 1, 0.75; kv scores 0.9, 0.3, 0.8 -> 0.9, 1.3, 1.55.
  EXPECT_EQ(p->pick(context(), c, rng_), 2u);
  EXPECT_DOUBLE_EQ(c[2].cost, -1.55);
  // Weighted to the queue only, the shortest queue wins.
  auto q = make_policy({"load", {{"queue", "1"}, {"kv-utilization", "0"}}});
  c = candidates();
  EXPECT_EQ(q->pick(context(), c, rng_), 1u);
}

TEST_F(PoliciesTest, ScorersWeighPrefixAgainstLoad) {
  set_prompt(10);
  set_endpoints({0, 0});
  endpoints_[0].metrics = ScrapedMetrics{.waiting = 3, .kv_usage = 0.5};
  endpoints_[1].metrics = ScrapedMetrics{.waiting = 0, .kv_usage = 0.1};
  auto p = make_policy({"scorers", {{"queue", "1"}, {"kv-utilization", "1"}, {"prefix", "3"}}});
  EXPECT_TRUE(p->uses_overlap());
  auto c = candidates();
  c[0].gpu_blocks = 10;  // all cached on the busier one: 0 + 0.5 + 3 = 3.5 vs 1 + 0.9
  EXPECT_EQ(p->pick(context(), c, rng_), 0u);
  c[0].gpu_blocks = 2;  // 0 + 0.5 + 0.6 = 1.1 vs 1.9
  EXPECT_EQ(p->pick(context(), c, rng_), 1u);
}

TEST_F(PoliciesTest, StaleEndpointScoresZeroOnLoad) {
  config_.saturation.metrics_max_age = kSecond;
  set_endpoints({0, 0});
  endpoints_[0].metrics = ScrapedMetrics{.waiting = 0, .scraped_at = -5 * kSecond};  // stale
  endpoints_[1].metrics = ScrapedMetrics{.waiting = 4, .kv_usage = 0.5};
  auto p = make_policy({"load", {}});
  auto c = candidates();
  ASSERT_TRUE(c[0].load.stale);
  EXPECT_EQ(p->pick(context(), c, rng_), 1u);
}

TEST_F(PoliciesTest, ApproxPrefixFollowsSglangRules) {
  set_prompt(10);
  auto p = make_policy({"approx-prefix",
                        {{"cache_threshold", "0.5"},
                         {"balance_abs_threshold", "4"},
                         {"balance_rel_threshold", "1.5"}}});
  // Balanced pool, best match 8/10 > 0.5: the best match, though busier.
  set_endpoints({3, 1, 2});
  auto c = candidates();
  c[0].gpu_blocks = 8;
  c[1].gpu_blocks = 2;
  EXPECT_EQ(p->pick(context(), c, rng_), 0u);
  // Best match 4/10 <= 0.5: the least loaded.
  c = candidates();
  c[0].gpu_blocks = 4;
  EXPECT_EQ(p->pick(context(), c, rng_), 1u);
  // Imbalanced (10 - 1 > 4 and 10 > 1.5 x 1): the least loaded despite a full match.
  set_endpoints({10, 1, 2});
  c = candidates();
  c[0].gpu_blocks = 10;
  EXPECT_EQ(p->pick(context(), c, rng_), 1u);
  // Only the absolute gap is large (100 vs 90: not 1.5x): not imbalanced.
  set_endpoints({100, 90, 95});
  c = candidates();
  c[0].gpu_blocks = 10;
  EXPECT_EQ(p->pick(context(), c, rng_), 0u);
  // Two equal best matches: the less loaded of them.
  set_endpoints({3, 2, 0});
  c = candidates();
  c[0].gpu_blocks = 9;
  c[1].gpu_blocks = 9;
  EXPECT_EQ(p->pick(context(), c, rng_), 1u);
}

// The seed's toy example: a 100-block prompt, A has 90 blocks cached but is busy
// (275 blocks in use), B none cached and nearly idle (10), C 50 cached and 135 in use.
// cost = w x prefill_blocks + decode_blocks; the request's own 100 blocks add the same
// to every decode term. Crossovers: B/C at w = 2.5, C/A at w = 3.5, B/A at w = 2.94.
TEST_F(PoliciesTest, SeedToyExampleWeightMovesTheWinner) {
  set_prompt(100);
  set_endpoints({0, 0, 0});
  endpoints_[0].load.active_decode_blocks = 275;  // A
  endpoints_[1].load.active_decode_blocks = 10;   // B
  endpoints_[2].load.active_decode_blocks = 135;  // C
  auto winner = [&](double w) {
    auto p = make_policy({"kv-cost", {{"overlap_weight", std::to_string(w)}}});
    auto c = candidates();
    c[0].gpu_blocks = 90;
    c[2].gpu_blocks = 50;
    return "ABC"[p->pick(context(), c, rng_)];
  };
  EXPECT_EQ(winner(0), 'B');
  EXPECT_EQ(winner(1), 'B');
  EXPECT_EQ(winner(2), 'B');
  EXPECT_EQ(winner(3), 'C');
  for (double w : {4.0, 5.0, 8.0, 20.0, 100.0}) EXPECT_EQ(winner(w), 'A') << w;
}

// Dynamo's documentation example (10-block prompt, weight 1): worker 1 caches 2 blocks
// with 10 decode blocks (cost 8 + 10 = 18), worker 2 caches 5 with 5 (10), worker 3
// caches 8 with 9 (2 + 9 = 11): worker 2 wins. The doc's decode figures include the
// request; here its blocks are already in flight on every worker (active_prefix = 10),
// so the decode term is exactly what each worker holds.
TEST_F(PoliciesTest, DynamoDocExample) {
  set_prompt(10);
  set_endpoints({0, 0, 0});
  endpoints_[0].load.active_decode_blocks = 10;
  endpoints_[1].load.active_decode_blocks = 5;
  endpoints_[2].load.active_decode_blocks = 9;
  auto p = make_policy({"kv-cost", {{"overlap_weight", "1"}}});
  auto c = candidates();
  c[0].gpu_blocks = 2;
  c[1].gpu_blocks = 5;
  c[2].gpu_blocks = 8;
  for (Candidate& x : c) x.active_prefix = 10;
  size_t i = p->pick(context(), c, rng_);
  EXPECT_DOUBLE_EQ(c[0].cost, 18);
  EXPECT_DOUBLE_EQ(c[1].cost, 10);
  EXPECT_DOUBLE_EQ(c[2].cost, 11);
  EXPECT_EQ(i, 1u);
}

TEST_F(PoliciesTest, KvCostCountsActivePrefillAndNewBlocks) {
  set_prompt(8);
  request_.expected_output_tokens = 32;  // 2 more blocks: 10 in all
  set_endpoints({0, 0});
  endpoints_[0].load.active_prefill_tokens = 64;  // 4 blocks of queued prefill
  auto p = make_policy({"kv-cost", {{"overlap_weight", "2"}}});
  auto c = candidates();
  c[1].active_prefix = 8;  // the prompt is already in flight there: only 2 new blocks
  p->pick(context(), c, rng_);
  EXPECT_DOUBLE_EQ(c[0].cost, 2 * (8 + 4) + 10);
  EXPECT_DOUBLE_EQ(c[1].cost, 2 * 8 + 2);
}

TEST_F(PoliciesTest, KvCostCpuBlockCredit) {
  set_prompt(10);
  set_endpoints({0});
  auto c = candidates();
  c[0].gpu_blocks = 2;
  c[0].cached_blocks = 6;
  make_policy({"kv-cost", {{"cpu_block_credit", "0"}}})->pick(context(), c, rng_);
  EXPECT_DOUBLE_EQ(c[0].cost, 8 + 10);  // GPU-only credit
  make_policy({"kv-cost", {{"cpu_block_credit", "0.5"}}})->pick(context(), c, rng_);
  EXPECT_DOUBLE_EQ(c[0].cost, 6 + 10);
  make_policy({"kv-cost", {}})->pick(context(), c, rng_);  // the engine model's credit
  EXPECT_NEAR(c[0].cost, 10 - (2 + builtin::kDefaultCpuBlockCredit * 4) + 10, 1e-9);
}

TEST_F(PoliciesTest, KvCostTierCreditPrefersAHostHitOverAMiss) {
  // A holds the prompt in host memory only, B nothing, equal load: tier-aware credit
  // sends the request to A; GPU-only credit sees a tie.
  set_prompt(10);
  set_endpoints({0, 0});
  auto c = candidates();
  c[0].cached_blocks = 9;
  auto tiered = make_policy({"kv-cost", {}});
  EXPECT_EQ(tiered->pick(context(), c, rng_), 0u);
  EXPECT_LT(c[0].cost, c[1].cost);
  auto gpu_only = make_policy({"kv-cost", {{"cpu_block_credit", "0"}}});
  gpu_only->pick(context(), c, rng_);
  EXPECT_DOUBLE_EQ(c[0].cost, c[1].cost);
}

TEST(KvCostDefaults, CpuBlockCreditIsTheEngineModelsReloadCredit) {
  for (std::string_view name : engine::builtin_profile_names()) {
    auto profile = engine::builtin_profile(name);
    ASSERT_TRUE(profile.ok()) << name;
    EXPECT_NEAR(builtin::kDefaultCpuBlockCredit, engine::host_block_credit(*profile, 16), 0.01)
        << name;
  }
}

TEST_F(PoliciesTest, KvCostDiskBlockCredit) {
  // 2 blocks in GPU memory, then 4 more of which 3 on disk only (1 in host memory).
  set_prompt(10);
  set_endpoints({0});
  auto c = candidates();
  c[0].gpu_blocks = 2;
  c[0].cached_blocks = 6;
  c[0].disk_blocks = 3;
  make_policy({"kv-cost", {{"cpu_block_credit", "1"}, {"disk_block_credit", "0"}}})
      ->pick(context(), c, rng_);
  EXPECT_DOUBLE_EQ(c[0].cost, (10 - 3) + 10);
  make_policy({"kv-cost", {{"cpu_block_credit", "0.5"}, {"disk_block_credit", "0.5"}}})
      ->pick(context(), c, rng_);
  EXPECT_DOUBLE_EQ(c[0].cost, 6 + 10);
  make_policy({"kv-cost", {}})->pick(context(), c, rng_);  // the engine model's credits
  EXPECT_NEAR(
      c[0].cost,
      10 - (2 + builtin::kDefaultCpuBlockCredit + builtin::kDefaultDiskBlockCredit * 3) + 10, 1e-9);
  // A disk count beyond the blocks past the GPU run is clamped to them.
  c[0].disk_blocks = 9;
  make_policy({"kv-cost", {{"disk_block_credit", "0"}}})->pick(context(), c, rng_);
  EXPECT_DOUBLE_EQ(c[0].cost, 8 + 10);
}

TEST_F(PoliciesTest, KvCostPrefersAHostHitOverADiskHit) {
  // A holds the prompt in host memory, B the same blocks on disk, equal load.
  set_prompt(10);
  set_endpoints({0, 0});
  auto c = candidates();
  c[0].cached_blocks = 9;
  c[1].cached_blocks = 9;
  c[1].disk_blocks = 9;
  EXPECT_EQ(make_policy({"kv-cost", {}})->pick(context(), c, rng_), 0u);
  EXPECT_LT(c[0].cost, c[1].cost);
}

TEST(KvCostDefaults, DiskBlockCreditIsWithinTheEngineModelsReloadCredits) {
  for (std::string_view name : engine::builtin_profile_names()) {
    auto profile = engine::builtin_profile(name);
    ASSERT_TRUE(profile.ok()) << name;
    EXPECT_NEAR(builtin::kDefaultDiskBlockCredit, engine::disk_block_credit(*profile, 16), 0.05)
        << name;
  }
}

TEST_F(PoliciesTest, KvCostTiesAreBrokenAtRandom) {
  set_prompt(4);
  set_endpoints({0, 0, 0, 0});  // identical: new endpoints, nothing cached
  auto p = make_policy({"kv-cost", {}});
  auto h = histogram(*p, 4000);
  ASSERT_EQ(h.size(), 4u);
  for (auto [id, n] : h) EXPECT_NEAR(n, 1000, 150) << id;
}

TEST_F(PoliciesTest, KvCostTemperatureSamplesSoftmaxOfNormalizedCosts) {
  set_prompt(10);
  set_endpoints({0, 0, 0});
  endpoints_[1].load.active_decode_blocks = 5;
  endpoints_[2].load.active_decode_blocks = 10;  // costs 20, 25, 30
  auto cold = make_policy({"kv-cost", {{"temperature", "0"}}});
  auto h0 = histogram(*cold, 500);
  EXPECT_EQ(h0[0], 500);
  auto warm = make_policy({"kv-cost", {{"temperature", "1"}}});
  auto h1 = histogram(*warm, 20000);
  // Normalized to 0, 0.5, 1: p ~ 1, e^-0.5, e^-1 = 0.506, 0.307, 0.186.
  EXPECT_NEAR(h1[0] / 20000.0, 0.506, 0.02);
  EXPECT_NEAR(h1[1] / 20000.0, 0.307, 0.02);
  EXPECT_NEAR(h1[2] / 20000.0, 0.186, 0.02);
}

TEST_F(PoliciesTest, PickSoftmaxWithEqualCostsIsUniform) {
  set_endpoints({0, 0});
  auto c = candidates();
  int first = 0;
  for (int i = 0; i < 2000; ++i) first += pick_softmax(c, 0.5, rng_) == 0;
  EXPECT_NEAR(first, 1000, 120);
}

TEST_F(PoliciesTest, PoliciesAreDeterministicForASeed) {
  set_prompt(10);
  set_endpoints({1, 2, 3, 1, 0});
  for (const char* name : {"random", "power-of-two", "least-request", "kv-cost"}) {
    auto a = make_policy({name, {}});
    auto b = make_policy({name, {}});
    Rng ra(99), rb(99);
    for (int i = 0; i < 50; ++i) {
      auto ca = candidates();
      auto cb = candidates();
      ASSERT_EQ(a->pick(context(), ca, ra), b->pick(context(), cb, rb)) << name;
    }
  }
}

}  // namespace policies_test
}  // namespace kvgate::route
