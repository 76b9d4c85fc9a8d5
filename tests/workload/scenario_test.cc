// The scenario file's reader: errors that name the field, engine groups, policies.
#include "workload/scenario.h"

#include <gtest/gtest.h>

namespace kvgate::workload {
namespace {

// Profiles are the built-in ones here: a file name is a file that cannot be read.
const ReadFile kNoFiles = [](const std::string& path) -> Result<std::string> {
  return Error("cannot read " + path + ": no files in this test");
};

TEST(Scenario, ErrorsNameTheField) {
  auto no_policies =
      parse_scenario("{cluster: {engines: 1, profile: h100-qwen2.5-7b}}", "", kNoFiles);
  ASSERT_FALSE(no_policies.ok());
  EXPECT_NE(no_policies.error().find("policies"), std::string::npos);
  auto bad_profile = parse_scenario("{cluster: {engines: 1, profile: nope}}", "", kNoFiles);
  ASSERT_FALSE(bad_profile.ok());
  EXPECT_NE(bad_profile.error().find("profile"), std::string::npos);
  auto bad_overlap = parse_scenario(
      "{cluster: {engines: 1, profile: h100-qwen2.5-7b}, policies: [{policy: random, overlap: x}]}",
      "", kNoFiles);
  ASSERT_FALSE(bad_overlap.ok());
  EXPECT_NE(bad_overlap.error().find("overlap"), std::string::npos);
  EXPECT_FALSE(parse_scenario("[1, 2", "", kNoFiles).ok());
  auto typo = parse_scenario("{clustr: {}}", "", kNoFiles);
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.error().find("clustr"), std::string::npos);
}

TEST(Scenario, GroupsAndPolicyParams) {
  auto s = parse_scenario(R"(
cluster:
  groups:
    - {count: 2, profile: h100-qwen2.5-7b, zone: a}
    - {count: 3, profile: 2xh100-qwen3-32b, num_gpu_blocks: 100, rack: r1}
policies:
  - {name: w2, policy: kv-cost, params: {overlap_weight: 2, temperature: 0.5}, overlap: both}
workload:
  kind: chat
  chat: {min_turns: 1, max_turns: 2}
  arrivals: {kind: constant, stages: [{qps: 1, duration_s: 1}]}
)",
                          "", kNoFiles);
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(s->engine_count(), 5u);
  EXPECT_EQ(s->engines[1].config.num_gpu_blocks, 100u);
  EXPECT_EQ(s->engines[0].zone, "a");
  ASSERT_EQ(s->policies[0].router.policy.params.size(), 2u);
  EXPECT_EQ(s->policies[0].router.policy.params[0].first, "overlap_weight");
  EXPECT_EQ(s->policies[0].router.overlap_source, route::OverlapSource::kBoth);
}

TEST(Scenario, GatewayReplicasPerPolicy) {
  auto s = parse_scenario(R"(
cluster: {engines: 1, profile: h100-qwen2.5-7b}
policies:
  - {name: one, policy: random}
  - {name: four, policy: random,
     gateway_replicas: {count: 4, sync: off, lag_ms: 10, fleet_fairness: off}}
  - {name: defaults, policy: random, gateway_replicas: {count: 2}}
workload:
  kind: chat
  chat: {min_turns: 1, max_turns: 2}
  arrivals: {kind: constant, stages: [{qps: 1, duration_s: 1}]}
)",
                          "", kNoFiles);
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_FALSE(s->policies[0].gateway_replicas.has_value());
  ASSERT_TRUE(s->policies[1].gateway_replicas.has_value());
  const GatewayReplicasSpec& four = *s->policies[1].gateway_replicas;
  EXPECT_EQ(four.count, 4u);
  EXPECT_FALSE(four.sync);
  EXPECT_EQ(four.lag, 10 * kMillisecond);
  EXPECT_FALSE(four.fleet_fairness);
  ASSERT_TRUE(s->policies[2].gateway_replicas.has_value());
  EXPECT_TRUE(s->policies[2].gateway_replicas->sync);
  EXPECT_TRUE(s->policies[2].gateway_replicas->fleet_fairness);
  EXPECT_EQ(s->policies[2].gateway_replicas->lag, 0);
  auto bad = parse_scenario(
      "{cluster: {engines: 1, profile: h100-qwen2.5-7b}, policies: [{policy: random, "
      "gateway_replicas: {count: 0}}]}",
      "", kNoFiles);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("gateway_replicas"), std::string::npos) << bad.error();
  auto typo = parse_scenario(
      "{cluster: {engines: 1, profile: h100-qwen2.5-7b}, policies: [{policy: random, "
      "gateway_replicas: {cout: 2}}]}",
      "", kNoFiles);
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.error().find("cout"), std::string::npos) << typo.error();
}

}  // namespace
}  // namespace kvgate::workload
