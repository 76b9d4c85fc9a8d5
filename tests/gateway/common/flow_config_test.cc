// A pool's flow_control section and the keys file's flow-control fields.
#include "gateway/common/flow_config.h"

#include <gtest/gtest.h>

#include "gateway/common/config.h"
#include "gateway/data/keys.h"

namespace kvgate::gateway {
namespace {

std::string config_with(const std::string& flow) {
  return "listeners:\n  - address: 127.0.0.1\n    port: 0\n"
         "pools:\n  main:\n    flow_control:\n" +
         flow +
         "    endpoints:\n      - http://127.0.0.1:8001\n"
         "models:\n  - name: m\n    pool: main\n";
}

TEST(FlowConfig, ParsesEveryKey) {
  auto c = parse_gateway_config(config_with("      shed_sheddable: true\n"
                                            "      band_order: weighted\n"
                                            "      band_weights: {critical: 8, standard: 2}\n"
                                            "      starvation_bound_s: 2.5\n"
                                            "      max_requests: 50\n"
                                            "      max_tokens: 100000\n"
                                            "      tenant_max_requests: 5\n"
                                            "      tenant_max_tokens: 9000\n"
                                            "      max_wait_s: {critical: 120, sheddable: 1}\n"
                                            "      input_weight: 1.5\n"
                                            "      output_weight: 3\n"
                                            "      default_output_tokens: 64\n"
                                            "      targets_first: true\n"
                                            "      prefill_threshold: 8192\n"),
                                "f.yaml");
  ASSERT_TRUE(c) << c.error();
  const route::FlowQueueConfig& f = c->pools[0].flow;
  EXPECT_TRUE(f.enabled);  // a section turns it on
  EXPECT_TRUE(f.shed_sheddable);
  EXPECT_EQ(f.band_order, route::BandOrder::kWeighted);
  EXPECT_EQ(f.band_weights[0], 8);
  EXPECT_EQ(f.band_weights[1], 2);
  EXPECT_EQ(f.band_weights[2], 1);
  EXPECT_EQ(f.starvation_bound, 2'500'000'000);
  EXPECT_EQ(f.max_requests, 50u);
  EXPECT_EQ(f.max_tokens, 100000u);
  EXPECT_EQ(f.tenant_max_requests, 5u);
  EXPECT_EQ(f.tenant_max_tokens, 9000u);
  EXPECT_EQ(f.max_wait[0], 120 * kSecond);
  EXPECT_EQ(f.max_wait[1], 30 * kSecond);  // the default
  EXPECT_EQ(f.max_wait[2], kSecond);
  EXPECT_EQ(f.input_weight, 1.5);
  EXPECT_EQ(f.output_weight, 3);
  EXPECT_EQ(f.default_output_tokens, 64u);
  EXPECT_TRUE(f.targets_first);
  EXPECT_EQ(f.prefill_threshold, 8192u);

  auto one = parse_gateway_config(config_with("      max_wait_s: 600\n"), "f.yaml");
  ASSERT_TRUE(one) << one.error();
  EXPECT_EQ(one->pools[0].flow.max_wait[2], 600 * kSecond);
  auto off = parse_gateway_config(config_with("      enabled: false\n"), "f.yaml");
  ASSERT_TRUE(off) << off.error();
  EXPECT_FALSE(off->pools[0].flow.enabled);
  EXPECT_FALSE(off->pools[0].flow.targets_first);       // the default
  EXPECT_EQ(off->pools[0].flow.prefill_threshold, 0u);  // off
}

TEST(FlowConfig, NoSectionNoQueue) {
  auto c = parse_gateway_config(
      "listeners:\n  - address: 127.0.0.1\n    port: 0\n"
      "pools:\n  main:\n    endpoints:\n      - http://127.0.0.1:8001\n"
      "models:\n  - name: m\n    pool: main\n",
      "f.yaml");
  ASSERT_TRUE(c) << c.error();
  EXPECT_FALSE(c->pools[0].flow.enabled);
}

TEST(FlowConfig, ErrorsNameFileLineAndField) {
  auto typo = parse_gateway_config(config_with("      max_request: 5\n"), "fleet.yaml");
  ASSERT_FALSE(typo);
  EXPECT_NE(typo.error().find("fleet.yaml:7:"), std::string::npos) << typo.error();
  EXPECT_NE(typo.error().find("pools.main.flow_control.max_request"), std::string::npos)
      << typo.error();
  auto bad = parse_gateway_config(config_with("      max_wait_s: {standard: -1}\n"), "fleet.yaml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("max_wait_s"), std::string::npos) << bad.error();
  auto zero = parse_gateway_config(config_with("      max_requests: 0\n"), "fleet.yaml");
  ASSERT_FALSE(zero);
  EXPECT_NE(zero.error().find("max_requests must be > 0"), std::string::npos) << zero.error();
  auto order = parse_gateway_config(config_with("      band_order: fifo\n"), "fleet.yaml");
  ASSERT_FALSE(order);
  EXPECT_NE(order.error().find("band_order"), std::string::npos) << order.error();
  auto first = parse_gateway_config(config_with("      targets_first: sometimes\n"), "fleet.yaml");
  ASSERT_FALSE(first);
  EXPECT_NE(first.error().find("fleet.yaml:7:"), std::string::npos) << first.error();
  EXPECT_NE(first.error().find("pools.main.flow_control.targets_first"), std::string::npos)
      << first.error();
  auto prefill = parse_gateway_config(config_with("      prefill_threshold: -1\n"), "fleet.yaml");
  ASSERT_FALSE(prefill);
  EXPECT_NE(prefill.error().find("fleet.yaml:7:"), std::string::npos) << prefill.error();
  EXPECT_NE(prefill.error().find("pools.main.flow_control.prefill_threshold"), std::string::npos)
      << prefill.error();
}

TEST(FlowConfig, KeysCarryWeightAndDeadline) {
  auto store = KeyStore::parse("keys:\n  - sha256: " + to_hex(sha256("k1")) +
                                   "\n    tenant: gold\n    weight: 2.5\n    deadline_ms: 800\n"
                                   "  - sha256: " +
                                   to_hex(sha256("k2")) + "\n    tenant: free\n",
                               "keys.yaml");
  ASSERT_TRUE(store) << store.error();
  const Tenant* gold = store->authenticate("k1");
  ASSERT_NE(gold, nullptr);
  EXPECT_EQ(gold->weight, 2.5);
  EXPECT_EQ(gold->deadline_ms, 800);
  const Tenant* free = store->authenticate("k2");
  ASSERT_NE(free, nullptr);
  EXPECT_EQ(free->weight, 1);
  EXPECT_EQ(free->deadline_ms, 0);
  auto bad = KeyStore::parse(
      "keys:\n  - sha256: " + to_hex(sha256("k")) + "\n    tenant: t\n    weight: 0\n",
      "keys.yaml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("keys[0].weight"), std::string::npos) << bad.error();
}

}  // namespace
}  // namespace kvgate::gateway
