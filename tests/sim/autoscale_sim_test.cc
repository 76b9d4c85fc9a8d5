// The simulator's autoscaling glue: replicas launched by the autoscaler boot for their
// startup time before the router sees them, drained replicas finish what they hold,
// GPU-hours add up, and the same seed gives the same numbers.
#include <gtest/gtest.h>

#include <string>

#include "env/file.h"
#include "sim/cluster_sim.h"
#include "sim/scale_decider.h"
#include "sim/scaling_report.h"
#include "workload/scenario.h"

namespace kvgate::sim {

using workload::parse_scenario;
using workload::ReplicaLife;
using workload::RequestRecord;
using workload::ScaleSample;
using workload::Scenario;

namespace {

// One engine at first; load rises from 1 to 10 req/s and falls back to 4, so a queue
// target scales up (replicas take 20 s to boot) and back down (draining).
constexpr const char* kRamp = R"(
name: ramp
seed: 3
cluster:
  engines: 1
  profile: h100-qwen2.5-7b
  num_gpu_blocks: 2048
  max_num_seqs: 4
gateway: {model: m, hop_delay_ms: 1, scrape_interval_ms: 100}
scaling:
  control_interval_s: 5
  signal_window_s: 10
  startup_s: 20
  slo: {ttft_s: 1, itl_s: 0.05}
autoscale:
  policy: target
  signal: waiting
  target: 2
  min_replicas: 1
  max_replicas: 6
  behavior:
    scale_down:
      stabilization_window: 10s
  cold_start:
    startup_time: 20s
    young_age: 0s
policies:
  - {name: queue, policy: load, overlap: none}
workload:
  kind: shared_prefix
  shared_prefix: {groups: 8, prompts_per_group: 4, system_prompt_tokens: 512,
                  question_tokens: 64, output_tokens: 256, order: random}
  arrivals:
    stages: [{qps: 1, duration_s: 10}, {qps: 10, duration_s: 60}, {qps: 4, duration_s: 90}]
)";

Scenario parse(const std::string& text) {
  auto s = parse_scenario(text, "", env::read_file);
  EXPECT_TRUE(s.ok()) << s.error();
  return *s;
}

TEST(AutoscaleSim, ScalesUpAndDownAndNeverRoutesToAStartingReplica) {
  Scenario s = parse(kRamp);
  auto run = run_policy(s, s.policies.front(), s.seed);
  ASSERT_TRUE(run.ok()) << run.error();
  EXPECT_TRUE(run->autoscaled);
  ASSERT_GT(run->launches, 0u);
  ASSERT_EQ(run->replicas.size(), 1 + run->launches);
  uint32_t peak = 0;
  for (const ScaleSample& x : run->scale) peak = std::max(peak, x.ready + x.starting);
  EXPECT_GE(peak, 3u);
  bool drained = false;
  for (const ReplicaLife& r : run->replicas) drained = drained || r.drained_at >= 0;
  EXPECT_TRUE(drained) << "load fell to 4 req/s: some replica should have been drained";

  for (const RequestRecord& q : run->requests) {
    ASSERT_FALSE(q.rejected);
    const ReplicaLife& r = run->replicas.at(q.endpoint);
    // Routed at arrival: the replica was ready by then, and had not been told to drain.
    ASSERT_GE(r.ready_at, 0);
    EXPECT_GE(q.arrival, r.ready_at);
    EXPECT_GE(r.ready_at - r.launched_at, r.launched_at == 0 ? 0 : 20 * kSecond);
    if (r.drained_at >= 0) {
      EXPECT_LT(q.arrival, r.drained_at);
    }
    // A drained replica stops only after its last request finished at the gateway.
    if (r.stopped_at >= 0) {
      EXPECT_LE(q.finish, r.stopped_at);
    }
  }
}

TEST(AutoscaleSim, DrainedReplicasFinishTheirStreams) {
  Scenario s = parse(kRamp);
  auto run = run_policy(s, s.policies.front(), s.seed);
  ASSERT_TRUE(run.ok()) << run.error();
  int drained_busy = 0;
  for (size_t e = 0; e < run->replicas.size(); ++e) {
    const ReplicaLife& r = run->replicas[e];
    if (r.drained_at < 0 || r.stopped_at < 0) continue;
    for (const RequestRecord& q : run->requests) {
      if (q.endpoint != e || q.finish <= r.drained_at) continue;
      // In flight when the drain began: it still got every token.
      ++drained_busy;
      EXPECT_EQ(q.output_tokens, 256u);
      EXPECT_LE(q.finish, r.stopped_at);
    }
  }
  for (const RequestRecord& q : run->requests) EXPECT_EQ(q.output_tokens, 256u);
  EXPECT_GT(drained_busy, 0) << "no replica was drained with requests in flight";
}

TEST(AutoscaleSim, GpuSecondsAreReplicaLifetimesTimesGpus) {
  Scenario s = parse(kRamp);
  s.autoscale->gpus_per_replica = 2;
  auto run = run_policy(s, s.policies.front(), s.seed);
  ASSERT_TRUE(run.ok()) << run.error();
  double expected = 0;
  for (const ReplicaLife& r : run->replicas) {
    const Nanos end = r.stopped_at >= 0 ? r.stopped_at : run->end_time;
    expected += 2 * to_seconds(end - r.launched_at);
  }
  EXPECT_NEAR(run->gpu_seconds, expected, 1e-6);
  const auto rows = summarize_scaling({*run}, {}, s.scaling.slo, "");
  EXPECT_NEAR(rows.front().gpu_hours, expected / 3600, 1e-9);
}

// The oracle on a flat curve: 9 req/s at 3 per replica needs 3 replicas; it starts with
// one, launches two at the first tick (t = 10 s), each boots 30 s, none ever stops.
constexpr const char* kFlat = R"(
name: flat
seed: 5
cluster: {engines: 1, profile: h100-qwen2.5-7b, num_gpu_blocks: 2048}
gateway: {model: m}
scaling: {control_interval_s: 10, startup_s: 30}
policies:
  - {name: oracle, policy: load, overlap: none,
     oracle: {qps_per_replica: 3, min_replicas: 1, max_replicas: 8, gpus_per_replica: 1}}
  - {name: fixed, policy: load, overlap: none}
workload:
  kind: shared_prefix
  shared_prefix: {groups: 4, prompts_per_group: 4, system_prompt_tokens: 256,
                  question_tokens: 32, output_tokens: 16, order: random}
  arrivals: {kind: diurnal, mean_qps: 9, amplitude: 0, period_s: 600, duration_s: 120,
             stage_s: 60}
)";

