// A pool's `autoscale:` section in the gateway config: the core's policy fields, the
// actuator, the interval and window; errors name the file, the field and the line.
#include "gateway/common/autoscale_config.h"

#include <gtest/gtest.h>

#include "gateway/common/config.h"

namespace kvgate::gateway {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace autoscale_config_test {

// Lines 1..: the autoscale section's fields start on line 6.
std::string fleet(const std::string& autoscale, const std::string& endpoints = "") {
  return "pools:\n"
         "  local:\n"
         "    router: {policy: round-robin}\n" +
         endpoints + "    autoscale:\n" + autoscale +
         "models:\n"
         "  - name: m\n"
         "    pool: local\n";
}

std::string error_of(const std::string& yaml) {
  auto c = parse_gateway_config(yaml, "f.yaml");
  return c ? std::string("OK") : c.error();
}

TEST(AutoscaleConfig, LocalActuatorPoolNeedsNoEndpoints) {
  auto c = parse_gateway_config(fleet("      signal: waiting\n"
                                      "      target: 2\n"
                                      "      min_replicas: 1\n"
                                      "      max_replicas: 3\n"
                                      "      interval: 250ms\n"
                                      "      window: 10s\n"
                                      "      behavior:\n"
                                      "        scale_down: {stabilization_window: 2s}\n"
                                      "      cold_start: {startup_time: 2s, young_age: 0s}\n"
                                      "      actuator:\n"
                                      "        kind: local\n"
                                      "        command: \"kvgate engine --port {port} "
                                      "--model 'a b' --time-scale 0.01\"\n"
                                      "        drain_timeout: 20s\n"
                                      "        log_output: true\n"),
                                "f.yaml");
  ASSERT_TRUE(c) << c.error();
  const PoolConfig& p = c->pools[0];
  EXPECT_TRUE(p.endpoints.empty());
  ASSERT_TRUE(p.autoscale);
  const PoolAutoscaleConfig& a = *p.autoscale;
  EXPECT_EQ(a.policy.signal, scale::Signal::kWaiting);
  EXPECT_DOUBLE_EQ(a.policy.target, 2);
  EXPECT_EQ(a.policy.min_replicas, 1);
  EXPECT_EQ(a.policy.max_replicas, 3);
  EXPECT_EQ(a.policy.behavior.scale_down.stabilization_window, 2 * kSecond);
  EXPECT_EQ(a.policy.startup_time, 2 * kSecond);
  EXPECT_EQ(a.policy.young_age, 0);
  EXPECT_EQ(a.interval.count(), 250);
  EXPECT_EQ(a.window, 10 * kSecond);
  EXPECT_EQ(a.actuator, ActuatorKind::kLocal);
  EXPECT_EQ(a.local.command, (std::vector<std::string>{"kvgate", "engine", "--port", "{port}",
                                                       "--model", "a b", "--time-scale", "0.01"}));
  EXPECT_EQ(a.local.drain_timeout.count(), 20000);
  EXPECT_EQ(a.local.stop_grace.count(), 10000);  // default
  EXPECT_TRUE(a.local.log_output);
  EXPECT_TRUE(a.local.restart_crashed);
}

TEST(AutoscaleConfig, CommandAsAList) {
  auto c = parse_gateway_config(
      fleet("      actuator:\n"
            "        kind: local\n"
            "        command: [vllm, serve, Qwen/Qwen3-0.6B, --port, \"{port}\"]\n"),
      "f.yaml");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->pools[0].autoscale->local.command,
            (std::vector<std::string>{"vllm", "serve", "Qwen/Qwen3-0.6B", "--port", "{port}"}));
  // Defaults: the HPA's, one decision a second over a 30 s window.
  EXPECT_EQ(c->pools[0].autoscale->interval.count(), 1000);
  EXPECT_EQ(c->pools[0].autoscale->window, 30 * kSecond);
  EXPECT_EQ(c->pools[0].autoscale->policy.target, 4);
}

TEST(AutoscaleConfig, NoActuatorExportsOnlyAndKeepsTheEndpoints) {
  auto c = parse_gateway_config(fleet("      signal: kv_usage\n"
                                      "      target: 0.7\n",
                                      "    endpoints: [http://127.0.0.1:8001]\n"),
                                "f.yaml");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->pools[0].autoscale->actuator, ActuatorKind::kNone);
  EXPECT_EQ(c->pools[0].endpoints.size(), 1u);
  EXPECT_EQ(c->pools[0].autoscale->policy.signal, scale::Signal::kKvUsage);
}

