// The autoscaler's signals from the gateway's state: endpoint scrapes as the router holds
// them, the usage window, replicas of an export-only pool; and the exported metrics.
#include "gateway/autoscale_signals.h"

#include <gtest/gtest.h>

#include "core/kv/approx_index.h"
#include "core/kv/precise_index.h"
#include "core/metrics/prometheus_text.h"
#include "core/scale/cold_start.h"
#include "gateway/metrics.h"

namespace kvgate::gateway {
namespace {

EndpointView endpoint(route::EndpointId id, uint32_t waiting, uint32_t running, double kv,
                      Nanos scraped_at, route::Health health = route::Health::kHealthy) {
  return {.id = id,
          .url = "http://10.0.0." + std::to_string(id) + ":8000",
          .health = health,
          .metrics =
              route::ScrapedMetrics{
                  .waiting = waiting, .running = running, .kv_usage = kv, .scraped_at = scraped_at},
          .in_flight = running + waiting,
          .added_at = 0};
}

TEST(BuildSignals, SumsQueuesAndAveragesKvOverServingEndpoints) {
  const Nanos now = 100 * kSecond;
  std::vector<EndpointView> v = {
      endpoint(0, 6, 10, 0.5, now - kSecond), endpoint(1, 2, 8, 0.3, now - kSecond),
      endpoint(2, 50, 50, 1.0, now - kSecond, route::Health::kDraining),  // leaving: not load
      endpoint(3, 40, 40, 0.9, now - 60 * kSecond),  // stopped answering a minute ago
  };
  v.push_back({.id = 4, .url = "http://10.0.0.4:8000"});  // never scraped
  scale::UsageRates usage;
  usage.prompt_tokens_per_s = 1000;
  usage.generation_tokens_per_s = 200;
  usage.mean_prompt_tokens = 500;
  usage.mean_generation_tokens = 100;
  usage.ttft = {.p50 = 0.1, .p90 = 0.2, .p99 = 0.3, .mean = 0.12, .samples = 10};
  scale::PoolSignals s = build_signals(v, usage, now, 5 * kSecond);
  EXPECT_DOUBLE_EQ(s.waiting, 8);
  EXPECT_DOUBLE_EQ(s.running, 18);
  EXPECT_DOUBLE_EQ(s.kv_usage, 0.4);
  EXPECT_DOUBLE_EQ(s.prompt_tokens_per_s, 1000);
  EXPECT_DOUBLE_EQ(s.generation_tokens_per_s, 200);
  EXPECT_DOUBLE_EQ(s.mean_prompt_tokens, 500);
  EXPECT_DOUBLE_EQ(s.mean_generation_tokens, 100);
  EXPECT_EQ(s.ttft.samples, 10u);
  EXPECT_DOUBLE_EQ(s.ttft.p90, 0.2);
  EXPECT_TRUE(s.replicas.empty());
}

TEST(BuildSignals, EmptyPoolIsAllZero) {
  scale::PoolSignals s = build_signals({}, {}, 0, kSecond);
  EXPECT_EQ(s.waiting, 0);
  EXPECT_EQ(s.kv_usage, 0);
}

TEST(ReplicasFromEndpoints, PhasesFollowHealthAndTeachNoStartupTime) {
  std::vector<EndpointView> v = {
      endpoint(0, 1, 2, 0.1, 0),
      endpoint(1, 0, 0, 0.0, 0, route::Health::kDraining),
      endpoint(2, 0, 0, 0.0, 0, route::Health::kUnhealthy),
  };
  v[0].added_at = 5 * kSecond;
  const Nanos offset = 1'000'000 * kSecond;
  auto r = replicas_from_endpoints(v, offset);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].id, "http://10.0.0.0:8000");
  EXPECT_EQ(r[0].phase, scale::ReplicaPhase::kReady);
  EXPECT_EQ(r[0].launched_at, offset + 5 * kSecond);
  EXPECT_EQ(r[0].in_flight, 3u);
  EXPECT_EQ(r[1].phase, scale::ReplicaPhase::kDraining);
  EXPECT_EQ(r[2].phase, scale::ReplicaPhase::kStarting);
  // Nobody launched them: the startup tracker must not learn a 0 s startup from them.
  scale::StartupTracker tracker(120 * kSecond);
  tracker.observe(r);
  EXPECT_EQ(tracker.observations(), 0u);
  EXPECT_EQ(tracker.expected(), 120 * kSecond);
}

