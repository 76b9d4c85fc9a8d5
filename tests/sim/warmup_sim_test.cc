// Warm-up before traffic in the simulator: a replica the autoscaler launches is warmed
// with the pool's hot prefixes before it joins routing, never gets a request before, and
// serves its first requests from its prefix cache; the warm-up report says so.
#include <gtest/gtest.h>

#include <string>

#include "env/file.h"
#include "sim/cluster_sim.h"
#include "sim/warmup_report.h"
#include "workload/scenario.h"

namespace kvgate::sim {

using workload::parse_scenario;
using workload::PolicyRun;
using workload::PolicySpec;
using workload::ReplicaLife;
using workload::RequestRecord;

namespace {

// Two replicas, load stepping from 4 to 60 req/s over 8 customers with 4,000-token
// system prompts: the autoscaler launches replicas (10 s to boot).
constexpr const char* kStep = R"(
name: step
seed: 2
cluster:
  engines: 2
  profile: 2xh100-qwen3-32b
  block_size: 64
  num_gpu_blocks: 2400
gateway: {model: m}
scaling:
  control_interval_s: 5
  signal_window_s: 10
  startup_s: 10
  new_replica_window_s: 30
autoscale: {policy: target, signal: waiting, target: 2, min_replicas: 2, max_replicas: 5}
policies:
  - {name: cold, policy: load, overlap: none}
  - {name: warm, policy: load, overlap: none, warmup: {prefixes: 8, budget_s: 20, concurrency: 4}}
workload:
  kind: shared_prefix
  shared_prefix: {groups: 8, prompts_per_group: 50, system_prompt_tokens: 4000,
                  question_tokens: 200, output_tokens: 150, order: random}
  arrivals:
    stages: [{qps: 4, duration_s: 20}, {qps: 60, duration_s: 60}]
)";

TEST(WarmupSim, NewReplicasAreWarmedBeforeTheyJoinRoutingAndStartWarm) {
  auto s = parse_scenario(kStep, "", env::read_file);
  ASSERT_TRUE(s.ok()) << s.error();
  ASSERT_FALSE(s->policies[0].warmup.enabled);
  ASSERT_TRUE(s->policies[1].warmup.enabled);
  EXPECT_EQ(s->policies[1].warmup.prefixes, 8u);
  EXPECT_EQ(s->policies[1].warmup.budget, 20 * kSecond);
  std::vector<PolicyRun> runs;
  for (const PolicySpec& p : s->policies) {
    auto run = run_policy(*s, p, s->seed);
    ASSERT_TRUE(run.ok()) << run.error();
    ASSERT_GT(run->launches, 0u) << p.name;
    runs.push_back(std::move(*run));
  }
  // Cold: admitted when ready. Warm: admitted after its warm-up, within the budget, and
  // no request was routed to it before.
  for (const ReplicaLife& r : runs[0].replicas) {
    if (r.launched_at > 0 && r.ready_at >= 0) {
      EXPECT_EQ(r.admitted_at, r.ready_at);
    }
  }
  for (const ReplicaLife& r : runs[1].replicas) {
    if (r.launched_at <= 0 || r.ready_at < 0) continue;
    EXPECT_GT(r.admitted_at, r.ready_at);
    EXPECT_LE(r.admitted_at, r.ready_at + 20 * kSecond);
    EXPECT_EQ(r.warmup_requests, 8u);       // every customer's system prompt
    EXPECT_GE(r.warmup_tokens, 8u * 3200);  // >= 80% of each 4,000-token prompt
  }
  for (const RequestRecord& q : runs[1].requests) {
    const ReplicaLife& r = runs[1].replicas.at(q.endpoint);
    if (!q.rejected) {
      EXPECT_GE(q.arrival, r.admitted_at);
    }
  }
  auto rows = summarize_warmup(runs, {}, s->scaling.new_replica_window);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].warmup_requests, 0u);
  EXPECT_GT(rows[1].warmup_requests, 0u);
  ASSERT_GT(rows[0].new_replicas_first.requests, 0u);
  ASSERT_GT(rows[1].new_replicas_first.requests, 0u);
  // Warmed replicas find the system prompts cached from their first request on.
  EXPECT_GT(rows[1].new_replicas_first.hit_rate, rows[0].new_replicas_first.hit_rate);
  EXPECT_LT(rows[1].new_replicas_first.p90, rows[0].new_replicas_first.p90);
  EXPECT_NE(warmup_table(rows, s->scaling.new_replica_window).find("warm"), std::string::npos);
}

TEST(WarmupSim, BadWarmupSectionsAreErrors) {
  std::string bad = kStep;
  bad.replace(bad.find("concurrency: 4"), 14, "concurrency: 0");
  EXPECT_FALSE(parse_scenario(bad, "", env::read_file).ok());
  std::string typo = kStep;
  typo.replace(typo.find("prefixes: 8"), 8, "prefixs:");
  EXPECT_FALSE(parse_scenario(typo, "", env::read_file).ok());
}

}  // namespace
}  // namespace kvgate::sim