TEST(AutoscaleConfig, Kubernetes) {
  auto c = parse_gateway_config(fleet("      actuator:\n"
                                      "        kind: kubernetes\n"
                                      "        namespace: llm\n"
                                      "        statefulset: qwen-decode\n"
                                      "        api_server: http://127.0.0.1:8001\n",
                                      "    endpoints: [http://127.0.0.1:8001]\n"),
                                "f.yaml");
  ASSERT_TRUE(c) << c.error();
  const KubernetesReplicaConfig& k = c->pools[0].autoscale->kubernetes;
  EXPECT_EQ(c->pools[0].autoscale->actuator, ActuatorKind::kKubernetes);
  EXPECT_EQ(k.target.ns, "llm");
  EXPECT_EQ(k.target.kind, io::KubeKind::kStatefulSet);
  EXPECT_EQ(k.target.name, "qwen-decode");
  EXPECT_EQ(k.api_server, "http://127.0.0.1:8001");
}

TEST(AutoscaleConfig, KubernetesFromAKubeconfigRelativeToTheConfigFile) {
  auto c = parse_gateway_config(fleet("      actuator:\n"
                                      "        kind: kubernetes\n"
                                      "        deployment: vllm\n"
                                      "        kubeconfig: kube/config\n",
                                      "    endpoints: [http://127.0.0.1:8001]\n"),
                                "/etc/kvgate/f.yaml");
  ASSERT_TRUE(c) << c.error();
  const KubernetesReplicaConfig& k = c->pools[0].autoscale->kubernetes;
  EXPECT_EQ(k.kubeconfig, "/etc/kvgate/kube/config");
  EXPECT_EQ(k.target.ns, "");  // the kubeconfig context's, when the actuator starts
  EXPECT_EQ(error_of(fleet("      actuator:\n"
                           "        kind: kubernetes\n"
                           "        deployment: vllm\n"
                           "        api_server: http://127.0.0.1:8001\n"
                           "        kubeconfig: kube/config\n",
                           "    endpoints: [http://127.0.0.1:8001]\n")),
            "f.yaml:10:21: pools.local.autoscale.actuator.kubeconfig: give api_server or "
            "kubeconfig, not both");
}

TEST(AutoscaleConfig, ErrorsNameTheFieldAndLine) {
  // The core's own fields, through the core's parser: its line numbers are the file's.
  EXPECT_EQ(error_of(fleet("      signal: queue\n")),
            "f.yaml:5:15: pools.local.autoscale.signal: unknown signal 'queue'");
  EXPECT_EQ(error_of(fleet("      targte: 3\n")),
            "f.yaml:5:7: pools.local.autoscale.targte: unknown field");
  // Cross-field validation names the section's line.
  std::string e = error_of(fleet("      min_replicas: 5\n      max_replicas: 2\n"));
  EXPECT_TRUE(e.starts_with("f.yaml:5:7: pools.local.autoscale.max_replicas: ")) << e;
  // kvgate serve's fields.
  EXPECT_EQ(error_of(fleet("      interval: 10ms\n")),
            "f.yaml:5:17: pools.local.autoscale.interval: 10 ms is outside [50, 3600000] ms");
  EXPECT_EQ(error_of(fleet("      actuator: {kind: docker}\n")),
            "f.yaml:5:24: pools.local.autoscale.actuator.kind: expected local, kubernetes or "
            "none, got 'docker'");
  EXPECT_EQ(error_of(fleet("      actuator: {kind: local, command: \"kvgate engine\"}\n")),
            "f.yaml:5:40: pools.local.autoscale.actuator.command: must contain {port} (the port "
            "the replica listens on, picked by kvgate)");
  EXPECT_EQ(error_of(fleet("      actuator: {kind: local}\n")),
            "f.yaml:5:17: pools.local.autoscale.actuator.command: missing (the replica's "
            "command line)");
  EXPECT_EQ(error_of(fleet("      actuator: {kind: local, command: \"x {port}\", hots: a}\n")),
            "f.yaml:5:52: pools.local.autoscale.actuator.hots: unknown field");
  e = error_of(fleet("      actuator: {kind: kubernetes, namespace: llm}\n",
                     "    endpoints: [http://127.0.0.1:8001]\n"));
  EXPECT_TRUE(e.find("deployment: NAME or statefulset: NAME") != std::string::npos) << e;
  // A local pool's replicas are launched, not listed; the others need endpoints.
  EXPECT_EQ(error_of(fleet("      actuator: {kind: local, command: \"x {port}\"}\n",
                           "    endpoints: [http://127.0.0.1:8001]\n")),
            "f.yaml:4:16: pools.local.endpoints: not used with autoscale.actuator.kind local");
  e = error_of(fleet("      target: 3\n"));
  EXPECT_TRUE(e.find("pools.local.endpoints: expected a non-empty list") != std::string::npos) << e;
}

TEST(SplitCommand, QuotesGroupBlanksSeparate) {
  EXPECT_EQ(*split_command("  a  'b c'\t\"d 'e'\" f"),
            (std::vector<std::string>{"a", "b c", "d 'e'", "f"}));
  EXPECT_EQ(*split_command("x ''"), (std::vector<std::string>{"x", ""}));
  EXPECT_TRUE(split_command("").ok());
  EXPECT_FALSE(split_command("a 'b").ok());
}

}  // namespace autoscale_config_test
}  // namespace kvgate::gateway
