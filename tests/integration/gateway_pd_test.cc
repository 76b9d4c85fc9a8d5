// `kvgate serve` running vLLM's prefill/decode proxy flow in front of real `kvgate
// engine --role prefill|decode` processes in two racks: a streamed answer comes through
// both hops (the prefill engine computed the prompt, the decode engine reports it as
// transferred, i.e. cached), the decode endpoint is in the prefill endpoint's rack, a
// pool with local prefill skips the prefill hop, and a decode engine killed mid-stream
// ends the stream with a clean error event while the gateway stays healthy and the next
// request goes to the remaining decode engine; an unreachable prefill engine is retried
// on another before any byte reached the client.
#include <gtest/gtest.h>

#include <csignal>
#include <map>

#include "gateway/common/config.h"
#include "support/gateway_fixture.h"

namespace kvgate::testing {
namespace {

struct PdEngine {
  std::string role, rack;
  EngineProcess engine;
  PdEngine(std::string role_, std::string rack_, std::string time_scale)
      : role(std::move(role_)),
        rack(std::move(rack_)),
        engine({"--time-scale", time_scale, "--model", "sim", "--block-size", "16", "--role", role,
                "--rack", rack, "--zone", "z1"}) {}

  const std::string& url() const { return engine.url; }
  double metric(const std::string& name) {
    auto r = engine.get("/metrics");
    auto m = metrics::parse_prometheus_text(r.body);
    if (!m) return -1;
    return m->value(name).value_or(0);
  }
};

std::string pd_yaml(const std::vector<PdEngine*>& engines, const std::string& pd = "") {
  std::string y =
      "listeners:\n  - address: 127.0.0.1\n    port: 0\n"
      "timeouts: {header_ms: 2000, drain_ms: 2000, connect_ms: 1000}\n"
      "pools:\n  pd:\n    block_size: 16\n    scrape_interval_ms: 50\n"
      "    router:\n      policy: round-robin\n      overlap: approx\n" +
      pd + "    endpoints:\n";
  for (const PdEngine* e : engines) {
    y +=
        "      - {url: " + e->url() + ", role: " + e->role + ", zone: z1, rack: " + e->rack + "}\n";
  }
  return y + "models:\n  - name: sim\n    pool: pd\n";
}

std::string chat(const std::string& content, int max_tokens, bool stream) {
  std::string b = R"({"model":"sim","messages":[{"role":"user","content":")" + content +
                  R"("}],"max_tokens":)" + std::to_string(max_tokens);
  if (stream) b += R"(,"stream":true,"stream_options":{"include_usage":true})";
  return b + "}";
}

// Token events (non-empty choices with content) of an SSE body.
int token_events(const std::vector<std::string>& events) {
  int n = 0;
  for (const std::string& e : events) {
    if (e == "[DONE]") continue;
    auto v = parse_json(e);
    if (!v.is_object() || !v.as_object().contains("choices")) continue;
    for (const auto& c : v.at("choices").as_array()) {
      const auto& delta = c.at("delta").as_object();
      if (delta.contains("content") && !delta.at("content").as_string().empty()) ++n;
    }
  }
  return n;
}

