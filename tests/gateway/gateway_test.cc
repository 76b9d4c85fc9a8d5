// The gateway in process, in front of scripted upstreams (io::HttpServer handlers, or a
// raw socket that dies mid-response): the proxy's edge cases, deterministically.
// tests/integration/gateway_*_test.cc run the same paths against real `kvgate engine`
// processes.
#include "gateway/gateway.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/json.hpp>
#include <future>
#include <thread>

#include "../integration/support/eventually.h"
#include "../integration/support/refusing_port.h"
#include "core/metrics/prometheus_text.h"
#include "gateway/data/keys.h"
#include "io/http_client.h"
#include "io/http_server.h"
#include "openai/error.h"

namespace kvgate::gateway {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace gateway_test {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using io::HttpRequest;
using io::HttpResponse;
using io::ResponseStream;

std::string sse(const std::string& json) { return "data: " + json + "\n\n"; }

std::string token_chunk(const std::string& text) {
  return sse(
      R"({"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":")" +
      text + R"("},"finish_reason":null}],"usage":null})");
}

const std::string kUsageChunk = sse(
    R"({"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":3,"total_tokens":23,"prompt_tokens_details":{"cached_tokens":16}}})");

// A scripted OpenAI upstream: answers like an engine, names itself in "name".
std::unique_ptr<io::HttpServer> fake_engine(std::string name, std::atomic<int>* hits = nullptr,
                                            int status = 200, std::chrono::milliseconds gap = {}) {
  auto s = io::HttpServer::start({}, [name, hits, status, gap](
                                         HttpRequest&& r, std::shared_ptr<ResponseStream> out) {
    if (hits) ++*hits;
    if (status != 200) {
      out->respond(HttpResponse{
          status, "application/json", {}, openai::vllm_error_json(status, "scripted failure")});
      return;
    }
    auto body = boost::json::parse(r.body).as_object();
    bool stream = body.contains("stream") && body["stream"].as_bool();
    if (!stream) {
      out->respond(HttpResponse{
          200,
          "application/json",
          {},
          R"({"id":"x","object":"chat.completion","model":")" +
              std::string(body["model"].as_string()) + R"(","served_by":")" + name +
              R"(","choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":20,"completion_tokens":1,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":16}}})"});
      return;
    }
    bool usage = body.contains("stream_options") &&
                 body["stream_options"].as_object().contains("include_usage") &&
                 body["stream_options"].as_object()["include_usage"].as_bool();
    out->start(200, "text/event-stream");
    auto produce = [out, usage, gap] {
      for (const char* t : {"a", "b", "c"}) {
        out->write(token_chunk(t));
        // Paces the fake engine's tokens (its step loop), so that a stream is still going
        // when the test acts: it waits for nothing.
        if (gap.count() > 0) std::this_thread::sleep_for(gap);
      }
      if (usage) out->write(kUsageChunk);
      out->write("data: [DONE]\n\n");
      out->finish();
    };
    if (gap.count() > 0) {
      std::thread(produce).detach();  // a slow producer, like an engine's step loop
    } else {
      produce();
    }
  });
  EXPECT_TRUE(s) << s.error();
  return std::move(*s);
}

// A raw upstream that sends a response head and one event, then drops the connection.
class DyingEngine {
 public:
  DyingEngine() : acceptor_(io_, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0)) {
    thread_ = std::thread([this] {
      boost::system::error_code ec;
      tcp::socket s(io_);
      acceptor_.accept(s, ec);
      if (ec) return;
      char buf[65536];
      s.read_some(net::buffer(buf), ec);
      std::string ev = token_chunk("partial");
      std::string head =
          "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: "
          "chunked\r\n\r\n";
      char size[32];
      snprintf(size, sizeof size, "%zx\r\n", ev.size());
      std::string out = head + size + ev + "\r\n";
      net::write(s, net::buffer(out), ec);
      // Lets the gateway's I/O thread read the event before the drop (a close with the
      // request unread may reset the connection). The gateway shows nothing to poll for
      // (active_streams counts the stream before the event), so this is a fixed wait.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      s.close(ec);
    });
  }
  ~DyingEngine() {
    boost::system::error_code ec;
    acceptor_.close(ec);
    thread_.join();
  }
  uint16_t port() const { return acceptor_.local_endpoint().port(); }

 private:
  net::io_context io_;
  tcp::acceptor acceptor_;
  std::thread thread_;
};

