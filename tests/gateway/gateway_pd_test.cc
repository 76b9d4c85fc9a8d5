// The gateway in process running the P/D flow against scripted prefill and decode
// engines: the decode engine gets the prefill engine's kv_transfer_params, a decode
// 503 before the first byte is retried on another decode endpoint (with a new prefill
// hop), and failures before any byte end in OpenAI-style JSON errors.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/json.hpp>

#include "core/metrics/prometheus_text.h"
#include "gateway/gateway.h"
#include "io/http_client.h"
#include "io/http_server.h"
#include "openai/error.h"

namespace kvgate::gateway {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace gateway_pd_test {

namespace json = boost::json;
using io::HttpRequest;
using io::HttpResponse;
using io::ResponseStream;

const std::string kTransfer =
    R"({"do_remote_prefill":true,"do_remote_decode":false,"remote_block_ids":[0,1],)"
    R"("remote_engine_id":"engine-p","remote_host":"127.0.0.1","remote_port":7000})";

struct Fake {
  std::atomic<int> hits{0};
  std::unique_ptr<io::HttpServer> server;
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server->port()); }
};

// A prefill engine: answers `status`; on 200 a one-token answer with kTransfer.
std::unique_ptr<Fake> prefill_engine(int status = 200) {
  auto f = std::make_unique<Fake>();
  auto s = io::HttpServer::start(
      {}, [f = f.get(), status](HttpRequest&& r, std::shared_ptr<ResponseStream> out) {
        ++f->hits;
        if (status != 200) {
          out->respond(HttpResponse{
              status, "application/json", {}, openai::vllm_error_json(status, "scripted refusal")});
          return;
        }
        auto body = json::parse(r.body).as_object();
        EXPECT_EQ(body.at("max_tokens"), 1);
        EXPECT_EQ(body.at("stream"), false);
        out->respond(
            HttpResponse{200,
                         "application/json",
                         {},
                         R"({"id":"p","object":"chat.completion","choices":[{"index":0,"message":)"
                         R"({"role":"assistant","content":"x"}}],"kv_transfer_params":)" +
                             kTransfer + "}"});
      });
  EXPECT_TRUE(s) << s.error();
  f->server = std::move(*s);
  return f;
}

// A decode engine: 503 for its first `refuse` requests, then streams two tokens whose
// text is the remote_engine_id it was given (or "none").
std::unique_ptr<Fake> decode_engine(int refuse = 0) {
  auto f = std::make_unique<Fake>();
  auto s = io::HttpServer::start(
      {}, [f = f.get(), refuse](HttpRequest&& r, std::shared_ptr<ResponseStream> out) {
        if (++f->hits <= refuse) {
          out->respond(
              HttpResponse{503, "application/json", {}, openai::vllm_error_json(503, "starting")});
          return;
        }
        auto body = json::parse(r.body).as_object();
        std::string engine = "none";
        if (const json::value* kt = body.if_contains("kv_transfer_params")) {
          engine = json::value_to<std::string>(kt->at("remote_engine_id"));
        }
        std::string chunk =
            R"(data: {"id":"d","object":"chat.completion.chunk","choices":[{"index":0,"delta":)"
            R"({"content":")" +
            engine + R"("},"finish_reason":null}]})" + "\n\n";
        out->start(200, "text/event-stream");
        out->write(chunk);
        out->write(chunk);
        out->write("data: [DONE]\n\n");
        out->finish();
      });
  EXPECT_TRUE(s) << s.error();
  f->server = std::move(*s);
  return f;
}

std::string dead_url() {
  auto s = io::HttpServer::start({}, [](HttpRequest&&, std::shared_ptr<ResponseStream>) {});
  std::string url = "http://127.0.0.1:" + std::to_string((*s)->port());
  (*s)->stop(std::chrono::milliseconds(0));
  return url;
}

