// The simulator with latency targets (issue #43): a workload attaches targets to a
// fraction of its requests, the routers' predictors learn from the simulated lifecycle,
// and the report shows the attainment and the predictor's MAPE.
#include <gtest/gtest.h>

#include <string>

#include "env/file.h"
#include "sim/cluster_sim.h"
#include "workload/scenario.h"

namespace kvgate::sim {
// Named after the file, not anonymous: tests compile in unity batches (docs/development.md).
namespace latency_targets_sim_test {

using workload::parse_scenario;
using workload::PolicySpec;
using workload::Scenario;
using workload::summarize;
using workload::Summary;

constexpr const char* kTargets = R"(
name: targets
seed: 5
cluster:
  engines: 4
  profile: h100-qwen2.5-7b
  num_gpu_blocks: 2048
gateway: {model: m, hop_delay_ms: 1, scrape_interval_ms: 50, kv_event_delay_ms: 5}
policies:
  - {name: plain, policy: kv-cost, overlap: precise}
  - name: targets
    policy: kv-cost
    overlap: precise
    latency_targets: {enabled: true, min_samples: 4}
workload:
  kind: shared_prefix
  shared_prefix: {groups: 8, prompts_per_group: 8, system_prompt_tokens: 512,
                  question_tokens: 128, output_tokens: 64, output_tokens_min: 16}
  targets: {fraction: 0.3, ttft_ms: 400, tpot_ms: 40}
  arrivals:
    stages: [{qps: 10, duration_s: 2, warmup: true}, {qps: 20, duration_s: 10}]
)";

Scenario scenario(const std::string& text = kTargets) {
  auto s = parse_scenario(text, "", env::read_file);
  EXPECT_TRUE(s.ok()) << s.error();
  return s.ok() ? *s : Scenario{};
}

const PolicySpec& policy(const Scenario& s, const std::string& name) {
  const PolicySpec* p = s.policy(name);
  if (!p) ADD_FAILURE() << "no policy " << name;
  return p ? *p : s.policies.front();
}

TEST(LatencyTargetsSim, TargetsAttachToTheConfiguredFraction) {
  const Scenario s = scenario();
  EXPECT_DOUBLE_EQ(s.workload.targets.fraction, 0.3);
  EXPECT_EQ(s.workload.targets.ttft, 400 * kMillisecond);
  EXPECT_EQ(s.workload.targets.tpot, 40 * kMillisecond);
  auto plain = run_policy(s, policy(s, "plain"), s.seed);
  auto targets = run_policy(s, policy(s, "targets"), s.seed);
  ASSERT_TRUE(plain.ok() && targets.ok());
  ASSERT_GT(plain->requests.size(), 150u);
  ASSERT_EQ(plain->requests.size(), targets->requests.size());
  size_t targeted = 0;
  for (size_t i = 0; i < plain->requests.size(); ++i) {
    const workload::RequestRecord& r = plain->requests[i];
    EXPECT_TRUE(r.ttft_target == 0 || r.ttft_target == 400 * kMillisecond);
    EXPECT_EQ(r.ttft_target > 0, r.tpot_target > 0);
    targeted += r.ttft_target > 0;
    // The same requests carry targets whatever the policy.
    EXPECT_EQ(r.ttft_target, targets->requests[i].ttft_target);
    EXPECT_EQ(r.arrival, targets->requests[i].arrival);
  }
  const double share = static_cast<double>(targeted) / static_cast<double>(plain->requests.size());
  EXPECT_NEAR(share, 0.3, 0.08) << targeted << " of " << plain->requests.size();
}

TEST(LatencyTargetsSim, TheReportShowsAttainmentAndThePredictorsError) {
  const Scenario s = scenario();
  auto plain = run_policy(s, policy(s, "plain"), s.seed);
  auto targets = run_policy(s, policy(s, "targets"), s.seed);
  ASSERT_TRUE(plain.ok() && targets.ok());
  EXPECT_TRUE(plain->latency_targets);  // the workload attaches targets
  EXPECT_FALSE(plain->predictor);
  EXPECT_EQ(plain->predictor_ttft.count, 0u);
  EXPECT_TRUE(targets->predictor);
  // Every answered request taught TTFT; every one with 2 tokens or more, TPOT.
  EXPECT_GT(targets->predictor_ttft.count, 150u);
  EXPECT_GT(targets->predictor_tpot.count, 150u);
  const Summary a = summarize(*plain, {});
  const Summary b = summarize(*targets, {});
  EXPECT_TRUE(a.latency_report);
  EXPECT_TRUE(b.latency_report);
  EXPECT_GT(b.targeted, 0u);
  EXPECT_GT(b.ttft_mape, 0);
  EXPECT_GT(b.tpot_mape, 0);
  EXPECT_LT(b.ttft_mape, 10);  // a fraction, not a percentage gone wild
  EXPECT_GE(b.ttft_target_met, 0);
  EXPECT_LE(b.ttft_target_met, 1);
  const std::string csv = workload::summary_csv({a, b});
  EXPECT_NE(csv.find("predictor_ttft_mape"), std::string::npos);
  EXPECT_NE(csv.find("ttft_target_met"), std::string::npos);
  const std::string table = workload::format_table("targets", {a, b});
  EXPECT_NE(table.find("TTFT MAPE"), std::string::npos);
  const std::string json = workload::report_json("targets", s.seed, {a, b});
  EXPECT_NE(json.find("\"predictor_tpot_mape\""), std::string::npos);
}

TEST(LatencyTargetsSim, WithoutTargetsNothingIsReported) {
  std::string text = kTargets;
  text.erase(text.find("  targets: {fraction"),
             text.find("  arrivals:") - text.find("  targets: {fraction"));
  text.erase(text.find("  - name: targets"),
             text.find("workload:") - text.find("  - name: targets"));
  const Scenario s = scenario(text);
  auto run = run_policy(s, policy(s, "plain"), s.seed);
  ASSERT_TRUE(run.ok());
  EXPECT_FALSE(run->latency_targets);
  const Summary sum = summarize(*run, {});
  EXPECT_FALSE(sum.latency_report);
  EXPECT_EQ(workload::summary_csv({sum}).find("ttft_target_met"), std::string::npos);
  EXPECT_EQ(workload::format_table("plain", {sum}).find("MAPE"), std::string::npos);
}

TEST(LatencyTargetsSim, BadTargetsNameTheFileLineAndField) {
  auto check = [](const std::string& from, const std::string& to, const std::string& want) {
    std::string text = kTargets;
    text.replace(text.find(from), from.size(), to);
    auto s = parse_scenario(text, "", env::read_file, "t.yaml");
    ASSERT_FALSE(s.ok()) << to;
    EXPECT_NE(s.error().find(want), std::string::npos) << s.error();
    EXPECT_NE(s.error().find("t.yaml:"), std::string::npos) << s.error();
  };
  check("fraction: 0.3", "fraction: 1.5", "workload.targets.fraction");
  check("ttft_ms: 400", "ttft_ms: -1", "workload.targets.ttft_ms");
  check("tpot_ms: 40", "tpot_ms: 40, slo: 1", "workload.targets.slo: unknown field");
  check("ttft_ms: 400, tpot_ms: 40", "ttft_ms: 0", "workload.targets: needs ttft_ms or tpot_ms");
}

}  // namespace latency_targets_sim_test
}  // namespace kvgate::sim
