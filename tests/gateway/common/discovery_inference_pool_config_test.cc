// A kubernetes discovery source that follows an InferencePool (`inference_pool:`),
// through the gateway's config parser: what it takes, and what it refuses, by line and
// field.
#include <gtest/gtest.h>

#include <string>

#include "discovery/discovery_config.h"
#include "gateway/common/config.h"

namespace kvgate::discovery::discovery_inference_pool_config_test {

Result<gateway::GatewayConfig> parse(const std::string& source) {
  return gateway::parse_gateway_config("pools:\n  main:\n    discovery:\n      sources:\n" +
                                           source + "models:\n  - {name: m, pool: main}\n",
                                       "/etc/g.yaml");
}

// The error, which must name line 5 (the source's) and `field`.
void expect_refused(const std::string& source, const std::string& field_and_message) {
  auto c = parse(source);
  ASSERT_FALSE(c) << source;
  EXPECT_NE(c.error().find("/etc/g.yaml:5:"), std::string::npos) << c.error();
  EXPECT_NE(c.error().find(field_and_message), std::string::npos) << c.error();
}

TEST(DiscoveryInferencePoolConfig, ThePoolGivesTheSelectorAndPorts) {
  auto c =
      parse("        - {kind: kubernetes, name: pool, namespace: llm, inference_pool: vllm}\n");
  ASSERT_TRUE(c) << c.error();
  ASSERT_TRUE(c->pools[0].discovery);
  const SourceConfig& s = c->pools[0].discovery->sources.at(0);
  EXPECT_EQ(s.name, "pool");
  const auto& k = std::get<KubernetesSourceConfig>(s.params);
  EXPECT_EQ(k.inference_pool, "vllm");
  EXPECT_EQ(k.ns, "llm");
  EXPECT_EQ(k.mode, KubernetesSourceConfig::Mode::kPods);
  EXPECT_TRUE(k.selector.empty());
  // The other keys of a pods source still apply (labels, annotations, timing).
  auto more = parse(
      "        - {kind: kubernetes, inference_pool: vllm-qwen3.v2, mode: pods, labels: [model],\n"
      "           resync_ms: 60000, role_label: tier}\n");
  ASSERT_TRUE(more) << more.error();
  const auto& m = std::get<KubernetesSourceConfig>(more->pools[0].discovery->sources[0].params);
  EXPECT_EQ(m.inference_pool, "vllm-qwen3.v2");
  EXPECT_EQ(m.role_label, "tier");
  EXPECT_EQ(m.resync.count(), 60000);
}

TEST(DiscoveryInferencePoolConfig, KeysThePoolWouldContradictAreRefused) {
  expect_refused("        - {kind: kubernetes, inference_pool: vllm, selector: app=vllm}\n",
                 "pools.main.discovery.sources[0].selector: not with inference_pool (the "
                 "InferencePool's spec.selector selects the pods)");
  expect_refused("        - {kind: kubernetes, inference_pool: vllm, port_name: http}\n",
                 "pools.main.discovery.sources[0].port_name: not with inference_pool (the "
                 "InferencePool's spec.targetPorts give the ports)");
  expect_refused("        - {kind: kubernetes, inference_pool: vllm, mode: endpointslices}\n",
                 "pools.main.discovery.sources[0].mode: an inference_pool selects pods");
  expect_refused("        - {kind: kubernetes, inference_pool: Vllm_Pool}\n",
                 "pools.main.discovery.sources[0].inference_pool: expected an InferencePool's "
                 "name");
  expect_refused("        - {kind: kubernetes, inference_pool: \"\"}\n",
                 "pools.main.discovery.sources[0].inference_pool: expected an InferencePool's "
                 "name");
  expect_refused("        - {kind: kubernetes, inferencepool: vllm}\n",
                 "pools.main.discovery.sources[0].inferencepool: unknown field");
  // Neither a selector nor a pool: the message names both ways.
  expect_refused("        - {kind: kubernetes, namespace: llm}\n",
                 "pools.main.discovery.sources[0].selector: required with mode pods (e.g. "
                 "app=vllm), or an inference_pool");
}

}  // namespace kvgate::discovery::discovery_inference_pool_config_test
