#include "sim/cluster_sim.h"

#include <gtest/gtest.h>

#include "env/file.h"
#include "workload/scenario.h"

namespace kvgate::sim {

using workload::parse_scenario;
using workload::PolicySpec;
using workload::RequestRecord;
using workload::Scenario;
using workload::summarize;
using workload::Summary;

namespace {

// Four small engines, 12 customers with 1,024-token system prompts: a cache holds the
// prompts of about half the customers, so where a request lands decides whether it hits.
constexpr const char* kTiny = R"(
name: tiny
seed: 7
cluster:
  engines: 4
  profile: h100-qwen2.5-7b
  num_gpu_blocks: 512
gateway: {model: m, hop_delay_ms: 1, scrape_interval_ms: 50, kv_event_delay_ms: 5}
policies:
  - {name: precise, policy: kv-cost, params: {overlap_weight: 4}, overlap: precise}
  - {name: approximate, policy: approx-prefix, overlap: approx}
  - {name: random, policy: random, overlap: none}
workload:
  kind: shared_prefix
  shared_prefix: {groups: 12, prompts_per_group: 3, system_prompt_tokens: 1024,
                  question_tokens: 64, output_tokens: 32}
  arrivals:
    stages: [{qps: 20, duration_s: 2, warmup: true}, {qps: 40, duration_s: 8}]
)";

Scenario tiny() {
  auto s = parse_scenario(kTiny, "", env::read_file);
  EXPECT_TRUE(s.ok()) << s.error();
  return *s;
}

const PolicySpec& policy(const Scenario& s, const std::string& name) {
  const PolicySpec* p = s.policy(name);
  if (!p) ADD_FAILURE() << "no policy " << name;
  return p ? *p : s.policies.front();
}

TEST(ClusterSim, EveryRequestIsServedWithExactOutput) {
  Scenario s = tiny();
  auto run = run_policy(s, policy(s, "random"), s.seed);
  ASSERT_TRUE(run.ok()) << run.error();
  ASSERT_GT(run->requests.size(), 250u);
  std::vector<int> per_engine(4, 0);
  for (const RequestRecord& r : run->requests) {
    ASSERT_FALSE(r.rejected);
    ASSERT_GE(r.first_token, r.arrival + 2 * kMillisecond);  // two hops at least
    ASSERT_GE(r.finish, r.first_token);
    EXPECT_EQ(r.output_tokens, 32u);
    EXPECT_EQ(r.prompt_tokens, 1088u);
    EXPECT_LE(r.cached_tokens, r.prompt_tokens);
    ++per_engine[r.endpoint];
  }
  for (int n : per_engine) EXPECT_GT(n, 30);  // random spreads
  EXPECT_FALSE(run->samples.empty());
}

TEST(ClusterSim, SameSeedSameNumbers) {
  Scenario s = tiny();
  auto a = run_policy(s, policy(s, "precise"), 11);
  auto b = run_policy(s, policy(s, "precise"), 11);
  auto c = run_policy(s, policy(s, "precise"), 12);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  ASSERT_EQ(a->requests.size(), b->requests.size());
  for (size_t i = 0; i < a->requests.size(); ++i) {
    const RequestRecord &x = a->requests[i], &y = b->requests[i];
    ASSERT_EQ(x.arrival, y.arrival);
    ASSERT_EQ(x.first_token, y.first_token) << i;
    ASSERT_EQ(x.finish, y.finish);
    ASSERT_EQ(x.endpoint, y.endpoint);
    ASSERT_EQ(x.cached_tokens, y.cached_tokens);
  }
  EXPECT_EQ(a->events, b->events);
  EXPECT_EQ(a->end_time, b->end_time);
  bool differs = a->requests.size() != c->requests.size();
  for (size_t i = 0; !differs && i < a->requests.size(); ++i) {
    differs = a->requests[i].arrival != c->requests[i].arrival;
  }
  EXPECT_TRUE(differs);
}

TEST(ClusterSim, PoliciesSeeTheSameArrivals) {
  Scenario s = tiny();
  auto a = run_policy(s, policy(s, "precise"), s.seed);
  auto b = run_policy(s, policy(s, "random"), s.seed);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->requests.size(), b->requests.size());
  for (size_t i = 0; i < a->requests.size(); ++i) {
    ASSERT_EQ(a->requests[i].arrival, b->requests[i].arrival);
    ASSERT_EQ(a->requests[i].prompt_tokens, b->requests[i].prompt_tokens);
  }
}