TEST(GatewayPd, StreamsThroughBothHopsWithTheDecodeEndpointInThePrefillRack) {
  PdEngine pa("prefill", "rack-a", "0.01"), pb("prefill", "rack-b", "0.01");
  PdEngine da("decode", "rack-a", "0.01"), db("decode", "rack-b", "0.01");
  for (PdEngine* e : {&pa, &pb, &da, &db}) ASSERT_FALSE(e->url().empty());
  GatewayProcess gw(pd_yaml({&pa, &da, &pb, &db}));
  ASSERT_FALSE(gw.url.empty());

  const std::map<std::string, std::string> same_rack = {{pa.url(), da.url()}, {pb.url(), db.url()}};
  std::map<std::string, int> prefills;
  for (int i = 0; i < 4; ++i) {
    auto r = gw.post("/v1/chat/completions",
                     chat(words_prompt("pd" + std::to_string(i) + "w", 100), 8, true));
    ASSERT_EQ(r.status, 200) << r.body;
    const std::string* prefill = r.header("x-kvgate-prefill-endpoint");
    const std::string* decode = r.header("x-kvgate-endpoint");
    ASSERT_TRUE(prefill && decode) << "not disaggregated";
    ASSERT_TRUE(same_rack.contains(*prefill)) << *prefill;
    EXPECT_EQ(*decode, same_rack.at(*prefill)) << "decode left the prefill endpoint's rack";
    ++prefills[*prefill];

    auto events = sse_events(r.body);
    ASSERT_GE(events.size(), 3u) << r.body;
    EXPECT_EQ(events.back(), "[DONE]");
    EXPECT_EQ(token_events(events), 8) << r.body;
    // The decode engine got the prompt's KV from the prefill engine: its full blocks
    // count as cached.
    auto usage = parse_json(events[events.size() - 2]).at("usage");
    const int64_t prompt = usage.at("prompt_tokens").as_int64();
    const int64_t cached = usage.at("prompt_tokens_details").at("cached_tokens").as_int64();
    EXPECT_GT(prompt, 100);
    EXPECT_GE(cached, (prompt - 1) / 16 * 16) << r.body;  // every full block but the last token's
    EXPECT_LE(cached, prompt);
    EXPECT_EQ(usage.at("completion_tokens").as_int64(), 8);
  }
  // Round-robin over the prefill endpoints: both racks served.
  EXPECT_EQ(prefills[pa.url()], 2);
  EXPECT_EQ(prefills[pb.url()], 2);

  // A whole (non-streamed) answer takes the same two hops.
  auto whole = gw.post("/v1/chat/completions", chat(words_prompt("whole", 60), 4, false));
  ASSERT_EQ(whole.status, 200) << whole.body;
  ASSERT_NE(whole.header("x-kvgate-prefill-endpoint"), nullptr);
  EXPECT_EQ(*whole.header("x-kvgate-endpoint"),
            same_rack.at(*whole.header("x-kvgate-prefill-endpoint")));
  EXPECT_EQ(parse_json(whole.body).at("usage").at("completion_tokens").as_int64(), 4);

  // The engines saw it: each prefill engine finished its prefill requests (one token
  // each), each decode engine its decodes.
  EXPECT_EQ(pa.metric("vllm:request_success_total") + pb.metric("vllm:request_success_total"), 5);
  EXPECT_EQ(da.metric("vllm:request_success_total") + db.metric("vllm:request_success_total"), 5);
  EXPECT_EQ(pa.metric("vllm:generation_tokens_total") + pb.metric("vllm:generation_tokens_total"),
            5);
  EXPECT_EQ(da.metric("vllm:generation_tokens_total") + db.metric("vllm:generation_tokens_total"),
            8 * 4 + 4);
  EXPECT_EQ(gw.metric("kvgate_pd_prefill_requests_total", {{"pool", "pd"}, {"endpoint", pa.url()}}),
            prefills[pa.url()] + (*whole.header("x-kvgate-prefill-endpoint") == pa.url()));
  EXPECT_EQ(gw.metric("kvgate_pd_hop_failures_total", {{"pool", "pd"}}), 0);
  EXPECT_EQ(gw.proc->stop(), 0) << gw.proc->errors();

  // Local prefill: with nearly every prompt "small enough", the decode endpoint
  // prefills itself and no prefill hop is sent.
  const double before = pa.metric("vllm:request_success_total");
  GatewayProcess local(pd_yaml({&pa, &da}, "      pd: {local_prefill_max_tokens: 100000}\n"));
  ASSERT_FALSE(local.url.empty());
  auto r = local.post("/v1/chat/completions", chat(words_prompt("local", 40), 3, true));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("x-kvgate-prefill-endpoint"), nullptr);
  EXPECT_EQ(*r.header("x-kvgate-endpoint"), da.url());
  EXPECT_EQ(token_events(sse_events(r.body)), 3);
  EXPECT_EQ(pa.metric("vllm:request_success_total"), before);
  EXPECT_EQ(local.metric("kvgate_pd_local_prefills_total", {{"pool", "pd"}}), 1);
  EXPECT_EQ(local.metric("kvgate_pd_prefill_requests_total"), 0);
  EXPECT_EQ(local.proc->stop(), 0) << local.proc->errors();
}