TEST(AutoscaleSim, OracleGpuHoursByHand) {
  Scenario s = parse(kFlat);
  auto run = run_policy(s, s.policies[0], s.seed);
  ASSERT_TRUE(run.ok()) << run.error();
  ASSERT_EQ(run->launches, 2u);
  ASSERT_EQ(run->replicas.size(), 3u);
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_EQ(run->replicas[i].launched_at, 10 * kSecond);
    EXPECT_EQ(run->replicas[i].ready_at, 40 * kSecond);
    EXPECT_EQ(run->replicas[i].stopped_at, -1);
  }
  const double end = to_seconds(run->end_time);
  EXPECT_NEAR(run->gpu_seconds, end + 2 * (end - 10), 1e-6);

  // A fixed fleet: one engine for the whole run, not autoscaled.
  auto fixed = run_policy(s, s.policies[1], s.seed);
  ASSERT_TRUE(fixed.ok()) << fixed.error();
  EXPECT_FALSE(fixed->autoscaled);
  EXPECT_NEAR(fixed->gpu_seconds, to_seconds(fixed->end_time), 1e-6);
  EXPECT_EQ(fixed->launches, 0u);
}

TEST(AutoscaleSim, SameSeedSameNumbers) {
  Scenario s = parse(kRamp);
  s.scaling.startup_fixed = 0;  // sample the 7B cold-start table instead
  s.scaling.startup = engine::StartupMode::kCachesKept;
  auto a = run_policy(s, s.policies.front(), 11);
  auto b = run_policy(s, s.policies.front(), 11);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->gpu_seconds, b->gpu_seconds);
  EXPECT_EQ(a->end_time, b->end_time);
  ASSERT_EQ(a->scale.size(), b->scale.size());
  for (size_t i = 0; i < a->scale.size(); ++i) {
    EXPECT_EQ(a->scale[i].ready, b->scale[i].ready);
    EXPECT_EQ(a->scale[i].starting, b->scale[i].starting);
    EXPECT_EQ(a->scale[i].desired, b->scale[i].desired);
  }
  ASSERT_EQ(a->requests.size(), b->requests.size());
  for (size_t i = 0; i < a->requests.size(); ++i) {
    EXPECT_EQ(a->requests[i].endpoint, b->requests[i].endpoint);
    EXPECT_EQ(a->requests[i].finish, b->requests[i].finish);
  }
  for (size_t i = 1; i < a->replicas.size(); ++i) {
    // Startups drawn from the caches-kept table: about 68 s, within its range.
    if (a->replicas[i].ready_at < 0) continue;
    const double boot = to_seconds(a->replicas[i].ready_at - a->replicas[i].launched_at);
    EXPECT_GT(boot, 40);
    EXPECT_LT(boot, 120);
  }
}

TEST(AutoscaleSim, MedianStartupFollowsTheTable) {
  Scenario s = parse(kRamp);
  s.scaling.startup_fixed = 0;
  s.scaling.startup = engine::StartupMode::kCold;
  EXPECT_NEAR(to_seconds(median_startup(s)), 200, 25);
  s.scaling.startup = engine::StartupMode::kCachesKept;
  EXPECT_NEAR(to_seconds(median_startup(s)), 68, 10);
}

TEST(AutoscaleSim, ScenarioErrors) {
  std::string bad = kFlat;
  bad.replace(bad.find("kind: diurnal"), 13, "kind: poisson, stages: [{qps: 1, duration_s: 1}]");
  bad.replace(bad.find("mean_qps: 9,"), 12, "");
  auto s = parse_scenario(bad, "", env::read_file);
  EXPECT_FALSE(s.ok());
  auto t = parse_scenario(std::string(kRamp) + "\nscaling2: 1\n", "", env::read_file);
  EXPECT_FALSE(t.ok());
}

}  // namespace
}  // namespace kvgate::sim
