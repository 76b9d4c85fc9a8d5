// Mooncake's early rejection in the simulator, end to end: a small, fast version of
// examples/sim/early-rejection-oscillation.yaml (6 prefill engines, 1 decode engine for
// about fifteen 16,000-token requests, 30 s at twice what decode can serve). If the
// effect the docs show disappears (naive rejection oscillating, prediction damping it,
// no rejection wasting prefill), this fails.
#include <gtest/gtest.h>

#include "env/file.h"
#include "sim/cluster_sim.h"
#include "workload/pd_load_report.h"
#include "workload/scenario.h"

namespace kvgate::sim {

using workload::parse_scenario;
using workload::pd_load_table;
using workload::PdLoadSummary;
using workload::PolicyRun;
using workload::PolicySpec;
using workload::summarize;
using workload::summarize_pd_load;
using workload::Summary;

namespace {

constexpr const char* kScenario = R"(
name: oscillation (small)
seed: 1
cluster:
  groups:
    - {count: 6, profile: h100-qwen2.5-7b, role: prefill, num_gpu_blocks: 8000}
    - {count: 1, profile: h100-qwen2.5-7b, role: decode, num_gpu_blocks: 16000}
gateway: {model: m, decode_reject_kv_usage: 0.95, kv_transfer_ms_per_1k_tokens: 5}
policies:
  - {name: no-rejection, policy: least-request, overlap: none}
  - name: naive
    policy: least-request
    overlap: none
    prefill_tokens_per_second: 34000
    early_reject: {enabled: true, max_usage: 0.85, decode_seconds_per_token: 0.010, predict: false}
  - name: predicted
    policy: least-request
    overlap: none
    prefill_tokens_per_second: 34000
    early_reject: {enabled: true, max_usage: 0.85, decode_seconds_per_token: 0.010}
workload:
  kind: shared_prefix
  shared_prefix: {groups: 300, prompts_per_group: 1, system_prompt_tokens: 14000,
                  question_tokens: 2000, output_tokens: 200, order: random}
  arrivals:
    stages:
      - {qps: 3, duration_s: 5, warmup: true}
      - {qps: 14, duration_s: 30}
)";

TEST(EarlyRejectionSim, NaiveOscillatesAndPredictionDampsIt) {
  auto s = parse_scenario(kScenario, "", env::read_file);
  ASSERT_TRUE(s.ok()) << s.error();
  ASSERT_EQ(s->policies.size(), 3u);
  EXPECT_FALSE(s->policies[1].router.early_reject.predict);
  EXPECT_TRUE(s->policies[2].router.early_reject.predict);
  auto w = workload::make_workload(s->workload, s->seed, env::read_file);
  ASSERT_TRUE(w.ok());
  const std::vector<workload::StageInfo> stages = (*w)->stages();
  std::vector<PolicyRun> runs;
  std::vector<Summary> summaries;
  for (const PolicySpec& p : s->policies) {
    auto run = run_policy(*s, p, s->seed);
    ASSERT_TRUE(run.ok()) << run.error();
    summaries.push_back(summarize(*run, stages));
    runs.push_back(std::move(*run));
  }
  const auto rows = summarize_pd_load(runs, summaries, stages);
  ASSERT_EQ(rows.size(), 3u);
  const PdLoadSummary& none = rows[0];
  const PdLoadSummary& naive = rows[1];
  const PdLoadSummary& predicted = rows[2];
  std::fputs(pd_load_table(rows).c_str(), stdout);

  // No rejection at the door: decode refuses a large share after their prefill.
  EXPECT_EQ(none.rejected_at_door, 0u);
  EXPECT_GT(none.rejected_after_prefill, 100u);
  EXPECT_GT(none.wasted_prefill_tokens, 3 * naive.wasted_prefill_tokens);
  // Naive early rejection: decode swings deep, prefill in anti-phase, and the waves of
  // prefills that land together still overfill decode.
  EXPECT_GT(naive.rejected_at_door, 0u);
  EXPECT_GT(naive.rejected_after_prefill, 10u);
  EXPECT_GT(naive.decode_kv_sd, 0.15);
  EXPECT_LT(naive.decode_kv_p10, 0.5);
  EXPECT_LT(naive.correlation, -0.3);
  // Prediction: decode swings far less and stays fuller, almost nothing is wasted, and
  // more requests are served than with the naive rule.
  EXPECT_LT(predicted.decode_kv_sd, 0.6 * naive.decode_kv_sd);
  EXPECT_GT(predicted.decode_kv_p10, naive.decode_kv_p10 + 0.15);
  EXPECT_GT(predicted.decode_kv_mean, naive.decode_kv_mean);
  EXPECT_LT(predicted.rejected_after_prefill * 5, naive.rejected_after_prefill);
  EXPECT_GT(predicted.served, naive.served);
  EXPECT_LT(predicted.prefill_queue_sd, naive.prefill_queue_sd);

  // Deterministic: the same seed gives the same numbers.
  auto again = run_policy(*s, s->policies[1], s->seed);
  ASSERT_TRUE(again.ok());
  const auto rerun = summarize_pd_load({*again}, {summarize(*again, stages)}, stages);
  EXPECT_EQ(rerun[0].served, naive.served);
  EXPECT_EQ(rerun[0].rejected_after_prefill, naive.rejected_after_prefill);
  EXPECT_DOUBLE_EQ(rerun[0].decode_kv_sd, naive.decode_kv_sd);
}

}  // namespace
}  // namespace kvgate::sim