TEST(GatewayPd, DecodeEngineKilledMidStreamEndsWithAnErrorEventAndTheNextRequestIsServed) {
  // Decode slow enough (~20 ms per token) that the stream is in flight when it dies.
  PdEngine pa("prefill", "rack-a", "0.01");
  PdEngine da("decode", "rack-a", "0.5"), db("decode", "rack-b", "0.01");
  for (PdEngine* e : {&pa, &da, &db}) ASSERT_FALSE(e->url().empty());
  GatewayProcess gw(pd_yaml({&pa, &da, &db}));
  ASSERT_FALSE(gw.url.empty());

  std::string body;
  bool killed = false;
  auto r = io::http_fetch_streaming(
      "POST", gw.url + "/v1/chat/completions", chat(words_prompt("doomed", 50), 200, true),
      {{"Content-Type", "application/json"}},
      [&](std::string_view piece) {
        body += piece;
        // Count complete events only: a piece may end inside an event.
        const size_t complete = body.rfind("\n\n");
        if (!killed && complete != std::string::npos &&
            token_events(sse_events(body.substr(0, complete + 2))) >= 2) {
          da.engine.proc->signal(SIGKILL);  // the decode engine of this request (rack-a)
          killed = true;
        }
        return true;
      },
      std::chrono::seconds(30));
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->status, 200);
  ASSERT_TRUE(killed) << body;
  EXPECT_EQ(*r->header("x-kvgate-endpoint"), da.url());
  EXPECT_EQ(*r->header("x-kvgate-prefill-endpoint"), pa.url());
  auto events = sse_events(body);
  ASSERT_GE(events.size(), 3u) << body;
  EXPECT_EQ(events.back(), "[DONE]");
  auto err = parse_json(events[events.size() - 2]);
  ASSERT_TRUE(err.as_object().contains("error")) << body;
  EXPECT_EQ(err.at("error").at("code").as_string(), "upstream_error");
  EXPECT_LT(token_events(events), 200);
  EXPECT_GE(gw.metric("kvgate_pd_hop_failures_total", {{"pool", "pd"}, {"hop", "decode"}}), 1);

  // The gateway is fine, and the next requests decode on the engine that is left.
  EXPECT_EQ(io::http_fetch("GET", gw.url + "/health")->status, 200);
  da.engine.proc->stop();
  for (int i = 0; i < 3; ++i) {
    auto next = gw.post("/v1/chat/completions",
                        chat(words_prompt("after" + std::to_string(i) + "w", 50), 5, true));
    ASSERT_EQ(next.status, 200) << next.body;
    EXPECT_EQ(*next.header("x-kvgate-endpoint"), db.url());
    EXPECT_EQ(*next.header("x-kvgate-prefill-endpoint"), pa.url());
    auto ev = sse_events(next.body);
    EXPECT_EQ(ev.back(), "[DONE]");
    EXPECT_EQ(token_events(ev), 5) << next.body;
  }
  EXPECT_EQ(gw.proc->stop(), 0) << gw.proc->errors();
}

TEST(GatewayPd, UnreachablePrefillEngineIsRetriedOnAnotherBeforeTheFirstByte) {
  PdEngine pa("prefill", "rack-a", "0.01"), pb("prefill", "rack-b", "0.01");
  PdEngine da("decode", "rack-a", "0.01"), db("decode", "rack-b", "0.01");
  for (PdEngine* e : {&pa, &pb, &da, &db}) ASSERT_FALSE(e->url().empty());
  GatewayProcess gw(pd_yaml({&pa, &da, &pb, &db}));
  ASSERT_FALSE(gw.url.empty());
  pb.engine.proc->signal(SIGKILL);
  pb.engine.proc->stop();
  for (int i = 0; i < 4; ++i) {
    auto r = gw.post("/v1/chat/completions",
                     chat(words_prompt("retry" + std::to_string(i) + "w", 40), 3, i % 2 == 0));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(*r.header("x-kvgate-prefill-endpoint"), pa.url());
    EXPECT_EQ(*r.header("x-kvgate-endpoint"), da.url());
  }
  EXPECT_EQ(pa.metric("vllm:request_success_total"), 4);
  EXPECT_GE(gw.metric("kvgate_pd_hop_failures_total",
                      {{"pool", "pd"}, {"hop", "prefill"}, {"kind", "connect"}}),
            1);
  EXPECT_GE(gw.metric("kvgate_upstream_retries_total", {{"pool", "pd"}}), 1);
  EXPECT_EQ(gw.proc->stop(), 0) << gw.proc->errors();
}

TEST(GatewayPd, ExampleConfigIsAValidDisaggregatedPool) {
  auto c = gateway::load_gateway_config(source_dir() + "/examples/pd-fleet.yaml");
  ASSERT_TRUE(c) << c.error();
  ASSERT_EQ(c->pools.size(), 1u);
  const gateway::PoolConfig& p = c->pools[0];
  EXPECT_EQ(p.router.pd.local_prefill_max_tokens, 256u);
  ASSERT_EQ(p.endpoints.size(), 4u);
  EXPECT_EQ(p.endpoints[0].role, Role::kPrefill);
  EXPECT_EQ(p.endpoints[1].role, Role::kDecode);
  EXPECT_EQ(p.endpoints[3].rack, "rack-b");
}

}  // namespace
}  // namespace kvgate::testing
