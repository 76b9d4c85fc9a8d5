// The autoscaler's inputs the gateway counts (token totals and their spread, latency
// histograms) and the autoscaler metrics it exports.
#include <gtest/gtest.h>

#include "core/metrics/prometheus_text.h"
#include "core/scale/usage_window.h"
#include "gateway/common/metrics.h"

namespace kvgate::gateway {
namespace {

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
  EXPECT_DOUBLE_EQ(u.completion_tokens_sq, 10 * 10 + 5 * 5 + 100 * 100);
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
