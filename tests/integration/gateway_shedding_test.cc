// `kvgate serve` under overload: a slow `kvgate engine` (one running sequence at a time)
// is flooded with streaming requests through the gateway until its scraped waiting queue
// saturates it; then sheddable requests (the x-kvgate-priority header of a tenant that may
// set it, or a tenant's default priority) get 429 with `x-kvgate-reject-reason: saturated`
// and an OpenAI-style body, while critical requests are routed, wait their turn and
// complete. A tenant that may not set its priority cannot shed itself or escape shedding
// with the header. Once the queue drains, sheddable requests are served again.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>

#include "gateway/data/keys.h"
#include "support/eventually.h"
#include "support/flow_fixture.h"

namespace kvgate::testing {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace gateway_shedding_test {

// ops: may set its priority (default standard); batch: sheddable by default and may not
// change it; web: standard and may not change it.
std::string keys_file() {
  auto entry = [](const std::string& key, const std::string& tenant, int priority, bool may) {
    return "  - sha256: " + gateway::to_hex(gateway::sha256(key)) + "\n    tenant: " + tenant +
           "\n    priority: " + std::to_string(priority) +
           "\n    may_set_priority: " + (may ? "true" : "false") + "\n";
  };
  return write_temp_file("shed-keys.yaml", "keys:\n" + entry("key-ops", "ops", 0, true) +
                                               entry("key-batch", "batch", -1, false) +
                                               entry("key-web", "web", 0, false));
}

std::string shedding_yaml(const std::string& engine_url) {
  return "listeners:\n  - address: 127.0.0.1\n    port: 0\n"
         "keys_file: " +
         keys_file() +
         "\n"
         "timeouts: {header_ms: 5000, drain_ms: 2000, connect_ms: 1000}\n"
         "pools:\n  main:\n    block_size: 16\n    scrape_interval_ms: 50\n"
         "    router:\n      policy: least-request\n      filters: [saturation]\n"
         "      saturation: {queue_threshold: 4}\n"
         "    endpoints:\n      - " +
         engine_url + "\nmodels:\n  - name: sim\n    pool: main\n";
}

// A streamed completion of `max_tokens` tokens (each ~7 ms at the default profile).
std::string streamed(const std::string& tag, int max_tokens) {
  return R"({"model":"sim","prompt":")" + words_prompt(tag, 20) + R"(","max_tokens":)" +
         std::to_string(max_tokens) + R"(,"stream":true})";
}

std::vector<io::HttpHeader> headers(const std::string& key, const std::string& priority = "") {
  std::vector<io::HttpHeader> h = {{"Authorization", "Bearer " + key},
                                   {"Content-Type", "application/json"}};
  if (!priority.empty()) h.push_back({"x-kvgate-priority", priority});
  return h;
}

void expect_shed(const io::HttpClientResponse& r, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(r.status, 429) << r.body;
  ASSERT_NE(r.header("x-kvgate-reject-reason"), nullptr);
  EXPECT_EQ(*r.header("x-kvgate-reject-reason"), "saturated");
  EXPECT_EQ(r.header("x-kvgate-endpoint"), nullptr);  // never reached an engine
  auto err = parse_json(r.body).at("error").as_object();
  EXPECT_EQ(err.at("type").as_string(), "rate_limit_error");
  EXPECT_EQ(err.at("code").as_string(), "saturated");
  EXPECT_TRUE(err.at("param").is_null());
  EXPECT_NE(std::string(err.at("message").as_string()).find("saturated"), std::string::npos);
}

// A streamed answer that completed: 200, token events, the terminator.
void expect_completed(const io::HttpClientResponse& r, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(r.status, 200) << r.body;
  auto events = sse_events(r.body);
  ASSERT_GE(events.size(), 2u) << r.body;
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_EQ(r.body.find("\"error\""), std::string::npos) << r.body;
  // How long routing took, in microseconds.
  ASSERT_NE(r.header("x-kvgate-route-us"), nullptr);
  EXPECT_FALSE(r.header("x-kvgate-route-us")->empty());
  EXPECT_EQ(r.header("x-kvgate-route-us")->find_first_not_of("0123456789"), std::string::npos);
}

TEST(GatewayShedding, SheddableGets429WithReasonWhileCriticalIsServed) {
  // One sequence at a time: every other request waits in the engine's queue.
  EngineProcess engine({"--model", "sim", "--max-num-seqs", "1"});
  ASSERT_FALSE(engine.url.empty());
  GatewayProcess gw(shedding_yaml(engine.url));
  ASSERT_FALSE(gw.url.empty());
  const metrics::Labels at_engine = {{"pool", "main"}, {"endpoint", engine.url}};
  auto waiting = [&] { return gw.metric("kvgate_endpoint_waiting", at_engine); };
  // The waits below are for the gateway child's scrapes of the engine child.
  ASSERT_TRUE(eventually([&] { return gw.metric("kvgate_scrapes_total", at_engine) >= 2; }));

  // Idle: a sheddable request is served like any other.
  auto idle = gw.post("/v1/completions", streamed("idle", 4), headers("key-ops", "-1"));
  expect_completed(idle, "sheddable while idle");
  expect_completed(gw.post("/v1/completions", streamed("idle2", 4), headers("key-batch")),
                   "default-sheddable tenant while idle");

  // Overload: 16 standard streams of 40 tokens (~0.3 s each, one after the other).
  RequestBatch load;
  for (int i = 0; i < 16; ++i) {
    load.post(gw.url, streamed("load" + std::to_string(i), 40), headers("key-ops"));
  }
  // The gateway saw the queue (saturation.queue_threshold: 4); one more scrape
  // period lets the router's strand apply what the metric shows.
  ASSERT_TRUE(eventually([&] { return waiting() >= 8; })) << "waiting " << waiting();
  // A fixed wait of one scrape period for the kvgate serve child's router strand to apply what the
  // metric shows: the child shows nothing of it.
  std::this_thread::sleep_for(std::chrono::milliseconds(60));

  // Sheddable: the header of a tenant that may set it (number or name), and a tenant's
  // default, which its header cannot raise.
  expect_shed(gw.post("/v1/completions", streamed("s1", 4), headers("key-ops", "-1")), "ops -1");
  expect_shed(gw.post("/v1/completions", streamed("s2", 4), headers("key-ops", "sheddable")),
              "ops sheddable");
  expect_shed(gw.post("/v1/completions", streamed("s3", 4), headers("key-batch")), "batch");
  expect_shed(gw.post("/v1/completions", streamed("s4", 4), headers("key-batch", "5")),
              "batch may not raise its priority");
  // Non-streamed and chat requests are shed the same way.
  expect_shed(gw.post("/v1/chat/completions",
                      R"({"model":"sim","messages":[{"role":"user","content":"hi"}]})",
                      headers("key-ops", "-3")),
              "ops chat -3");
  EXPECT_GE(waiting(), 4) << "the overload ended before the checks did";

  // Critical (and a standard tenant whose header is ignored) during the same overload:
  // routed, queued behind the load, completed.
  RequestBatch served;
  served.post(gw.url, streamed("c1", 8), headers("key-ops", "1"));
  served.post(gw.url, streamed("c2", 8), headers("key-ops", "critical"));
  served.post(gw.url, streamed("w1", 8), headers("key-web", "-1"));
  auto critical = served.join();
  expect_completed(critical[0].r, "ops 1");
  expect_completed(critical[1].r, "ops critical");
  expect_completed(critical[2].r, "web -1 (header ignored: standard)");
  for (const BatchAnswer& a : load.join()) expect_completed(a.r, "load");

  EXPECT_EQ(gw.metric("kvgate_routing_decisions_total",
                      {{"pool", "main"}, {"policy", "least-request"}, {"reason", "saturated"}}),
            5);
  EXPECT_EQ(gw.metric("kvgate_requests_total",
                      {{"model", "sim"}, {"pool", "main"}, {"tenant", "batch"}, {"status", "429"}}),
            2);
  EXPECT_EQ(gw.metric("kvgate_requests_total",
                      {{"model", "sim"}, {"pool", "main"}, {"tenant", "ops"}, {"status", "429"}}),
            3);

  // Drained: sheddable requests are served again.
  ASSERT_TRUE(eventually([&] { return waiting() == 0; }));
  // A fixed wait of one scrape period, as above.
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  expect_completed(gw.post("/v1/completions", streamed("after", 4), headers("key-batch")),
                   "sheddable after the overload");
  // Every request's routing time was observed once, shed ones included.
  EXPECT_EQ(gw.metric("kvgate_routing_decision_seconds_count", {{"pool", "main"}}),
            2 + 16 + 5 + 3 + 1);
}

}  // namespace gateway_shedding_test
}  // namespace kvgate::testing
