// The scenario file's reader: errors that name the field, engine groups, policies.
#include "workload/scenario.h"

#include <gtest/gtest.h>

namespace kvgate::workload {
// Named after the file: the tests compile in unity batches (docs/development.md).
namespace scenario_test {

// Profiles are the built-in ones here: a file name is a file that cannot be read.
const ReadFile kNoFiles = [](const std::string& path) -> Result<std::string> {
  return Error("cannot read " + path + ": no files in this test");
};

// A small chat workload, for the scenarios whose workload does not matter.
const std::string kChatWorkload =
    "workload:\n"
    "  kind: chat\n"
    "  chat: {min_turns: 1, max_turns: 2}\n"
    "  arrivals: {kind: constant, stages: [{qps: 1, duration_s: 1}]}\n";

// Whether the scenario `yaml` is refused with an error that names `field`.
::testing::AssertionResult refused_naming(const std::string& yaml, const std::string& field) {
  auto s = parse_scenario(yaml, "", kNoFiles);
  if (s.ok()) return ::testing::AssertionFailure() << "parsed: " << yaml;
  if (s.error().find(field) == std::string::npos) {
    return ::testing::AssertionFailure() << "\"" << field << "\" not named: " << s.error();
  }
  return ::testing::AssertionSuccess();
}

TEST(Scenario, ErrorsNameTheField) {
  EXPECT_TRUE(refused_naming("{cluster: {engines: 1, profile: h100-qwen2.5-7b}}", "policies"));
  EXPECT_TRUE(refused_naming("{cluster: {engines: 1, profile: nope}}", "profile"));
  EXPECT_TRUE(refused_naming(
      "{cluster: {engines: 1, profile: h100-qwen2.5-7b}, policies: [{policy: random, overlap: x}]}",
      "overlap"));
  EXPECT_FALSE(parse_scenario("[1, 2", "", kNoFiles).ok());
  EXPECT_TRUE(refused_naming("{clustr: {}}", "clustr"));
}

TEST(Scenario, GroupsAndPolicyParams) {
  auto s = parse_scenario(R"(
cluster:
  groups:
    - {count: 2, profile: h100-qwen2.5-7b, zone: a}
    - {count: 3, profile: 2xh100-qwen3-32b, num_gpu_blocks: 100, rack: r1}
policies:
  - {name: w2, policy: kv-cost, params: {overlap_weight: 2, temperature: 0.5}, overlap: both}
)" + kChatWorkload,
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
)" + kChatWorkload,
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
  EXPECT_TRUE(refused_naming(
      "{cluster: {engines: 1, profile: h100-qwen2.5-7b}, policies: [{policy: random, "
      "gateway_replicas: {count: 0}}]}",
      "gateway_replicas"));
  EXPECT_TRUE(refused_naming(
      "{cluster: {engines: 1, profile: h100-qwen2.5-7b}, policies: [{policy: random, "
      "gateway_replicas: {cout: 2}}]}",
      "cout"));
}

TEST(Scenario, ApproxHostTier) {
  auto s = parse_scenario(R"(
cluster: {engines: 1, profile: h100-qwen2.5-7b}
policies:
  - {name: flat, policy: kv-cost, overlap: approx, approx: {ttl_s: 30}}
  - {name: tiered, policy: kv-cost, overlap: approx,
     approx: {ttl_s: 30, host_ttl_s: 90, host_capacity_pairs: 1000}}
)" + kChatWorkload,
                          "", kNoFiles);
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(s->policies[0].approx.ttl, 30 * kSecond);
  EXPECT_EQ(s->policies[0].approx.host_ttl, 0);  // absent: no host tier
  EXPECT_EQ(s->policies[1].approx.host_ttl, 90 * kSecond);
  EXPECT_EQ(s->policies[1].approx.host_capacity_pairs, 1000u);
  EXPECT_TRUE(refused_naming(
      "{cluster: {engines: 1, profile: h100-qwen2.5-7b}, policies: [{policy: random, "
      "approx: {host_ttl_s: -1}}]}",
      "approx.host_ttl_s"));
  EXPECT_TRUE(refused_naming(
      "{cluster: {engines: 1, profile: h100-qwen2.5-7b}, policies: [{policy: random, "
      "approx: {host_ttl: 5}}]}",
      "host_ttl"));
}

TEST(Scenario, HostAndDiskTiersOfTheEngines) {
  auto s = parse_scenario(R"(
cluster:
  groups:
    - {count: 1, profile: h100-qwen2.5-7b}
    - {count: 1, profile: h100-qwen2.5-7b, num_host_blocks: 100, num_disk_blocks: 1000,
       host_gbps: 25, disk_gbps: 2.5}
policies:
  - {name: tiered, policy: kv-cost, params: {disk_block_credit: 0.3}, overlap: precise}
)" + kChatWorkload,
                          "", kNoFiles);
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(s->engines[0].config.num_disk_blocks, 0u);  // absent: no disk tier
  EXPECT_EQ(s->engines[1].config.num_host_blocks, 100u);
  EXPECT_EQ(s->engines[1].config.num_disk_blocks, 1000u);
  EXPECT_DOUBLE_EQ(s->engines[1].config.host_bytes_per_s, 25e9);
  EXPECT_DOUBLE_EQ(s->engines[1].config.disk_bytes_per_s, 2.5e9);
  EXPECT_TRUE(refused_naming(
      "{cluster: {engines: 1, profile: h100-qwen2.5-7b, disk_gbps: -1}, policies: [{policy: "
      "random}]}",
      "disk_gbps"));
}

}  // namespace scenario_test
}  // namespace kvgate::workload
