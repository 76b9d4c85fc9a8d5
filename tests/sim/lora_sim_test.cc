// The simulator with LoRA adapters (issue #40): requests draw adapters, engines load them
// into max_loras slots, and a policy routes on load alone, adapter-aware, or
// adapter-aware with the core's placement.
#include <gtest/gtest.h>

#include <string>

#include "env/file.h"
#include "sim/cluster_sim.h"
#include "workload/scenario.h"

namespace kvgate::sim {
// Named after the file, not anonymous: tests compile in unity batches (docs/development.md).
namespace lora_sim_test {

using workload::parse_scenario;
using workload::PolicyRun;
using workload::PolicySpec;
using workload::Scenario;
using workload::summarize;
using workload::Summary;

// Four engines with 4 adapter slots each (16 in all) and 12 adapters of skewed
// popularity: every adapter fits somewhere, but not every adapter on every engine.
constexpr const char* kLora = R"(
name: lora
seed: 3
cluster:
  engines: 4
  profile: h100-qwen2.5-7b
  num_gpu_blocks: 2048
gateway: {model: m, hop_delay_ms: 1, scrape_interval_ms: 50, kv_event_delay_ms: 5}
adapters: {count: 12, popularity: zipf, zipf_s: 1.2, max_loras: 4, load_ms: 100}
policies:
  - {name: load-only, policy: load, overlap: none, lora: {routing: load_only}}
  - {name: aware, policy: load, overlap: none, lora: {routing: aware}}
  - name: placed
    policy: load
    overlap: none
    lora: {routing: aware, placement: {interval_ms: 500, idle_unload_ms: 60000}}
workload:
  kind: shared_prefix
  shared_prefix: {groups: 8, prompts_per_group: 4, system_prompt_tokens: 256,
                  question_tokens: 64, output_tokens: 32}
  arrivals:
    stages: [{qps: 10, duration_s: 2, warmup: true}, {qps: 20, duration_s: 10}]
)";

Scenario lora_scenario() {
  auto s = parse_scenario(kLora, "", env::read_file);
  EXPECT_TRUE(s.ok()) << s.error();
  return *s;
}

const PolicySpec& policy(const Scenario& s, const std::string& name) {
  const PolicySpec* p = s.policy(name);
  if (!p) ADD_FAILURE() << "no policy " << name;
  return p ? *p : s.policies.front();
}

TEST(LoraSim, ParsesAdaptersAndPolicies) {
  const Scenario s = lora_scenario();
  EXPECT_EQ(s.adapters.count, 12u);
  EXPECT_EQ(s.adapters.max_loras, 4u);
  EXPECT_EQ(s.adapters.load_time, 100 * kMillisecond);
  EXPECT_FALSE(policy(s, "load-only").lora_aware);
  EXPECT_TRUE(policy(s, "aware").lora_aware);
  EXPECT_FALSE(policy(s, "aware").lora_placement.enabled);
  EXPECT_TRUE(policy(s, "placed").lora_placement.enabled);
  EXPECT_EQ(policy(s, "placed").lora_placement.interval, 500 * kMillisecond);

  std::string bad = kLora;
  bad.replace(bad.find("lora: {routing: load_only}"), 26,
              "lora: {routing: load_only, placement: {}}");
  auto r = parse_scenario(bad, "", env::read_file);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("routing: aware"), std::string::npos) << r.error();
}

TEST(LoraSim, EveryPolicyServesEveryRequestAndReportsAdapterLoads) {
  const Scenario s = lora_scenario();
  for (const char* name : {"load-only", "aware", "placed"}) {
    auto run = run_policy(s, policy(s, name), s.seed);
    ASSERT_TRUE(run.ok()) << run.error();
    EXPECT_TRUE(run->lora);
    EXPECT_GT(run->adapter_loads, 0u) << name;
    EXPECT_GT(run->requests.size(), 150u) << name;
    for (const workload::RequestRecord& r : run->requests) {
      EXPECT_FALSE(r.rejected) << name;
      EXPECT_FALSE(r.failed) << name;
      EXPECT_GT(r.finish, r.arrival) << name;
    }
    const Summary sum = summarize(*run, {});
    EXPECT_TRUE(sum.lora_report);
    EXPECT_GT(sum.adapter_loads_per_min, 0) << name;
    const std::string csv = workload::summary_csv({sum});
    EXPECT_NE(csv.find("adapter_loads_per_min"), std::string::npos);
  }
}

TEST(LoraSim, PlacementLoadsAdaptersFarLessOftenThanLoadOnlyRouting) {
  const Scenario s = lora_scenario();
  auto load_only = run_policy(s, policy(s, "load-only"), s.seed);
  auto placed = run_policy(s, policy(s, "placed"), s.seed);
  ASSERT_TRUE(load_only.ok() && placed.ok());
  // Load-only routing sends every adapter to every engine, whose 4 slots then churn
  // through 12 adapters; placement keeps each adapter where it was loaded.
  EXPECT_GT(placed->placement_actions, 0u);
  EXPECT_LT(placed->adapter_loads * 2, load_only->adapter_loads)
      << placed->adapter_loads << " vs " << load_only->adapter_loads;
  EXPECT_EQ(load_only->placement_actions, 0u);
}

TEST(LoraSim, SameAdaptersForEveryPolicy) {
  // The adapters are drawn from their own stream in arrival order: the same per request
  // whatever the policy (open-loop arrivals), so rows differ by routing alone.
  const Scenario s = lora_scenario();
  auto a = run_policy(s, policy(s, "load-only"), s.seed);
  auto b = run_policy(s, policy(s, "aware"), s.seed);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->requests.size(), b->requests.size());
  for (size_t i = 0; i < a->requests.size(); ++i) {
    ASSERT_EQ(a->requests[i].arrival, b->requests[i].arrival);
  }
}

TEST(LoraSim, WithoutAdaptersNothingIsReported) {
  std::string plain = kLora;
  plain.erase(plain.find("adapters:"), plain.find("policies:") - plain.find("adapters:"));
  auto s = parse_scenario(plain, "", env::read_file);
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_FALSE(s->adapters.enabled());
  auto run = run_policy(*s, policy(*s, "placed"), s->seed);
  ASSERT_TRUE(run.ok()) << run.error();
  EXPECT_FALSE(run->lora);
  const Summary sum = summarize(*run, {});
  EXPECT_FALSE(sum.lora_report);
  EXPECT_EQ(workload::summary_csv({sum}).find("adapter"), std::string::npos);
  EXPECT_EQ(workload::format_table("x", {sum}).find("LoRA"), std::string::npos);
}

}  // namespace lora_sim_test
}  // namespace kvgate::sim