class GatewayPdTest : public ::testing::Test {
 protected:
  // One pool "pd": `endpoints` as (url, role, rack).
  void start(const std::vector<route::EndpointSpec>& endpoints) {
    GatewayConfig c;
    c.file = "test";
    c.listeners.push_back({.address = "127.0.0.1", .port = 0});
    c.timeouts.header = std::chrono::milliseconds(1000);
    c.breaker.failures = 100;
    PoolConfig p;
    p.name = "pd";
    p.router.policy.name = "round-robin";
    p.router.overlap_source = route::OverlapSource::kApprox;
    p.endpoints = endpoints;
    c.pools.push_back(std::move(p));
    c.models.push_back({.name = "m", .pool = "pd", .served_name = "m"});
    auto g = Gateway::start(std::move(c));
    ASSERT_TRUE(g) << g.error();
    gw_ = std::move(*g);
  }
  io::HttpClientResponse post(std::string body) {
    auto r = io::http_fetch(
        "POST", "http://127.0.0.1:" + std::to_string(gw_->ports()[0]) + "/v1/chat/completions",
        body, {{"Content-Type", "application/json"}}, std::chrono::seconds(10));
    EXPECT_TRUE(r) << r.error();
    return r ? *r : io::HttpClientResponse{};
  }
  double metric(std::string_view name, const metrics::Labels& labels) {
    auto m = metrics::parse_prometheus_text(gw_->metrics().render());
    return m ? m->value(name, labels).value_or(0) : -1;
  }
  std::unique_ptr<Gateway> gw_;
};

const std::string kStream =
    R"({"model":"m","messages":[{"role":"user","content":"hello"}],"max_tokens":5,"stream":true})";

route::EndpointSpec spec(const std::string& url, route::Role role, const std::string& rack) {
  return {.url = url, .role = role, .zone = "z1", .rack = rack};
}

TEST_F(GatewayPdTest, DecodeGetsTheTransferParamsAndA503IsRetriedWithANewPrefill) {
  auto p = prefill_engine();
  auto near = decode_engine(/*refuse=*/1);  // the prefill endpoint's rack: picked first
  auto far = decode_engine();
  start({spec(p->url(), route::Role::kPrefill, "a"), spec(near->url(), route::Role::kDecode, "a"),
         spec(far->url(), route::Role::kDecode, "b")});
  auto r = post(kStream);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(*r.header("x-kvgate-endpoint"), far->url());
  EXPECT_EQ(*r.header("x-kvgate-prefill-endpoint"), p->url());
  // Both tokens carry the remote_engine_id the decode engine was given.
  EXPECT_NE(r.body.find(R"("content":"engine-p")"), std::string::npos) << r.body;
  EXPECT_EQ(near->hits, 1);
  EXPECT_EQ(p->hits, 2);  // the retry is a new decision: a new prefill hop
  EXPECT_EQ(metric("kvgate_pd_hop_failures_total", {{"hop", "decode"}, {"kind", "status_503"}}), 1);
  EXPECT_EQ(metric("kvgate_pd_prefill_requests_total", {{"endpoint", p->url()}}), 2);
  EXPECT_EQ(metric("kvgate_upstream_retries_total", {{"pool", "pd"}}), 1);
  // The next one decodes next to the prefill engine again (no longer refusing).
  auto again = post(kStream);
  ASSERT_EQ(again.status, 200);
  EXPECT_EQ(*again.header("x-kvgate-endpoint"), near->url());
}

TEST_F(GatewayPdTest, UnreachablePrefillWithNoOtherEndsIn502JsonError) {
  auto d = decode_engine();
  const std::string dead = dead_url();
  start({spec(dead, route::Role::kPrefill, "a"), spec(d->url(), route::Role::kDecode, "a")});
  auto r = post(kStream);
  EXPECT_EQ(r.status, 502);
  ASSERT_NE(r.header("content-type"), nullptr);
  EXPECT_EQ(*r.header("content-type"), "application/json");
  auto e = json::parse(r.body).at("error").as_object();
  EXPECT_EQ(e.at("code"), "upstream_unavailable");
  EXPECT_NE(json::value_to<std::string>(e.at("message")).find(dead), std::string::npos) << r.body;
  EXPECT_EQ(d->hits, 0);  // never reached the decode engine
  EXPECT_EQ(metric("kvgate_requests_total", {{"status", "502"}}), 1);
}

TEST_F(GatewayPdTest, PrefillEngineRefusalIsPassedThrough) {
  auto p = prefill_engine(400);
  auto d = decode_engine();
  start({spec(p->url(), route::Role::kPrefill, "a"), spec(d->url(), route::Role::kDecode, "a")});
  auto r = post(kStream);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("scripted refusal"), std::string::npos) << r.body;
  EXPECT_EQ(d->hits, 0);
  EXPECT_EQ(p->hits, 1);  // not retried: every engine would refuse it
}

}  // namespace gateway_pd_test
}  // namespace kvgate::gateway