TEST(ClusterSim, PreciseRoutingBeatsRandomOnHitRate) {
  Scenario s = tiny();
  auto workload = workload::make_workload(s.workload, s.seed, env::read_file);
  ASSERT_TRUE(workload.ok());
  const auto stages = (*workload)->stages();
  auto precise = run_policy(s, policy(s, "precise"), s.seed);
  auto approx = run_policy(s, policy(s, "approximate"), s.seed);
  auto random = run_policy(s, policy(s, "random"), s.seed);
  ASSERT_TRUE(precise.ok() && approx.ok() && random.ok());
  const Summary p = summarize(*precise, stages);
  const Summary a = summarize(*approx, stages);
  const Summary r = summarize(*random, stages);
  EXPECT_GT(p.hit_rate, r.hit_rate + 0.2) << p.hit_rate << " vs " << r.hit_rate;
  EXPECT_GT(a.hit_rate, r.hit_rate) << a.hit_rate << " vs " << r.hit_rate;
  EXPECT_LT(p.ttft_p90, r.ttft_p90);
  EXPECT_EQ(p.requests, r.requests);
}

TEST(ClusterSim, BadRouterConfigIsAnError) {
  Scenario s = tiny();
  PolicySpec bad = s.policies.front();
  bad.router.policy = {"kv-cost", {{"no_such_param", "1"}}};
  auto run = run_policy(s, bad, 1);
  ASSERT_FALSE(run.ok());
  bad.router.policy = {"no-such-policy", {}};
  EXPECT_FALSE(run_policy(s, bad, 1).ok());
}

TEST(ClusterSim, MaxTimeStopsTheClock) {
  Scenario s = tiny();
  s.max_time = 3 * kSecond;
  auto run = run_policy(s, policy(s, "random"), 1);
  ASSERT_TRUE(run.ok());
  EXPECT_LE(run->end_time, 3 * kSecond);
}

}  // namespace
}  // namespace kvgate::sim

namespace kvgate::sim {
namespace {

// Two prefill and two small decode engines, load well above what decode can hold.
constexpr const char* kDisaggregated = R"(
name: pd
seed: 3
cluster:
  groups:
    - {count: 2, profile: h100-qwen2.5-7b, role: prefill}
    - {count: 2, profile: h100-qwen2.5-7b, role: decode, num_gpu_blocks: 400}
gateway: {model: m, decode_reject_kv_usage: 0.9, kv_transfer_ms_per_1k_tokens: 5}
policies:
  - {name: none, policy: kv-cost, overlap: precise}
  - name: predicted
    policy: kv-cost
    overlap: precise
    prefill_tokens_per_second: 20000
    early_reject: {enabled: true, max_usage: 0.85, decode_seconds_per_token: 0.01}
workload:
  kind: shared_prefix
  shared_prefix: {groups: 10, prompts_per_group: 2, system_prompt_tokens: 1024,
                  question_tokens: 256, output_tokens: 300, order: random}
  arrivals: {stages: [{qps: 30, duration_s: 4}]}
)";

TEST(ClusterSim, DisaggregatedPrefillThenDecodeAndEarlyRejection) {
  auto s = parse_scenario(kDisaggregated, "", env::read_file);
  ASSERT_TRUE(s.ok()) << s.error();
  auto none = run_policy(*s, s->policies[0], s->seed);
  auto predicted = run_policy(*s, s->policies[1], s->seed);
  ASSERT_TRUE(none.ok() && predicted.ok());
  uint64_t served = 0, wasted = 0, at_door = 0;
  for (const RequestRecord& r : none->requests) {
    if (r.rejected) {
      EXPECT_TRUE(r.rejected_after_prefill);  // nothing is rejected at the door
      ++wasted;
      continue;
    }
    ++served;
    EXPECT_LT(r.prefill_engine, 2u);  // prefilled on a prefill-role engine...
    EXPECT_GE(r.endpoint, 2u);        // ...decoded on a decode-role engine
    EXPECT_EQ(r.output_tokens, 300u);
  }
  EXPECT_GT(served, 0u);
  EXPECT_GT(wasted, 0u);
  for (const RequestRecord& r : predicted->requests) {
    if (r.rejected && !r.rejected_after_prefill) ++at_door;
  }
  const Summary p = summarize(*predicted, {});
  const Summary n = summarize(*none, {});
  EXPECT_GT(at_door, 0u);
  EXPECT_LT(p.wasted_prefill_tokens, n.wasted_prefill_tokens);
}

}  // namespace
}  // namespace kvgate::sim
