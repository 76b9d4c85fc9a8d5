// One router configuration, three shells: the same text gives the same RouterConfig in
// `kvgate serve` (a pool's router: section), `kvgate sim` (a scenario's policy entry) and
// the admin API (PUT /admin/pools/NAME/policy). All three call route::read_router_section;
// this test keeps them from growing dialects again.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <string>

#include "env/file.h"
#include "gateway/common/config.h"
#include "gateway/control/admin_json.h"
#include "workload/scenario.h"

namespace kvgate {
namespace {

// A flow mapping: YAML for serve and sim, JSON for the admin API.
constexpr const char* kRouter =
    R"({"policy": "kv-cost", "params": {"overlap_weight": 3, "temperature": 0.25},)"
    R"( "filters": ["saturation"], "overlap": "both", "record_decisions": false,)"
    R"( "prefill_tokens_per_second": 20000,)"
    R"( "saturation": {"queue_threshold": 7, "kv_threshold": 0.9, "critical_max_waiting": 12,)"
    R"( "shed": false, "metrics_max_age": "2s"},)"
    R"( "pd": {"mode": "off", "locality_weight": 8, "local_prefill_max_tokens": 128},)"
    R"( "early_reject": {"enabled": true, "max_usage": 0.9, "decode_seconds_per_token": 0.02,)"
    R"( "predict": false},)"
    R"( "session_affinity": {"header": "x-conv-id", "capacity": 1000, "idle_ttl": "10m",)"
    R"( "max_extra_requests": 4, "max_load_ratio": 2}})";

std::string rendered(const route::RouterConfig& c) {
  return boost::json::serialize(gateway::router_config_json(c));
}

route::RouterConfig from_serve(const std::string& router) {
  const std::string yaml =
      "listeners: [{address: 127.0.0.1, port: 0}]\npools:\n  p:\n    router: " + router +
      "\n    endpoints: [http://127.0.0.1:9]\n"
      "models:\n  - {name: m, pool: p}\n";
  auto c = gateway::parse_gateway_config(yaml, "gateway.yaml");
  EXPECT_TRUE(c.ok()) << c.error();
  return c ? c->pools.at(0).router : route::RouterConfig{};
}

route::RouterConfig from_sim(const std::string& router) {
  const std::string yaml =
      "name: t\nseed: 1\ncluster: {engines: 1, profile: 2xh100-qwen3-32b}\n"
      "gateway: {model: m}\npolicies:\n  - " +
      router +
      "\nworkload:\n  kind: shared_prefix\n  shared_prefix: {groups: 1, prompts_per_group: 1,"
      " system_prompt_tokens: 10, question_tokens: 10, output_tokens: 1}\n"
      "  arrivals: {kind: poisson, stages: [{qps: 1, duration_s: 1}]}\n";
  auto s = workload::parse_scenario(yaml, ".", env::read_file);
  EXPECT_TRUE(s.ok()) << s.error();
  return s ? s->policies.at(0).router : route::RouterConfig{};
}

route::RouterConfig from_admin(const std::string& router) {
  auto c = gateway::apply_policy_body(route::RouterConfig{}, router, /*replace=*/true);
  EXPECT_TRUE(c.ok()) << c.error();
  return c ? *c : route::RouterConfig{};
}

TEST(RouterConfigShells, TheSameTextGivesTheSameConfigEverywhere) {
  const route::RouterConfig serve = from_serve(kRouter);
  const std::string want = rendered(serve);
  EXPECT_EQ(rendered(from_sim(kRouter)), want);
  EXPECT_EQ(rendered(from_admin(kRouter)), want);
  // And it is what the text says, not three times the same default.
  EXPECT_EQ(serve.overlap_source, route::OverlapSource::kBoth);
  EXPECT_FALSE(serve.saturation.shed);
  EXPECT_EQ(serve.saturation.metrics_max_age, 2 * kSecond);
  EXPECT_TRUE(serve.early_reject.enabled);
  EXPECT_EQ(serve.pd.mode, route::PdMode::kOff);
  EXPECT_TRUE(serve.session_affinity.enabled);  // the section turns it on
  EXPECT_EQ(serve.session_affinity.header, "x-conv-id");
  EXPECT_EQ(serve.session_affinity.idle_ttl, 600 * kSecond);
}

TEST(RouterConfigShells, TheDefaultsAreTheSameEverywhere) {
  const std::string text = R"({"policy": "kv-cost"})";
  const std::string want = rendered(route::RouterConfig{});
  EXPECT_EQ(rendered(from_serve(text)), want);
  EXPECT_EQ(rendered(from_sim(text)), want);
  EXPECT_EQ(rendered(from_admin(text)), want);
}

TEST(RouterConfigShells, AnUnknownKeyIsAnErrorEverywhere) {
  const std::string bad = R"({"policy": "kv-cost", "overlap_weight": 3})";
  auto serve = gateway::parse_gateway_config(
      "listeners: [{address: 127.0.0.1, port: 0}]\npools:\n  p:\n    router: " + bad +
          "\n    endpoints: [http://127.0.0.1:9]\nmodels:\n  - {name: m, pool: p}\n",
      "gateway.yaml");
  ASSERT_FALSE(serve.ok());
  EXPECT_NE(serve.error().find("pools.p.router.overlap_weight: unknown field"), std::string::npos)
      << serve.error();
  auto admin = gateway::apply_policy_body(route::RouterConfig{}, bad, true);
  ASSERT_FALSE(admin.ok());
  EXPECT_NE(admin.error().find("overlap_weight: unknown field"), std::string::npos);
}

}  // namespace
}  // namespace kvgate