GatewayConfig config_for(std::vector<uint16_t> ports, std::string policy = "round-robin") {
  GatewayConfig c;
  c.file = "test";
  c.listeners.push_back({.address = "127.0.0.1", .port = 0});
  c.threads = 2;
  c.timeouts.header = std::chrono::milliseconds(1000);
  c.timeouts.drain = std::chrono::milliseconds(5000);
  c.limits.max_body_bytes = 64 * 1024;
  c.limits.max_header_bytes = 8 * 1024;
  c.breaker.failures = 100;
  PoolConfig p;
  p.name = "main";
  p.router.policy.name = policy;
  p.router.overlap_source = route::OverlapSource::kApprox;
  for (uint16_t port : ports) {
    p.endpoints.push_back({.url = "http://127.0.0.1:" + std::to_string(port)});
  }
  c.pools.push_back(std::move(p));
  c.models.push_back({.name = "m", .aliases = {"alias"}, .pool = "main", .served_name = "served"});
  return c;
}

// Every case runs with one I/O thread (no cross-thread locks: the gateway's fast path)
// and with two.
class GatewayTest : public ::testing::TestWithParam<int> {
 protected:
  void start(GatewayConfig c) {
    c.threads = GetParam();
    auto g = Gateway::start(std::move(c));
    ASSERT_TRUE(g) << g.error();
    gw_ = std::move(*g);
  }
  std::string url(std::string_view path) const {
    return "http://127.0.0.1:" + std::to_string(gw_->ports()[0]) + std::string(path);
  }
  io::HttpClientResponse post(std::string_view path, std::string body,
                              std::vector<io::HttpHeader> headers = {}) {
    headers.push_back({"Content-Type", "application/json"});
    auto r = io::http_fetch("POST", url(path), body, headers, std::chrono::seconds(10));
    EXPECT_TRUE(r) << r.error();
    return r ? *r : io::HttpClientResponse{};
  }
  double metric(std::string_view name, const metrics::Labels& labels = {}) {
    auto r = io::http_fetch("GET", url("/metrics"));
    EXPECT_TRUE(r);
    auto m = metrics::parse_prometheus_text(r->body);
    EXPECT_TRUE(m) << m.error();
    return m->value(name, labels).value_or(0);
  }
  std::unique_ptr<Gateway> gw_;
};

const std::string kChat = R"({"model":"m","messages":[{"role":"user","content":"hello"}]})";
const std::string kStream =
    R"({"model":"alias","messages":[{"role":"user","content":"hello"}],"stream":true})";

std::string error_code(const std::string& body) {
  auto v = boost::json::parse(body);
  const auto& e = v.as_object().at("error").as_object();
  EXPECT_TRUE(e.contains("message") && e.contains("type") && e.contains("param"));
  return e.at("code").is_string() ? std::string(e.at("code").as_string()) : "";
}

TEST_P(GatewayTest, ProxiesWholeResponsesAndCountsUsage) {
  auto a = fake_engine("a");
  start(config_for({a->port()}));
  auto r = post("/v1/chat/completions", kChat);
  EXPECT_EQ(r.status, 200);
  auto v = boost::json::parse(r.body).as_object();
  EXPECT_EQ(v["model"].as_string(), "served");  // the engine saw the served name
  EXPECT_EQ(*r.header("x-kvgate-endpoint"), "http://127.0.0.1:" + std::to_string(a->port()));
  EXPECT_EQ(metric("kvgate_cached_tokens_total", {{"model", "m"}}), 16);
  EXPECT_EQ(metric("kvgate_requests_total", {{"status", "200"}}), 1);
  EXPECT_EQ(metric("kvgate_routing_decisions_total", {{"policy", "round-robin"}, {"reason", "ok"}}),
            1);
  // Routing time: a header on the answer, a histogram on /metrics.
  ASSERT_NE(r.header("x-kvgate-route-us"), nullptr);
  EXPECT_LT(std::stoll(*r.header("x-kvgate-route-us")), 10'000'000);
  EXPECT_EQ(metric("kvgate_routing_decision_seconds_count", {{"pool", "main"}}), 1);
}

