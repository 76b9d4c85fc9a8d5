// The `discovery:` section of a pool, through the gateway's config parser, and the file
// source's endpoint schema against the config's `endpoints:`.
#include "discovery/discovery_config.h"

#include <gtest/gtest.h>

#include "discovery/endpoint_list.h"
#include "gateway/common/config.h"

namespace kvgate::discovery {
namespace {

Result<gateway::GatewayConfig> parse(const std::string& pool_body) {
  return gateway::parse_gateway_config(
      "pools:\n  main:\n" + pool_body + "models:\n  - {name: m, pool: main}\n", "/etc/g.yaml");
}

TEST(DiscoveryConfig, EverySourceKindAndTheSharedKeys) {
  auto c = parse(
      "    discovery:\n"
      "      grace_ms: 5000\n"
      "      hold_empty: false\n"
      "      hold_empty_max_ms: 60000\n"
      "      drain_timeout_ms: 1000\n"
      "      sources:\n"
      "        - {kind: file, path: eps.yaml, reread_ms: 2000}\n"
      "        - kind: dns\n"
      "          hostname: engines.llm.svc.cluster.local\n"
      "          port: 8000\n"
      "          server: 127.0.0.1:5353\n"
      "          interval_ms: 3000\n"
      "          endpoint: {role: decode, zone: z1, kv_events_port: 5557}\n"
      "        - {kind: dns, name: srv, hostname: _http._tcp.engines, record: srv}\n"
      "        - kind: kubernetes\n"
      "          namespace: llm\n"
      "          selector: app=vllm,tier=decode\n"
      "          labels: [model]\n"
      "          resync_ms: 60000\n"
      "          kubeconfig: kube/config\n");
  ASSERT_TRUE(c) << c.error();
  ASSERT_TRUE(c->pools[0].discovery);
  EXPECT_TRUE(c->pools[0].endpoints.empty());
  const DiscoveryConfig& d = *c->pools[0].discovery;
  EXPECT_EQ(d.grace.count(), 5000);
  EXPECT_FALSE(d.hold_empty);
  EXPECT_EQ(d.hold_empty_max.count(), 60000);
  EXPECT_EQ(d.drain_timeout.count(), 1000);
  ASSERT_EQ(d.sources.size(), 4u);
  EXPECT_EQ(d.sources[0].name, "file");
  EXPECT_EQ(std::get<FileSourceConfig>(d.sources[0].params).path, "/etc/eps.yaml");
  const auto& dns = std::get<DnsSourceConfig>(d.sources[1].params);
  EXPECT_EQ(dns.name, "engines.llm.svc.cluster.local");
  EXPECT_EQ(dns.port, 8000);
  EXPECT_EQ(dns.server, "127.0.0.1:5353");
  EXPECT_EQ(dns.endpoint.role, Role::kDecode);
  EXPECT_EQ(dns.endpoint.kv_events_port, 5557);
  EXPECT_EQ(d.sources[2].name, "srv");
  EXPECT_EQ(std::get<DnsSourceConfig>(d.sources[2].params).record, DnsSourceConfig::Record::kSrv);
  const auto& k = std::get<KubernetesSourceConfig>(d.sources[3].params);
  EXPECT_EQ(k.ns, "llm");
  EXPECT_EQ(k.selector, "app=vllm,tier=decode");
  EXPECT_EQ(k.labels, std::vector<std::string>{"model"});
  EXPECT_EQ(k.zone_label, "topology.kubernetes.io/zone");
  EXPECT_EQ(k.resync.count(), 60000);
  EXPECT_EQ(k.kubeconfig, "/etc/kube/config");
}

TEST(DiscoveryConfig, BesideEndpoints) {
  auto c = parse(
      "    endpoints: [http://10.0.0.1:8000]\n"
      "    discovery: {sources: [{kind: file, path: /tmp/e.yaml}]}\n");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->pools[0].endpoints.size(), 1u);
  EXPECT_TRUE(c->pools[0].discovery);
}

TEST(DiscoveryConfig, ErrorsNameTheLineAndField) {
  auto kind = parse("    discovery:\n      sources:\n        - {kind: consul}\n");
  ASSERT_FALSE(kind);
  EXPECT_EQ(kind.error(),
            "/etc/g.yaml:5:18: pools.main.discovery.sources[0].kind: unknown source kind 'consul' "
            "(expected file, dns, kubernetes)");
  auto port = parse("    discovery:\n      sources:\n        - {kind: dns, hostname: x}\n");
  ASSERT_FALSE(port);
  EXPECT_NE(port.error().find("pools.main.discovery.sources[0].port: required"), std::string::npos)
      << port.error();
  auto typo = parse("    discovery:\n      grace: 5\n      sources: [{kind: file, path: x}]\n");
  ASSERT_FALSE(typo);
  EXPECT_NE(typo.error().find("pools.main.discovery.grace: unknown field"), std::string::npos);
  auto twice =
      parse("    discovery:\n      sources: [{kind: file, path: a}, {kind: file, path: b}]\n");
  ASSERT_FALSE(twice);
  EXPECT_NE(twice.error().find("source name 'file' used twice"), std::string::npos);
  // The watched directory must exist (serve could not start without it); the file need not.
  auto no_dir = parse("    discovery: {sources: [{kind: file, path: /no/such/kvgate/e.yaml}]}\n");
  ASSERT_FALSE(no_dir);
  EXPECT_NE(no_dir.error().find("/etc/g.yaml:3:"), std::string::npos) << no_dir.error();
  EXPECT_NE(no_dir.error().find("pools.main.discovery.sources[0].path: directory /no/such/kvgate "
                                "does not exist"),
            std::string::npos)
      << no_dir.error();
  EXPECT_TRUE(parse("    discovery: {sources: [{kind: file, path: /tmp/kvgate-not-yet.yaml}]}\n"));
  auto none = parse("    discovery: {sources: []}\n");
  ASSERT_FALSE(none);
  auto selector = parse("    discovery: {sources: [{kind: kubernetes}]}\n");
  ASSERT_FALSE(selector);
  EXPECT_NE(selector.error().find("selector: required"), std::string::npos);
  auto server =
      parse("    discovery: {sources: [{kind: dns, hostname: x, port: 1, server: dns.local}]}\n");
  ASSERT_FALSE(server);
  EXPECT_NE(server.error().find("expected IPV4:PORT"), std::string::npos);
}

TEST(DiscoveryConfig, DataParallelRanksInDnsAndKubernetesSources) {
  auto c = parse(
      "    discovery:\n"
      "      sources:\n"
      "        - {kind: dns, hostname: dp.llm.svc, port: 8000, data_parallel_size: 4}\n"
      "        - kind: kubernetes\n"
      "          selector: app=vllm\n"
      "          data_parallel_size: 2\n"
      "          data_parallel_size_annotation: example.com/dp\n"
      "        - {kind: kubernetes, name: plain, selector: app=other}\n");
  ASSERT_TRUE(c) << c.error();
  const DiscoveryConfig& d = *c->pools[0].discovery;
  EXPECT_EQ(std::get<DnsSourceConfig>(d.sources[0].params).data_parallel_size, 4u);
  const auto& k = std::get<KubernetesSourceConfig>(d.sources[1].params);
  EXPECT_EQ(k.data_parallel_size, 2u);
  EXPECT_EQ(k.data_parallel_size_annotation, "example.com/dp");
  const auto& plain = std::get<KubernetesSourceConfig>(d.sources[2].params);
  EXPECT_EQ(plain.data_parallel_size, 1u);
  EXPECT_EQ(plain.data_parallel_size_annotation, "kvgate.io/data-parallel-size");

  auto zero = parse(
      "    discovery:\n"
      "      sources:\n"
      "        - {kind: dns, hostname: x, port: 1, data_parallel_size: 0}\n");
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.error(),
            "/etc/g.yaml:5:65: pools.main.discovery.sources[0].data_parallel_size: 0 is outside "
            "[1, 256]");
  auto big = parse(
      "    discovery: {sources: [{kind: kubernetes, selector: a=b, data_parallel_size: 257}]}\n");
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().find("pools.main.discovery.sources[0].data_parallel_size: 257 is outside"),
            std::string::npos)
      << big.error();
  auto word = parse(
      "    discovery: {sources: [{kind: dns, hostname: x, port: 1, data_parallel_size: many}]}\n");
  ASSERT_FALSE(word);
  EXPECT_NE(word.error().find("data_parallel_size: expected an integer, got 'many'"),
            std::string::npos)
      << word.error();
  // With the pool's kv_events_bind each rank would connect to the one SUB socket: refused,
  // as in the file source's entries.
  auto bind = parse(
      "    kv_events_bind: tcp://*:5557\n"
      "    discovery: {sources: [{kind: dns, hostname: x, port: 1, data_parallel_size: 2}]}\n");
  ASSERT_FALSE(bind);
  EXPECT_NE(bind.error().find("pools.main.discovery.sources[0].data_parallel_size: not with the "
                              "pool's kv_events_bind"),
            std::string::npos)
      << bind.error();
}

