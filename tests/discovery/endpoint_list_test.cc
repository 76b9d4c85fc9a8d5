// The file source's schema: the same as the config's `endpoints:`, errors with
// file:line:column: field.
#include "discovery/endpoint_list.h"

#include <gtest/gtest.h>

namespace kvgate::discovery {
namespace {

TEST(EndpointList, ReadsTheEndpointsSchemaAsAListOrUnderEndpoints) {
  const std::string yaml =
      "endpoints:\n"
      "  - http://10.0.0.7:8000\n"
      "  - url: http://10.0.0.8:8000\n"
      "    role: decode\n"
      "    zone: eu-1a\n"
      "    rack: r7\n"
      "    labels: {gpu: h100}\n"
      "    kv_capacity_blocks: 4096\n"
      "    kv_events: {publisher: tcp://10.0.0.8:5557, replay: tcp://10.0.0.8:5558}\n";
  auto set = parse_endpoint_list(yaml, "eps.yaml", false);
  ASSERT_TRUE(set) << set.error();
  ASSERT_EQ(set->size(), 2u);
  EXPECT_EQ((*set)[0].spec.url, "http://10.0.0.7:8000");
  const DiscoveredEndpoint& b = (*set)[1];
  EXPECT_EQ(b.spec.role, Role::kDecode);
  EXPECT_EQ(b.spec.zone, "eu-1a");
  EXPECT_EQ(b.spec.rack, "r7");
  EXPECT_EQ(b.spec.label("gpu"), "h100");
  EXPECT_EQ(b.spec.kv_capacity_blocks, 4096u);
  ASSERT_TRUE(b.kv_events);
  EXPECT_EQ(b.kv_events->replay, "tcp://10.0.0.8:5558");

  auto json = parse_endpoint_list(
      R"(["http://10.0.0.7:8000", {"url": "http://10.0.0.8:8000", "role": "prefill"}])", "eps.json",
      false);
  ASSERT_TRUE(json) << json.error();
  ASSERT_EQ(json->size(), 2u);
  EXPECT_EQ((*json)[1].spec.role, Role::kPrefill);
}

TEST(EndpointList, ErrorsNameFileLineAndField) {
  auto bad_role = parse_endpoint_list(
      "endpoints:\n  - http://a:1\n  - url: http://b:1\n    role: chef\n", "/x/eps.yaml", false);
  ASSERT_FALSE(bad_role);
  EXPECT_EQ(bad_role.error(),
            "/x/eps.yaml:4:11: endpoints[1].role: expected both, prefill or decode");
  auto bad_url = parse_endpoint_list("- ftp://a:1\n", "eps.yaml", false);
  ASSERT_FALSE(bad_url);
  EXPECT_EQ(bad_url.error(),
            "eps.yaml:1:3: endpoints[0]: expected http://host:port, got 'ftp://a:1'");
  auto twice = parse_endpoint_list("[\"http://a:1\", \"http://a:1\"]", "e.json", false);
  ASSERT_FALSE(twice);
  EXPECT_NE(twice.error().find("listed twice"), std::string::npos);
  auto unknown = parse_endpoint_list("- {url: http://a:1, weight: 3}\n", "e.yaml", false);
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().find("endpoints[0].weight: unknown field"), std::string::npos);
}

TEST(EndpointList, InvalidYamlAndPartialFilesAreErrors) {
  auto yaml = parse_endpoint_list("endpoints:\n  - url: [http://a:1\n", "e.yaml", false);
  ASSERT_FALSE(yaml);
  EXPECT_TRUE(yaml.error().starts_with("e.yaml:")) << yaml.error();
  auto half_json = parse_endpoint_list("[\"http://a:1\", {\"url\": \"htt", "e.json", false);
  ASSERT_FALSE(half_json);
  auto empty = parse_endpoint_list("", "e.yaml", false);
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error(), "e.yaml: empty file");
}

TEST(EndpointList, AnEmptyListIsAGoodRead) {
  auto a = parse_endpoint_list("endpoints: []\n", "e.yaml", false);
  ASSERT_TRUE(a) << a.error();
  EXPECT_TRUE(a->empty());
  auto b = parse_endpoint_list("endpoints:\n", "e.yaml", false);
  ASSERT_TRUE(b) << b.error();
  EXPECT_TRUE(b->empty());
}

TEST(EndpointList, BindModeWantsTopicsNotPublishers) {
  auto ok = parse_endpoint_list("- {url: http://a:1, kv_events: {topic: a}}\n", "e.yaml", true);
  ASSERT_TRUE(ok) << ok.error();
  auto publisher = parse_endpoint_list(
      "- {url: http://a:1, kv_events: {publisher: tcp://a:5557}}\n", "e.yaml", true);
  ASSERT_FALSE(publisher);
  auto twice = parse_endpoint_list(
      "- {url: http://a:1, kv_events: {topic: a}}\n- {url: http://b:1, kv_events: {topic: a}}\n",
      "e.yaml", true);
  ASSERT_FALSE(twice);
  EXPECT_NE(twice.error().find("used twice"), std::string::npos);
}

}  // namespace
}  // namespace kvgate::discovery