TEST_P(GatewayTest, StreamsAndStripsTheUsageChunkUnlessAsked) {
  auto a = fake_engine("a");
  start(config_for({a->port()}));
  auto r = post("/v1/chat/completions", kStream);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, token_chunk("a") + token_chunk("b") + token_chunk("c") + "data: [DONE]\n\n");
  EXPECT_EQ(metric("kvgate_completion_tokens_total", {{"model", "m"}}), 3);

  std::string asked =
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"stream":true,"stream_options":{"include_usage":true}})";
  auto u = post("/v1/chat/completions", asked);
  EXPECT_EQ(u.body, token_chunk("a") + token_chunk("b") + token_chunk("c") + kUsageChunk +
                        "data: [DONE]\n\n");
  EXPECT_EQ(metric("kvgate_time_to_first_token_seconds_count", {{"model", "m"}}), 2);
  EXPECT_EQ(metric("kvgate_inter_token_latency_seconds_count", {{"model", "m"}}), 4);
  EXPECT_EQ(metric("kvgate_active_streams"), 0);
}

TEST_P(GatewayTest, RetriesConnectFailuresAnd503OnAnotherEndpoint) {
  std::atomic<int> busy_hits{0}, good_hits{0};
  auto busy = fake_engine("busy", &busy_hits, 503);
  auto good = fake_engine("good", &good_hits);
  testing::RefusingPort dead;
  start(config_for({dead.port(), busy->port(), good->port()}));
  for (int i = 0; i < 6; ++i) {
    auto r = post("/v1/chat/completions", i % 2 ? kStream : kChat);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(*r.header("x-kvgate-endpoint"), "http://127.0.0.1:" + std::to_string(good->port()));
  }
  EXPECT_EQ(good_hits.load(), 6);
  EXPECT_GT(busy_hits.load(), 0);
  EXPECT_GT(metric("kvgate_upstream_retries_total", {{"pool", "main"}}), 0);
  EXPECT_GT(metric("kvgate_upstream_errors_total", {{"kind", "connect"}}), 0);
  EXPECT_GT(metric("kvgate_upstream_errors_total", {{"kind", "status_503"}}), 0);
}

TEST_P(GatewayTest, AllEndpointsDownIs502) {
  testing::RefusingPort dead_a, dead_b;
  start(config_for({dead_a.port(), dead_b.port()}));
  auto r = post("/v1/chat/completions", kChat);
  EXPECT_EQ(r.status, 502);
  EXPECT_EQ(error_code(r.body), "upstream_unavailable");
}

TEST_P(GatewayTest, DeathMidStreamEndsWithAnErrorEvent) {
  DyingEngine dying;
  start(config_for({dying.port()}));
  auto r = post("/v1/chat/completions", kStream);
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(r.body.starts_with(token_chunk("partial"))) << r.body;
  EXPECT_NE(r.body.find("data: {\"error\":{"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\"code\":\"upstream_error\""), std::string::npos) << r.body;
  EXPECT_TRUE(r.body.ends_with("data: [DONE]\n\n")) << r.body;
}

