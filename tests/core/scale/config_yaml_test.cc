#include "core/scale/config_yaml.h"

#include <gtest/gtest.h>

#include "core/scale/autoscaler.h"
#include "core/scale/config_yaml_node.h"

namespace kvgate::scale {
namespace {

constexpr const char* kFull = R"(
autoscale:
  policy: target
  min_replicas: 2
  max_replicas: 32
  gpus_per_replica: 2
  signal: kv_usage
  target: 0.7
  tolerance: 0.05
  panic: {stable_window: 60s, panic_window: 6s, threshold: 2.0}
  behavior:
    scale_up:
      stabilization_window: 0s
      select_policy: max
      policies:
        - {type: pods, value: 4, period: 15s}
        - {type: percent, value: 100, period: 15s}
    scale_down:
      stabilization_window: 5m
      policies: [{type: percent, value: 50, period: 1m}]
  forecast: {method: holt_winters, season: 24h, slot: 5m, alpha: 0.2, beta: 0.01, gamma: 0.3}
  schedule:
    utc_offset: "+08:00"
    windows:
      - {from: "06:00", to: "24:00", min_replicas: 20}
      - {from: "00:00", to: "06:00", max_replicas: 8}
  cold_start: {aware: true, startup_time: 200s, stuck_factor: 3, young_age: 10m}
)";

TEST(ConfigYaml, ParsesEveryField) {
  Result<AutoscaleConfig> r = parse_autoscale_yaml(kFull);
  ASSERT_TRUE(r.ok()) << r.error();
  const AutoscaleConfig& c = *r;
  EXPECT_EQ(c.policy, PolicyKind::kTarget);
  EXPECT_EQ(c.min_replicas, 2);
  EXPECT_EQ(c.max_replicas, 32);
  EXPECT_EQ(c.gpus_per_replica, 2);
  EXPECT_EQ(c.signal, Signal::kKvUsage);
  EXPECT_DOUBLE_EQ(c.target, 0.7);
  EXPECT_DOUBLE_EQ(c.tracking.tolerance, 0.05);
  EXPECT_TRUE(c.tracking.panic.enabled);
  EXPECT_EQ(c.tracking.panic.panic_window, 6 * kSecond);
  ASSERT_EQ(c.behavior.scale_up.policies.size(), 2u);
  EXPECT_EQ(c.behavior.scale_up.policies[1].type, PolicyType::kPercent);
  EXPECT_EQ(c.behavior.scale_down.stabilization_window, 300 * kSecond);
  EXPECT_EQ(c.behavior.scale_down.policies[0].value, 50);
  EXPECT_EQ(c.behavior.scale_down.policies[0].period, 60 * kSecond);
  EXPECT_EQ(c.forecast.method, ForecastMethod::kHoltWinters);
  EXPECT_EQ(c.forecast.slot, 300 * kSecond);
  EXPECT_EQ(c.schedule.utc_offset, hh_mm(8, 0));
  ASSERT_EQ(c.schedule.windows.size(), 2u);
  EXPECT_EQ(c.schedule.windows[0].end, kDay);
  EXPECT_EQ(c.schedule.windows[0].min_replicas, 20);
  EXPECT_EQ(c.schedule.windows[1].max_replicas, 8);
  EXPECT_EQ(c.startup_time, 200 * kSecond);
  EXPECT_EQ(c.young_age, 600 * kSecond);
  EXPECT_TRUE(Autoscaler::make(c).ok());
}

TEST(ConfigYaml, DefaultsAreHpaAndKnatives) {
  Result<AutoscaleConfig> r = parse_autoscale_yaml("autoscale: {signal: waiting, target: 4}");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_DOUBLE_EQ(r->tracking.tolerance, 0.1);
  EXPECT_FALSE(r->tracking.panic.enabled);
  EXPECT_EQ(r->behavior.scale_down.stabilization_window, 300 * kSecond);
  EXPECT_EQ(r->behavior.scale_up.stabilization_window, 0);
  EXPECT_TRUE(r->cold_start_aware);
  // The section itself, without the `autoscale:` key, parses too.
  EXPECT_TRUE(parse_autoscale_yaml("signal: running\ntarget: 8\n").ok());
}

TEST(ConfigYaml, PlannerWithProfiles) {
  Result<AutoscaleConfig> r = parse_autoscale_yaml(R"(
autoscale:
  policy: planner
  max_replicas: 8
  planner:
    role: decode
    ttft_target: 500ms
    itl_target: 30ms
    latency_stat: p90
    correction: {min: 0.7, max: 1.5}
    decode_profile:
      - context_tokens: 1000
        points: [{itl: 10ms, tokens_per_s: 500}, {itl: 40ms, tokens_per_s: 2500}]
      - context_tokens: 3000
        points: [{itl: 10ms, tokens_per_s: 300}, {itl: 40ms, tokens_per_s: 1500}]
)");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->policy, PolicyKind::kPlanner);
  EXPECT_EQ(r->role, PoolRole::kDecode);
  EXPECT_DOUBLE_EQ(r->planner.itl_s, 0.030);
  EXPECT_DOUBLE_EQ(r->planner.max_correction, 1.5);
  EXPECT_EQ(r->latency_stat, LatencyStat::kP90);
  ASSERT_TRUE(r->decode_profile.has_value());
  EXPECT_NEAR(r->decode_profile->best_throughput(0.030, 2000), 1466.67, 0.01);
}

// `place`: how the error starts ("2:11", or "5" for the line alone); `message`: the text
// after the place ("FIELD: message"), or its beginning.
void expect_error(const char* yaml, const std::string& place, const std::string& message) {
  Result<AutoscaleConfig> r = parse_autoscale_yaml(yaml);
  ASSERT_FALSE(r.ok()) << yaml;
  const std::string& e = r.error();
  EXPECT_TRUE(e.starts_with(place + ":")) << e;
  const size_t at = e.find(": ");
  ASSERT_NE(at, std::string::npos) << e;
  EXPECT_EQ(e.substr(at + 2, message.size()), message) << e;
}

TEST(ConfigYaml, ErrorsNameTheFieldAndLine) {
  expect_error("autoscale:\n  signal: queue_depth\n", "2:11", "autoscale.signal: unknown signal");
  expect_error("autoscale:\n  targte: 4\n", "2", "autoscale.targte: unknown field");
  expect_error("autoscale:\n  target: four\n", "2", "autoscale.target: expected a number");
  expect_error(
      "autoscale:\n  behavior:\n    scale_up:\n      policies:\n        - {type: pod, value: 1}\n",
      "5", "autoscale.behavior.scale_up.policies[0].type: expected pods or percent");
  expect_error("autoscale:\n  cold_start: {startup_time: 3 minutes}\n", "2",
               "autoscale.cold_start.startup_time: '3 minutes' is not a duration");
  expect_error(
      "autoscale:\n  schedule:\n    windows:\n      - {from: \"25:00\", to: \"06:00\", "
      "max_replicas: 1}\n",
      "4", "autoscale.schedule.windows[0].from");
  // Cross-field checks are at the section's place (its first key).
  expect_error("autoscale:\n  min_replicas: 5\n  max_replicas: 2\n", "2",
               "autoscale.max_replicas: must be >= min_replicas");
  expect_error("autoscale:\n  policy: planner\n  planner: {role: prefill}\n", "2",
               "autoscale.planner.prefill_profile: required");
  expect_error(
      "autoscale:\n  planner:\n    role: decode\n    decode_profile:\n"
      "      - {context_tokens: 0, points: [{itl: 1ms, tokens_per_s: 1}]}\n",
      "5", "autoscale.planner.decode_profile: decode profile row 0");
  // Malformed YAML: yaml-cpp's words, at its place.
  Result<AutoscaleConfig> malformed = parse_autoscale_yaml("autoscale: [1, 2");
  ASSERT_FALSE(malformed.ok());
  EXPECT_NE(malformed.error().find("autoscale: "), std::string::npos) << malformed.error();
}

TEST(ConfigYaml, Durations) {
  EXPECT_EQ(*parse_duration("250ms"), 250 * kMillisecond);
  EXPECT_EQ(*parse_duration("1.5s"), 1500 * kMillisecond);
  EXPECT_EQ(*parse_duration("5m"), 300 * kSecond);
  EXPECT_EQ(*parse_duration("24h"), 86400 * kSecond);
  EXPECT_EQ(*parse_duration("30"), 30 * kSecond);
  EXPECT_FALSE(parse_duration("").ok());
  EXPECT_FALSE(parse_duration("-1s").ok());
  EXPECT_FALSE(parse_duration("1e300h").ok());
  EXPECT_FALSE(parse_duration("s").ok());
}

TEST(ConfigYaml, NodeEntryPointKeepsThePathGiven) {
  const YAML::Node root = YAML::Load("pools:\n  - name: a\n    autoscale: {target: -1}\n");
  Result<AutoscaleConfig> r =
      parse_autoscale_node(root["pools"][0]["autoscale"], "pools[0].autoscale");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "3:16: pools[0].autoscale.target: must be > 0");
}

}  // namespace
}  // namespace kvgate::scale