TEST(DiscoveryConfig, WithTheKubernetesActuatorAsDocumented) {
  // docs/discovery.md, "With the Kubernetes actuator": the actuator sizes the
  // Deployment, discovery brings its pods in.
  auto c = parse(
      "    warmup: {prefixes: 16}\n"
      "    autoscale:\n"
      "      signal: waiting\n"
      "      target: 2\n"
      "      min_replicas: 2\n"
      "      max_replicas: 16\n"
      "      actuator: {kind: kubernetes, namespace: llm, deployment: vllm-decode}\n"
      "    discovery:\n"
      "      sources:\n"
      "        - {kind: kubernetes, namespace: llm, selector: \"app=vllm,tier=decode\"}\n");
  ASSERT_TRUE(c) << c.error();
  EXPECT_TRUE(c->pools[0].autoscale);
  EXPECT_TRUE(c->pools[0].discovery);
}

TEST(DiscoveryConfig, WithoutEitherThePoolStillNeedsEndpoints) {
  auto c = parse("    block_size: 16\n");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().find("pools.main.endpoints"), std::string::npos);
}

TEST(EndpointList, AgreesWithTheGatewayConfigOnTheSameEndpoints) {
  // The schema lives in two parsers (the config's and this one): the same text must give
  // the same specs.
  const std::string eps =
      "      - http://10.0.0.7:8000\n"
      "      - url: http://10.0.0.8:8000\n"
      "        role: prefill\n"
      "        zone: z\n"
      "        labels: {a: b}\n";
  auto config = gateway::parse_gateway_config(
      "pools:\n  main:\n    endpoints:\n" + eps + "models:\n  - {name: m, pool: main}\n", "g.yaml");
  ASSERT_TRUE(config) << config.error();
  auto set = parse_endpoint_list(
      "endpoints:\n  - http://10.0.0.7:8000\n  - url: http://10.0.0.8:8000\n    role: prefill\n"
      "    zone: z\n    labels: {a: b}\n",
      "eps.yaml", false);
  ASSERT_TRUE(set) << set.error();
  const auto& specs = config->pools[0].endpoints;
  ASSERT_EQ(set->size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ((*set)[i].spec.url, specs[i].url);
    EXPECT_EQ((*set)[i].spec.role, specs[i].role);
    EXPECT_EQ((*set)[i].spec.zone, specs[i].zone);
    EXPECT_EQ((*set)[i].spec.labels, specs[i].labels);
  }
}

}  // namespace
}  // namespace kvgate::discovery