TEST_P(GatewayTest, DrainLetsStreamsInFlightFinish) {
  auto slow = fake_engine("slow", nullptr, 200, std::chrono::milliseconds(150));
  start(config_for({slow->port()}));
  std::vector<std::future<io::HttpClientResponse>> streams;
  for (int i = 0; i < 4; ++i) {
    streams.push_back(
        std::async(std::launch::async, [this] { return post("/v1/chat/completions", kStream); }));
  }
  // Wait until all four are streaming (the gateway's I/O threads), then drain.
  testing::eventually([&] { return gw_->metrics().active_streams() >= 4; }, std::chrono::seconds(1),
                      std::chrono::milliseconds(5));
  ASSERT_EQ(gw_->metrics().active_streams(), 4);
  std::thread drainer([this] { gw_->drain(); });
  for (auto& f : streams) {
    auto r = f.get();
    EXPECT_EQ(r.status, 200);
    EXPECT_TRUE(r.body.ends_with("data: [DONE]\n\n")) << r.body;
    EXPECT_NE(r.body.find(token_chunk("c")), std::string::npos);
  }
  drainer.join();
  EXPECT_TRUE(gw_->draining());
  EXPECT_FALSE(io::http_fetch("GET", url("/health"), {}, {}, std::chrono::seconds(1)));
}

TEST_P(GatewayTest, DrainAnnounceKeepsServingWhileReadySays503) {
  auto a = fake_engine("a");
  GatewayConfig c = config_for({a->port()});
  c.timeouts.drain_announce = std::chrono::milliseconds(1500);
  start(std::move(c));
  std::thread drainer([this] { gw_->drain(); });
  // Waits for the drainer thread to announce.
  testing::eventually([&] { return gw_->draining(); }, std::chrono::seconds(1),
                      std::chrono::milliseconds(2));
  ASSERT_TRUE(gw_->draining());
  // Announced: the probe sees 503, a new request (on a new connection) is still served.
  EXPECT_EQ(io::http_fetch("GET", url("/ready"))->status, 503);
  EXPECT_EQ(post("/v1/chat/completions", kChat).status, 200);
  drainer.join();
  EXPECT_FALSE(io::http_fetch("GET", url("/health"), {}, {}, std::chrono::seconds(1)));
}

TEST_P(GatewayTest, ServesModelsHealthReady) {
  auto a = fake_engine("a");
  start(config_for({a->port()}));
  auto models = io::http_fetch("GET", url("/v1/models"));
  ASSERT_TRUE(models);
  auto v = boost::json::parse(models->body).as_object();
  EXPECT_EQ(v["object"].as_string(), "list");
  ASSERT_EQ(v["data"].as_array().size(), 2u);
  EXPECT_EQ(v["data"].as_array()[1].as_object().at("id").as_string(), "alias");
  EXPECT_EQ(io::http_fetch("GET", url("/health"))->status, 200);
  EXPECT_EQ(io::http_fetch("GET", url("/ready"))->status, 200);
}

