// The prefill hop of a disaggregated request against scripted prefill engines: what the
// prefill engine is sent, what the decode request becomes, and the router's load for
// the request on both endpoints after success and after each kind of failure.
#include "gateway/data/disagg_flow.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json.hpp>
#include <mutex>
#include <thread>

#include "../../integration/support/refusing_port.h"
#include "core/metrics/prometheus_text.h"
#include "env/system_clock.h"
#include "gateway/data/pool_runtime.h"
#include "io/http_server.h"

namespace kvgate::gateway {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;

const std::string kAnswer =
    R"({"id":"cmpl-1","object":"chat.completion","choices":[{"index":0,"message":)"
    R"({"role":"assistant","content":"x"},"finish_reason":"length"}],)"
    R"("usage":{"prompt_tokens":64,"completion_tokens":1,"total_tokens":65},)"
    R"("kv_transfer_params":{"do_remote_prefill":true,"do_remote_decode":false,)"
    R"("remote_block_ids":[0,1,2,3],"remote_engine_id":"engine-p","remote_host":"127.0.0.1",)"
    R"("remote_port":7000,"tp_size":1}})";

// A scripted prefill engine: answers `status` with `body`, remembers the last request.
struct FakePrefill {
  std::mutex mu;
  io::HttpRequest last;
  int hits = 0;
  std::unique_ptr<io::HttpServer> server;

  FakePrefill(int status, std::string body) {
    auto s = io::HttpServer::start(
        {}, [this, status, body](io::HttpRequest&& r, std::shared_ptr<io::ResponseStream> out) {
          {
            std::lock_guard lock(mu);
            last = std::move(r);
            ++hits;
          }
          out->respond(io::HttpResponse{status, "application/json", {}, body});
        });
    EXPECT_TRUE(s) << s.error();
    server = std::move(*s);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server->port()); }
};

class DisaggFlowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    work_.emplace(io_.get_executor());
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    lease_ = RouteLease();  // releases what a kDone hop left held, while the pool exists
    // The context stops before the pool goes: what the hops posted to the pool's strand
    // (releases, results) is dropped unrun instead of running on a freed pool.
    work_.reset();
    io_.stop();
    thread_.join();
    pool_.reset();
    upstream_.reset();
  }

  // A pool of one prefill endpoint at `prefill_url` and one decode endpoint.
  void make_pool(const std::string& prefill_url) {
    PoolConfig p;
    p.name = "pd";
    p.router.policy.name = "round-robin";
    p.router.overlap_source = route::OverlapSource::kApprox;
    p.endpoints = {{.url = prefill_url, .role = route::Role::kPrefill, .rack = "a"},
                   {.url = "http://127.0.0.1:1", .role = route::Role::kDecode, .rack = "a"}};
    auto pool = PoolRuntime::create(p, {}, io_.get_executor(), metrics_, env::system_clock());
    ASSERT_TRUE(pool) << pool.error();
    pool_ = std::move(*pool);
    upstream_ = std::make_unique<io::UpstreamClient>(
        io_.get_executor(), io::UpstreamOptions{.connect_timeout = std::chrono::seconds(2),
                                                .head_timeout = std::chrono::seconds(5)});
  }

  // Routes one request (id 7, 64 prompt tokens) and runs its prefill hop.
  PrefillHop run(const std::string& body) {
    route::RouteRequest rr;
    rr.id = 7;
    keys_ = {11, 12, 13, 14};
    rr.keys = keys_;
    rr.prompt_tokens = 64;
    rr.expected_output_tokens = 10;
    Pick pick = asio::co_spawn(io_, pool_->pick(rr, {}), asio::use_future).get();
    EXPECT_TRUE(pick.decision.accepted());
    EXPECT_TRUE(pick.decision.prefill_endpoint.has_value());
    decision_ = pick.decision;
    lease_ = RouteLease(*pool_, rr.id, alive_);
    request_.target = "/v1/chat/completions";
    request_.headers = {{"Content-Type", "application/json"}, {"Accept", "text/event-stream"}};
    request_.body = body;
    return asio::co_spawn(io_,
                          run_prefill_hop({*upstream_, *pool_, metrics_, timeouts_, decision_,
                                           lease_, request_, /*trace=*/nullptr}),
                          asio::use_future)
        .get();
  }

  // The router's view of endpoint `id` and of request 7, read on the strand.
  struct View {
    route::RouterLoad prefill, decode;
    bool tracked = false;
  };
  View view() {
    View v;
    asio::co_spawn(io_, pool_->with_router([&v](route::Router& r) {
      v.prefill = r.pool().get(0)->load;
      v.decode = r.pool().get(1)->load;
      v.tracked = r.pool().request(7) != nullptr;
    }),
                   asio::use_future)
        .get();
    return v;
  }

  double metric(const std::string& name, const metrics::Labels& labels) {
    auto m = metrics::parse_prometheus_text(metrics_.render());
    return m ? m->value(name, labels).value_or(0) : -1;
  }

  asio::io_context io_;
  std::shared_ptr<std::atomic<bool>> alive_ = std::make_shared<std::atomic<bool>>(true);
  RouteLease lease_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::thread thread_;
  GatewayMetrics metrics_;
  TimeoutConfig timeouts_;
  std::unique_ptr<PoolRuntime> pool_;
  std::unique_ptr<io::UpstreamClient> upstream_;
  std::vector<kv::BlockKey> keys_;
  route::Decision decision_;
  io::UpstreamRequest request_;
};