TEST(ViewEndpoints, ReadsTheRouterPool) {
  kv::PreciseIndex precise({.block_size = 16});
  kv::ApproxIndex approx({});
  route::RouterConfig rc;
  rc.policy.name = "round-robin";
  auto router = route::Router::create(rc, {.precise = &precise, .approx = &approx});
  ASSERT_TRUE(router) << router.error();
  auto a = (*router)->add_endpoint({.url = "http://127.0.0.1:9001"}, 7);
  ASSERT_TRUE(a);
  (*router)->pool().on_metrics(*a, {.waiting = 3, .running = 4, .kv_usage = 0.25}, 9);
  auto v = view_endpoints(**router);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].url, "http://127.0.0.1:9001");
  EXPECT_EQ(v[0].added_at, 7);
  ASSERT_TRUE(v[0].metrics);
  EXPECT_EQ(v[0].metrics->waiting, 3u);
  EXPECT_EQ(v[0].metrics->scraped_at, 9);
}

TEST(AutoscalerMetrics, ExportedForKedaAndDashboards) {
  GatewayMetrics m;
  m.tokens("m1", "t", 100, 10, 0);
  m.tokens("m1", "u", 50, 5, 0);
  m.tokens("m2", "t", 1000, 100, 0);
  m.tokens("other", "t", 7, 7, 0);
  m.ttft("m1", 0.05);
  m.ttft("m2", 0.5);
  m.itl("m2", 0.02);
  std::vector<std::string> models{"m1", "m2"};
  scale::UsageTotals u = m.usage(models);
  EXPECT_EQ(u.prompt_tokens, 1150u);
  EXPECT_EQ(u.completion_tokens, 115u);
  EXPECT_EQ(u.requests, 3u);
  EXPECT_EQ(u.ttft.count, 2u);
  EXPECT_EQ(u.itl.count, 1u);

  AutoscalerGauges g;
  g.desired = 3;
  g.current = 1;
  g.ready = 1;
  g.starting = 0;
  g.min = 1;
  g.max = 4;
  g.demand = 2.5;
  g.signal = "waiting";
  g.signal_value = 5;
  g.direction = "up";
  g.limited_by = "";
  m.autoscaler("local", g);
  g.direction = "hold";
  g.limited_by = "max replicas";
  g.desired = 4;
  m.autoscaler("local", g);
  auto parsed = metrics::parse_prometheus_text(m.render());
  ASSERT_TRUE(parsed) << parsed.error();
  EXPECT_EQ(parsed->value("kvgate_autoscaler_desired_replicas", {{"pool", "local"}}), 4);
  EXPECT_EQ(parsed->value("kvgate_autoscaler_current_replicas", {{"pool", "local"}}), 1);
  EXPECT_EQ(parsed->value("kvgate_autoscaler_max_replicas", {{"pool", "local"}}), 4);
  EXPECT_EQ(parsed->value("kvgate_autoscaler_demand_replicas", {{"pool", "local"}}), 2.5);
  EXPECT_EQ(parsed->value("kvgate_autoscaler_signal", {{"pool", "local"}, {"signal", "waiting"}}),
            5);
  EXPECT_EQ(
      parsed->value("kvgate_autoscaler_decision_info",
                    {{"pool", "local"}, {"direction", "hold"}, {"limited_by", "max replicas"}}),
      1);
  EXPECT_FALSE(parsed->value("kvgate_autoscaler_decision_info",
                             {{"pool", "local"}, {"direction", "up"}, {"limited_by", ""}}))
      << "only the latest decision";
  EXPECT_EQ(
      parsed->value("kvgate_autoscaler_decisions_total", {{"pool", "local"}, {"direction", "up"}}),
      1);
  EXPECT_EQ(parsed->value("kvgate_autoscaler_decisions_total",
                          {{"pool", "local"}, {"direction", "hold"}}),
            1);
}

TEST(AutoscalerMetrics, AbsentWithoutAutoscaledPools) {
  GatewayMetrics m;
  EXPECT_EQ(m.render().find("kvgate_autoscaler_"), std::string::npos);
}

}  // namespace
}  // namespace kvgate::gateway