// Each bad input gets its status and an OpenAI-shaped body; nothing crashes or hangs.
TEST_P(GatewayTest, BadInputBattery) {
  auto a = fake_engine("a");
  std::string key = *generate_key();
  std::string keys_file = ::testing::TempDir() + "/gateway_test_keys.yaml";
  {
    FILE* f = fopen(keys_file.c_str(), "w");
    fprintf(f, "keys:\n  - sha256: %s\n    tenant: t1\n    models: [m]\n",
            to_hex(sha256(key)).c_str());
    fclose(f);
  }
  GatewayConfig c = config_for({a->port()});
  c.keys_file = keys_file;
  c.models.push_back({.name = "other", .pool = "main", .served_name = "other"});
  start(c);
  std::vector<io::HttpHeader> auth{{"Authorization", "Bearer " + key}};
  struct Case {
    std::string name, method, path, body;
    int status;
    std::string code;  // expected error.code ("" for null)
    bool with_key = true;
  };
  std::vector<Case> cases{
      {"malformed json", "POST", "/v1/chat/completions", "{\"model\":", 400, ""},
      {"not an object", "POST", "/v1/chat/completions", "[1]", 400, ""},
      {"wrong type", "POST", "/v1/chat/completions",
       R"({"model":"m","messages":[{"role":"user","content":"x"}],"stream":"yes"})", 400, ""},
      {"missing model", "POST", "/v1/chat/completions", R"({"messages":[]})", 400, ""},
      {"unknown model", "POST", "/v1/chat/completions",
       R"({"model":"nope","messages":[{"role":"user","content":"x"}]})", 404, "model_not_found"},
      {"model not allowed", "POST", "/v1/chat/completions",
       R"({"model":"other","messages":[{"role":"user","content":"x"}]})", 403, "model_not_allowed"},
      {"empty messages", "POST", "/v1/chat/completions", R"({"model":"m","messages":[]})", 400, ""},
      {"completion without prompt", "POST", "/v1/completions", R"({"model":"m"})", 400, ""},
      {"missing key", "POST", "/v1/chat/completions", kChat, 401, "invalid_api_key", false},
      {"unsupported path", "GET", "/v2/everything", "", 404, ""},
      {"unsupported method", "DELETE", "/v1/chat/completions", "", 405, ""},
      {"huge body", "POST", "/v1/chat/completions", std::string(100 * 1024, 'x'), 413, ""},
  };
  for (const Case& k : cases) {
    std::vector<io::HttpHeader> h = k.with_key ? auth : std::vector<io::HttpHeader>{};
    h.push_back({"Content-Type", "application/json"});
    auto r = io::http_fetch(k.method, url(k.path), k.body, h, std::chrono::seconds(5));
    ASSERT_TRUE(r) << k.name << ": " << r.error();
    EXPECT_EQ(r->status, k.status) << k.name << ": " << r->body;
    EXPECT_EQ(error_code(r->body), k.code) << k.name;
  }
  auto bad_key = post("/v1/chat/completions", kChat, {{"Authorization", "Bearer kvg-wrong"}});
  EXPECT_EQ(bad_key.status, 401);
  auto huge_header =
      post("/v1/chat/completions", kChat,
           {{"Authorization", "Bearer " + key}, {"X-Big", std::string(20 * 1024, 'h')}});
  EXPECT_EQ(huge_header.status, 431);
  auto ok = post("/v1/chat/completions", kChat, auth);
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(metric("kvgate_requests_total", {{"tenant", "t1"}, {"status", "200"}}), 1);

  // Raw sockets: TLS garbage on the plain port, and a client too slow to send its head.
  net::io_context io;
  {
    tcp::socket s(io);
    s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), gw_->ports()[0]));
    const unsigned char hello[] = {0x16, 0x03, 0x01, 0x00, 0xa5, 0x01, 0x00, 0x00, 0xa1, 0x03,
                                   0x03, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08};
    net::write(s, net::buffer(hello, sizeof hello));
    std::string got;
    char buf[1024];
    boost::system::error_code ec;
    while (!ec) {
      size_t n = s.read_some(net::buffer(buf), ec);
      got.append(buf, n);
    }
    EXPECT_TRUE(got.empty() || got.starts_with("HTTP/1.1 400")) << got;
  }
  {
    auto t0 = std::chrono::steady_clock::now();
    tcp::socket s(io);
    s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), gw_->ports()[0]));
    net::write(s, net::buffer(std::string("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")));
    char buf[1024];
    boost::system::error_code ec;
    while (!ec) s.read_some(net::buffer(buf), ec);  // the gateway closes it
    auto waited = std::chrono::steady_clock::now() - t0;
    EXPECT_GE(waited, std::chrono::milliseconds(900));
    EXPECT_LT(waited, std::chrono::seconds(5));
  }
  EXPECT_EQ(io::http_fetch("GET", url("/health"))->status, 200);
}

INSTANTIATE_TEST_SUITE_P(Threads, GatewayTest, ::testing::Values(1, 2),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return std::to_string(i.param) + "Thread" + (i.param > 1 ? "s" : "");
                         });

}  // namespace gateway_test
}  // namespace kvgate::gateway