std::string header_of(const io::UpstreamRequest& r, std::string_view name) {
  for (const auto& [n, v] : r.headers) {
    if (n == name) return v;
  }
  return "(none)";
}

const std::string kStreamBody =
    R"({"model":"served","messages":[{"role":"user","content":"hi"}],"max_tokens":10,)"
    R"("stream":true,"stream_options":{"include_usage":true}})";

TEST_F(DisaggFlowTest, PrefillThenDecodeRequestWithTheTransferParams) {
  FakePrefill p(200, kAnswer);
  make_pool(p.url());
  PrefillHop hop = run(kStreamBody);
  ASSERT_EQ(hop.outcome, PrefillHop::kDone) << hop.error;
  EXPECT_EQ(hop.prefill_url, p.url());

  // What the prefill engine got: vLLM's proxy request.
  std::lock_guard lock(p.mu);
  EXPECT_EQ(p.hits, 1);
  EXPECT_EQ(p.last.path, "/v1/chat/completions");
  json::object sent = json::parse(p.last.body).as_object();
  EXPECT_EQ(sent.at("max_tokens"), 1);
  EXPECT_EQ(sent.at("stream"), false);
  EXPECT_FALSE(sent.contains("stream_options"));
  EXPECT_EQ(sent.at("kv_transfer_params").at("do_remote_decode"), true);
  EXPECT_EQ(sent.at("kv_transfer_params").at("remote_engine_id"), nullptr);
  ASSERT_TRUE(p.last.header("x-request-id"));

  // The decode request: the original with the prefill engine's kv_transfer_params, the
  // same X-Request-Id, the original Accept.
  json::object decode = json::parse(hop.decode_request.body).as_object();
  EXPECT_EQ(decode.at("max_tokens"), 10);
  EXPECT_EQ(decode.at("stream"), true);
  EXPECT_EQ(decode.at("stream_options").at("include_usage"), true);
  EXPECT_EQ(decode.at("kv_transfer_params"),
            json::parse(kAnswer).at("kv_transfer_params").as_object());
  EXPECT_EQ(header_of(hop.decode_request, "X-Request-Id"), *p.last.header("x-request-id"));
  EXPECT_EQ(header_of(hop.decode_request, "Accept"), "text/event-stream");

  // The prefill endpoint's part is over; the decode endpoint holds the request.
  View v = view();
  EXPECT_TRUE(v.tracked);
  EXPECT_EQ(v.prefill.in_flight, 0u);
  EXPECT_EQ(v.prefill.active_prefill_tokens, 0u);
  EXPECT_EQ(v.decode.in_flight, 1u);
  EXPECT_GT(v.decode.active_decode_blocks, 0u);
  EXPECT_EQ(metric("kvgate_pd_prefill_requests_total", {{"pool", "pd"}, {"endpoint", p.url()}}), 1);
}