namespace kvgate::discovery {
namespace endpoint_list_test {

TEST(EndpointList, ADataParallelEngineIsOneEndpointPerRank) {
  auto set = parse_endpoint_list(
      "- url: http://10.0.0.9:8000\n"
      "  data_parallel_size: 3\n"
      "  kv_events: {publisher: tcp://10.0.0.9:5557, replay: tcp://10.0.0.9:6557}\n"
      "- url: http://10.0.0.10:8000#dp1\n"
      "  kv_events: {publisher: tcp://10.0.0.10:7001}\n",
      "eps.yaml", false);
  ASSERT_TRUE(set) << set.error();
  ASSERT_EQ(set->size(), 4u);
  for (uint32_t r = 0; r < 3; ++r) {
    const DiscoveredEndpoint& e = (*set)[r];
    EXPECT_EQ(e.spec.url, "http://10.0.0.9:8000#dp" + std::to_string(r));
    ASSERT_TRUE(e.kv_events);
    EXPECT_EQ(e.kv_events->publisher, "tcp://10.0.0.9:" + std::to_string(5557 + r));
    EXPECT_EQ(e.kv_events->replay, "tcp://10.0.0.9:" + std::to_string(6557 + r));
  }
  // One rank given by itself: its KV events as written.
  EXPECT_EQ((*set)[3].spec.url, "http://10.0.0.10:8000#dp1");
  EXPECT_EQ((*set)[3].kv_events->publisher, "tcp://10.0.0.10:7001");

  auto both =
      parse_endpoint_list("- {url: 'http://a:1#dp1', data_parallel_size: 2}\n", "e.yaml", false);
  ASSERT_FALSE(both);
  EXPECT_NE(both.error().find("takes no data_parallel_size"), std::string::npos) << both.error();
  auto zero =
      parse_endpoint_list("- {url: 'http://a:1', data_parallel_size: 0}\n", "e.yaml", false);
  ASSERT_FALSE(zero);
  EXPECT_NE(zero.error().find("data_parallel_size"), std::string::npos) << zero.error();
  auto bind = parse_endpoint_list(
      "- {url: 'http://a:1', data_parallel_size: 2, kv_events: {topic: a}}\n", "e.yaml", true);
  ASSERT_FALSE(bind);
  EXPECT_NE(bind.error().find("kv_events_bind"), std::string::npos) << bind.error();
}

TEST(EndpointList, AppendRanksKeepsEverythingButTheUrlAndTheEventPorts) {
  // What the DNS and Kubernetes sources expand with: a not-ready address gives not-ready
  // ranks, the role, labels and topic are every rank's, the ports move by the rank.
  DiscoveredEndpoint e;
  e.spec.url = "http://[fd00::7]:8000";
  e.spec.role = Role::kDecode;
  e.spec.labels = {{"model", "qwen3"}};
  e.ready = false;
  e.kv_events = KvEventsAddress{
      .publisher = "tcp://[fd00::7]:5557", .replay = "tcp://[fd00::7]:5600", .topic = "t"};
  std::vector<DiscoveredEndpoint> out;
  append_ranks(e, 2, out);
  ASSERT_EQ(out.size(), 2u);
  for (uint32_t r = 0; r < 2; ++r) {
    EXPECT_EQ(out[r].spec.url, "http://[fd00::7]:8000#dp" + std::to_string(r));
    EXPECT_EQ(out[r].spec.role, Role::kDecode);
    EXPECT_EQ(out[r].spec.labels, e.spec.labels);
    EXPECT_FALSE(out[r].ready);
    ASSERT_TRUE(out[r].kv_events);
    EXPECT_EQ(out[r].kv_events->publisher, "tcp://[fd00::7]:" + std::to_string(5557 + r));
    EXPECT_EQ(out[r].kv_events->replay, "tcp://[fd00::7]:" + std::to_string(5600 + r));
    EXPECT_EQ(out[r].kv_events->topic, "t");
  }
  // Size 1 (and 0): the endpoint as it is, appended after what is there.
  append_ranks(e, 1, out);
  append_ranks(e, 0, out);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[2].spec.url, "http://[fd00::7]:8000");
  EXPECT_TRUE(same_endpoint(out[3], e));
  // Without KV events: none on the ranks either.
  e.kv_events.reset();
  std::vector<DiscoveredEndpoint> plain;
  append_ranks(e, 3, plain);
  ASSERT_EQ(plain.size(), 3u);
  EXPECT_FALSE(plain[2].kv_events);
  EXPECT_EQ(plain[2].spec.url, "http://[fd00::7]:8000#dp2");
}

}  // namespace endpoint_list_test
}  // namespace kvgate::discovery