TEST_F(DisaggFlowTest, UnreachablePrefillEndpointIsRetriedAndReleasesBothEndpoints) {
  const kvgate::testing::RefusingPort dead;
  const std::string url = dead.url();
  make_pool(url);
  PrefillHop hop = run(kStreamBody);
  EXPECT_EQ(hop.outcome, PrefillHop::kRetry);
  EXPECT_EQ(hop.failed_endpoint, 0u);
  EXPECT_NE(hop.error.find(url), std::string::npos) << hop.error;
  View v = view();
  EXPECT_FALSE(v.tracked);
  EXPECT_EQ(v.prefill.in_flight, 0u);
  EXPECT_EQ(v.prefill.active_prefill_tokens, 0u);
  EXPECT_EQ(v.prefill.failed_total, 1u);
  EXPECT_EQ(v.decode.in_flight, 0u);
  EXPECT_EQ(v.decode.active_decode_blocks, 0u);
  EXPECT_EQ(metric("kvgate_pd_hop_failures_total",
                   {{"pool", "pd"}, {"hop", "prefill"}, {"kind", "connect"}}),
            1);
  EXPECT_EQ(metric("kvgate_upstream_errors_total", {{"endpoint", url}, {"kind", "connect"}}), 1);
}

TEST_F(DisaggFlowTest, Overloaded503IsRetried) {
  FakePrefill p(503, R"({"error":{"message":"busy"}})");
  make_pool(p.url());
  PrefillHop hop = run(kStreamBody);
  EXPECT_EQ(hop.outcome, PrefillHop::kRetry);
  EXPECT_FALSE(view().tracked);
}

TEST_F(DisaggFlowTest, AnEngineRefusalIsPassedOnAndReleases) {
  const std::string refusal =
      R"({"error":{"message":"prompt too long","type":"BadRequestError","param":null,"code":400}})";
  FakePrefill p(400, refusal);
  make_pool(p.url());
  PrefillHop hop = run(kStreamBody);
  ASSERT_EQ(hop.outcome, PrefillHop::kFail);
  EXPECT_EQ(hop.response.status, 400);
  EXPECT_EQ(hop.response.body, refusal);
  View v = view();
  EXPECT_FALSE(v.tracked);
  EXPECT_EQ(v.decode.in_flight, 0u);
  EXPECT_EQ(v.prefill.in_flight, 0u);
}

TEST_F(DisaggFlowTest, MalformedAnswerIsRetried) {
  FakePrefill p(200, "this is not json");
  make_pool(p.url());
  PrefillHop hop = run(kStreamBody);
  EXPECT_EQ(hop.outcome, PrefillHop::kRetry);
  EXPECT_FALSE(view().tracked);
  EXPECT_EQ(metric("kvgate_pd_hop_failures_total", {{"hop", "prefill"}, {"kind", "protocol"}}), 1);
}

TEST_F(DisaggFlowTest, AnswerWithoutTransferParamsDecodesWithoutThem) {
  FakePrefill p(200, R"({"id":"c","choices":[],"kv_transfer_params":null})");
  make_pool(p.url());
  PrefillHop hop = run(kStreamBody);
  ASSERT_EQ(hop.outcome, PrefillHop::kDone);
  EXPECT_EQ(hop.decode_request.body, kStreamBody);
  EXPECT_EQ(metric("kvgate_pd_hop_failures_total", {{"kind", "no_kv_transfer_params"}}), 1);
  EXPECT_TRUE(view().tracked);
}

TEST(DisaggFlow, DisaggregatedFollowsTheRoutersRule) {
  PoolConfig pool;
  pool.endpoints = {{.url = "http://a:1", .role = route::Role::kBoth},
                    {.url = "http://b:1", .role = route::Role::kDecode}};
  EXPECT_FALSE(disaggregated(pool));  // auto, no prefill role
  pool.router.pd.mode = route::PdMode::kOn;
  EXPECT_TRUE(disaggregated(pool));
  pool.router.pd.mode = route::PdMode::kAuto;
  pool.endpoints.push_back({.url = "http://c:1", .role = route::Role::kPrefill});
  EXPECT_TRUE(disaggregated(pool));
  pool.router.pd.mode = route::PdMode::kOff;
  EXPECT_FALSE(disaggregated(pool));
}

}  // namespace
}  // namespace kvgate::gateway
