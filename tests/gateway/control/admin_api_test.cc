// AdminApi in process: a real listener on an ephemeral port in front of a PoolRuntime
// whose endpoints are never contacted (no scraper): the token, the routes and statuses,
// endpoints added and removed, a breaker opened by failures, policy changes, and the
// sections other components register. Time is a ManualClock: it moves only when a test
// says so.
// GCC 12 reports a false -Wmismatched-new-delete on Asio coroutine frames (GCC bug 109224).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include "gateway/control/admin_api.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json.hpp>
#include <thread>

#include "../../integration/support/eventually.h"
#include "gateway/data/pool_runtime.h"
#include "io/http_client.h"

namespace kvgate::gateway {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;

class AdminApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PoolConfig config;
    config.name = "main";
    config.router.policy = {"kv-cost", {{"overlap_weight", "2"}}};
    config.router.overlap_source = route::OverlapSource::kApprox;
    config.endpoints.push_back({.url = "http://127.0.0.1:9001", .rack = "r1"});
    config.endpoints.push_back({.url = "http://127.0.0.1:9002", .rack = "r2"});
    auto pool = PoolRuntime::create(config, {.failures = 2, .open_for = 60 * kSecond},
                                    io_.get_executor(), metrics_, clock_);
    ASSERT_TRUE(pool.ok()) << pool.error();
    pool_ = std::move(*pool);
    thread_ = std::thread([this] { io_.run(); });
    // One adapter of the pool's base model, with an alias (RouteViewOfAnAdapter...).
    std::vector<ModelConfig> adapters = {{.name = "sql",
                                          .aliases = {"sql-alias"},
                                          .pool = "main",
                                          .served_name = "sql",
                                          .base = "base"}};
    auto admin = AdminApi::start(
        {.address = "127.0.0.1", .port = 0, .token = "t0k"}, io_.get_executor(),
        {{.pool = pool_.get(), .feed = nullptr, .adapters = std::move(adapters)}}, clock_);
    ASSERT_TRUE(admin.ok()) << admin.error();
    admin_ = std::move(*admin);
    base_ = "http://127.0.0.1:" + std::to_string(admin_->port());
  }
  void TearDown() override {
    if (admin_) admin_->stop();
    work_.reset();
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }

  io::HttpClientResponse call(const std::string& method, const std::string& path,
                              const std::string& body = {}, std::string token = "t0k") {
    std::vector<io::HttpHeader> headers;
    if (!token.empty()) headers.push_back({"Authorization", "Bearer " + token});
    auto r = io::http_fetch(method, base_ + path, body, headers, std::chrono::seconds(10));
    EXPECT_TRUE(r.ok()) << r.error();
    return r.ok() ? *r : io::HttpClientResponse{};
  }
  // With an Authorization header of any scheme ("Basic ...").
  io::HttpClientResponse call_with(const std::string& path, const std::string& authorization) {
    std::vector<io::HttpHeader> headers;
    if (!authorization.empty()) headers.push_back({"Authorization", authorization});
    auto r = io::http_fetch("GET", base_ + path, {}, headers, std::chrono::seconds(10));
    EXPECT_TRUE(r.ok()) << r.error();
    return r.ok() ? *r : io::HttpClientResponse{};
  }
  json::value get(const std::string& path) {
    auto r = call("GET", path);
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
    return json::parse(r.body);
  }

  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_{io_.get_executor()};
  GatewayMetrics metrics_;
  ManualClock clock_{kSecond};
  std::unique_ptr<PoolRuntime> pool_;
  std::unique_ptr<AdminApi> admin_;
  std::thread thread_;
  std::string base_;
};

TEST_F(AdminApiTest, TokenIsRequired) {
  EXPECT_EQ(call("GET", "/admin/pools", {}, "").status, 401);
  EXPECT_EQ(call("GET", "/admin/pools", {}, "t0K").status, 401);
  auto r = call("GET", "/admin/pools", {}, "wrong");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(json::parse(r.body).at("error").at("code").as_string(), "invalid_admin_token");
  EXPECT_EQ(call("GET", "/admin/pools").status, 200);
}

TEST_F(AdminApiTest, FailedAuthenticationsAreRateLimited) {
  // Ten failures from one address within a minute lock it out for the rest of it: then
  // even the right token is refused, unchecked, with 429 and Retry-After.
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(call("GET", "/admin/pools", {}, "guess" + std::to_string(i)).status, 401) << i;
  }
  for (const std::string token : {"guess", "t0k", ""}) {
    auto r = call("GET", "/admin/pools", {}, token);
    EXPECT_EQ(r.status, 429) << token;
    EXPECT_EQ(json::parse(r.body).at("error").at("code").as_string(),
              "too_many_failed_authentications");
    ASSERT_NE(r.header("retry-after"), nullptr);
    const int retry = std::stoi(*r.header("retry-after"));
    EXPECT_GE(retry, 50);
    EXPECT_LE(retry, 60);
    EXPECT_EQ(r.body.find("t0k"), std::string::npos);
  }
  // The lockout lasts to the end of the window on the gateway's clock, and no longer.
  clock_.advance(59 * kSecond);
  EXPECT_EQ(call("GET", "/admin/pools").status, 429);
  clock_.advance(kSecond);
  EXPECT_EQ(call("GET", "/admin/pools").status, 200);
}

TEST_F(AdminApiTest, ListsEndpointsWithTheirBreakerAndLoad) {
  json::value v = get("/admin/pools/main/endpoints");
  const json::array& eps = v.at("endpoints").as_array();
  ASSERT_EQ(eps.size(), 2u);
  EXPECT_EQ(eps[0].at("url").as_string(), "http://127.0.0.1:9001");
  EXPECT_EQ(eps[1].at("rack").as_string(), "r2");
  EXPECT_TRUE(eps[0].at("metrics").is_null());  // never scraped
  EXPECT_TRUE(eps[0].at("kv_events").is_null());
  EXPECT_EQ(eps[0].at("breaker").at("state").as_string(), "closed");

  // Two failures open endpoint 1's breaker (failures: 2).
  pool_->endpoint_result(1, false);
  pool_->endpoint_result(1, false);
  json::value one;
  // Waits for the pool's I/O thread to apply the results.
  testing::eventually(
      [&] {
        one = get("/admin/pools/main/endpoints/1");
        return one.at("breaker").at("state").as_string() == "open";
      },
      std::chrono::seconds(1));
  EXPECT_EQ(one.at("breaker").at("state").as_string(), "open");
  EXPECT_EQ(one.at("health").as_string(), "unhealthy");
  EXPECT_GT(one.at("breaker").at("open_for_ms").to_number<double>(), 50'000);

  json::value pools = get("/admin/pools");
  EXPECT_EQ(pools.at("pools").at(0).at("policy").as_string(), "kv-cost");
  EXPECT_EQ(get("/admin/pools/main").at("endpoints").as_array().size(), 2u);
}

TEST_F(AdminApiTest, AddsAndRemovesEndpoints) {
  auto r = call("POST", "/admin/pools/main/endpoints",
                R"({"url":"http://127.0.0.1:9003","role":"decode","zone":"z"})");
  ASSERT_EQ(r.status, 201) << r.body;
  const int64_t id = json::parse(r.body).at("id").as_int64();
  EXPECT_EQ(id, 2);
  json::value e = get("/admin/pools/main/endpoints/2");
  EXPECT_EQ(e.at("role").as_string(), "decode");
  EXPECT_EQ(e.at("zone").as_string(), "z");
  EXPECT_EQ(
      call("POST", "/admin/pools/main/endpoints", R"({"url":"http://127.0.0.1:9003"})").status,
      409);
  r = call("POST", "/admin/pools/main/endpoints", R"({"url":"http://127.0.0.1:9004","role":"x"})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("role"), std::string::npos) << r.body;

  EXPECT_EQ(call("DELETE", "/admin/pools/main/endpoints/2?timeout_ms=abc").status, 400);
  r = call("DELETE", "/admin/pools/main/endpoints/2?timeout_ms=1000");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(json::parse(r.body).at("drained").as_bool());
  EXPECT_EQ(call("GET", "/admin/pools/main/endpoints/2").status, 404);
  EXPECT_EQ(call("DELETE", "/admin/pools/main/endpoints/2").status, 404);
  EXPECT_EQ(pool_->endpoints().size(), 2u);
}

TEST_F(AdminApiTest, RouteViewAndPolicy) {
  auto r = call(
      "POST", "/admin/pools/main/route",
      R"({"prompt":"the quick brown fox jumps over the lazy dog, twice over","max_tokens":4})");
  ASSERT_EQ(r.status, 200) << r.body;
  json::value v = json::parse(r.body);
  EXPECT_TRUE(v.at("decision").at("accepted").as_bool());
  EXPECT_EQ(v.at("endpoints").as_array().size(), 2u);
  EXPECT_EQ(v.at("policy").as_string(), "kv-cost");

  json::value p = get("/admin/pools/main/policy");
  EXPECT_DOUBLE_EQ(p.at("params").at("overlap_weight").to_number<double>(), 2);
  r = call("PATCH", "/admin/pools/main/policy", R"({"params.overlap_weight":5})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_DOUBLE_EQ(
      get("/admin/pools/main/policy").at("params").at("overlap_weight").to_number<double>(), 5);
  r = call("PATCH", "/admin/pools/main/policy", R"({"params":{"temperature":"hot"}})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("temperature"), std::string::npos) << r.body;
  EXPECT_EQ(call("POST", "/admin/pools/main/policy", "{}").status, 405);
}

TEST_F(AdminApiTest, RouteViewOfAnAdapterRoutesAsItsRequests) {
  // The placement holds "sql" on endpoint 1 only: its requests go nowhere else.
  asio::co_spawn(io_, pool_->with_router([&](route::Router& r) {
    EXPECT_TRUE(r.pool().set_lora_placed(0, route::LoraPlaced{}));
    EXPECT_TRUE(r.pool().set_lora_placed(1, route::LoraPlaced{.loaded = {"sql"}, .loading = {}}));
  }),
                 asio::use_future)
      .get();
  const std::string prompt = R"("prompt":"select every row of the orders table","max_tokens":4)";
  for (const std::string model : {"sql", "sql-alias"}) {
    auto r =
        call("POST", "/admin/pools/main/route", R"({"model":")" + model + R"(",)" + prompt + "}");
    ASSERT_EQ(r.status, 200) << r.body;
    json::value v = json::parse(r.body);
    EXPECT_EQ(v.at("adapter").as_string(), "sql") << model;
    EXPECT_FALSE(v.at("cache_salt").as_bool());
    EXPECT_TRUE(v.at("decision").at("accepted").as_bool());
    EXPECT_EQ(v.at("decision").at("endpoint").as_int64(), 1) << model;
    // Endpoint 0 was left out before the policy costed the candidates.
    EXPECT_TRUE(v.at("endpoints").at(0).at("cost").is_null()) << r.body;
    EXPECT_FALSE(v.at("endpoints").at(1).at("cost").is_null()) << r.body;
  }
  // The base model (no model, or one that is no adapter of the pool): both are costed.
  for (const std::string& body : {"{" + prompt + "}", R"({"model":"base",)" + prompt + "}",
                                  R"({"model":"base","cache_salt":"tenant-a",)" + prompt + "}"}) {
    auto r = call("POST", "/admin/pools/main/route", body);
    ASSERT_EQ(r.status, 200) << r.body;
    json::value v = json::parse(r.body);
    EXPECT_TRUE(v.at("adapter").is_null()) << body;
    EXPECT_EQ(v.at("cache_salt").as_bool(), body.find("cache_salt") != std::string::npos);
    EXPECT_FALSE(v.at("endpoints").at(0).at("cost").is_null()) << r.body;
    EXPECT_FALSE(v.at("endpoints").at(1).at("cost").is_null()) << r.body;
  }
}

TEST_F(AdminApiTest, RegisteredSections) {
  EXPECT_FALSE(admin_->add_section("pools", [] { return json::value(1); }));
  EXPECT_FALSE(admin_->add_pool_section(
      "policy", [](std::string_view) { return std::optional<json::value>(1); }));
  EXPECT_EQ(call("GET", "/admin/warmup").status, 404);
  ASSERT_TRUE(admin_->add_section("warmup", [] { return json::value({{"state", "done"}}); }));
  ASSERT_TRUE(admin_->add_pool_section("autoscaler",
                                       [](std::string_view pool) -> std::optional<json::value> {
                                         if (pool != "main") return std::nullopt;
                                         return json::value({{"replicas", 3}});
                                       }));
  EXPECT_EQ(get("/admin/warmup").at("state").as_string(), "done");
  EXPECT_EQ(get("/admin/pools/main/autoscaler").at("replicas").as_int64(), 3);
  EXPECT_EQ(call("POST", "/admin/warmup").status, 405);
  json::value index = get("/admin");
  EXPECT_EQ(index.at("sections").at(0).as_string(), "warmup");
  EXPECT_EQ(index.at("pool_sections").at(0).as_string(), "autoscaler");
  EXPECT_EQ(index.at("pools").at(0).as_string(), "main");

  // A section that waits for something answers from a coroutine.
  EXPECT_FALSE(admin_->add_async_section(
      "ui", []() -> asio::awaitable<json::value> { co_return json::value(1); }));
  ASSERT_TRUE(admin_->add_async_section("tenants", []() -> asio::awaitable<json::value> {
    co_return json::value({{"tenants", json::array()}});
  }));
  EXPECT_TRUE(get("/admin/tenants").at("tenants").as_array().empty());
  EXPECT_EQ(get("/admin").at("sections").as_array().size(), 2u);
}

TEST_F(AdminApiTest, ServesTheStatusPageBehindTheToken) {
  // Without credentials: 401 with the Basic challenge that opens a browser's login prompt.
  auto r = call("GET", "/admin/ui", {}, "");
  EXPECT_EQ(r.status, 401);
  ASSERT_NE(r.header("www-authenticate"), nullptr);
  EXPECT_TRUE(r.header("www-authenticate")->starts_with("Basic realm="));
  EXPECT_EQ(r.body.find("<html"), std::string::npos);
  EXPECT_EQ(call("GET", "/admin/ui/status.js", {}, "").status, 401);
  EXPECT_EQ(call_with("/admin/ui", "Basic YWRtaW46bm9wZQ==").status, 401);  // admin:nope
  EXPECT_EQ(call_with("/admin/ui", "Basic !!!!").status, 401);
  // The API's own challenge is unchanged.
  EXPECT_EQ(*call("GET", "/admin/pools", {}, "").header("www-authenticate"), "Bearer");

  // The bearer token, or the token as a Basic password (any user name).
  for (const std::string auth : {"Bearer t0k", "Basic YWRtaW46dDBr", "Basic OnQwaw=="}) {
    r = call_with("/admin/ui", auth);
    ASSERT_EQ(r.status, 200) << auth << ": " << r.body;
    ASSERT_NE(r.header("content-type"), nullptr);
    EXPECT_EQ(*r.header("content-type"), "text/html; charset=utf-8");
    ASSERT_NE(r.header("cache-control"), nullptr);
    EXPECT_EQ(*r.header("cache-control"), "no-cache, private");
    ASSERT_NE(r.header("content-security-policy"), nullptr);
    EXPECT_NE(r.body.find("<title>kvgate status</title>"), std::string::npos);
    EXPECT_NE(r.body.find("/admin/ui/status.js"), std::string::npos);
  }
  EXPECT_EQ(call("GET", "/admin/ui/").status, 200);
  r = call("GET", "/admin/ui/status.js");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(*r.header("content-type"), "text/javascript; charset=utf-8");
  EXPECT_NE(r.body.find("/admin/pools/"), std::string::npos);
  r = call("GET", "/admin/ui/status.css");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(*r.header("content-type"), "text/css; charset=utf-8");
  // Basic works for the API too: the page's calls carry what the browser was given.
  EXPECT_EQ(call_with("/admin/pools", "Basic YWRtaW46dDBr").status, 200);
  EXPECT_EQ(call("GET", "/admin/ui/nope.js").status, 404);
  EXPECT_EQ(call("GET", "/admin/ui/status.js/x").status, 404);
  EXPECT_EQ(call("POST", "/admin/ui").status, 405);
  EXPECT_FALSE(admin_->add_section("ui", [] { return json::value(1); }));
}

TEST_F(AdminApiTest, ThePageAskedForWithoutCredentialsIsNoGuess) {
  // A browser asks for the page without credentials until challenged: that must not lock
  // its address out (wrong credentials still count).
  for (int i = 0; i < 12; ++i) EXPECT_EQ(call("GET", "/admin/ui", {}, "").status, 401) << i;
  EXPECT_EQ(call("GET", "/admin/pools").status, 200);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(call_with("/admin/ui", "Basic YWRtaW46bm9wZQ==").status, 401) << i;
  }
  EXPECT_EQ(call("GET", "/admin/ui").status, 429);
}

TEST_F(AdminApiTest, EndpointsArePagedWithTheWholePoolSummed) {
  json::value v = get("/admin/pools/main/endpoints?offset=1&limit=1");
  EXPECT_EQ(v.at("total").as_int64(), 2);
  EXPECT_EQ(v.at("offset").as_int64(), 1);
  ASSERT_EQ(v.at("endpoints").as_array().size(), 1u);
  EXPECT_EQ(v.at("endpoints").at(0).at("id").as_int64(), 1);
  EXPECT_EQ(v.at("summary").at("endpoints").as_int64(), 2);
  EXPECT_EQ(v.at("summary").at("healthy").as_int64(), 2);
  EXPECT_TRUE(v.at("summary").at("kv_usage_mean").is_null());  // never scraped
  EXPECT_EQ(get("/admin/pools/main/endpoints?offset=5").at("endpoints").as_array().size(), 0u);
  EXPECT_EQ(get("/admin/pools/main/endpoints?limit=0").at("summary").at("endpoints").as_int64(), 2);

  // Two failures open endpoint 1's breaker: the health filter pages the unhealthy only.
  pool_->endpoint_result(1, false);
  pool_->endpoint_result(1, false);
  testing::eventually(
      [&] {
        return get("/admin/pools/main/endpoints?health=unhealthy").at("total").as_int64() == 1;
      },
      std::chrono::seconds(1));
  v = get("/admin/pools/main/endpoints?health=unhealthy");
  ASSERT_EQ(v.at("endpoints").as_array().size(), 1u);
  EXPECT_EQ(v.at("endpoints").at(0).at("id").as_int64(), 1);
  EXPECT_EQ(v.at("summary").at("breakers_open").as_int64(), 1);
  EXPECT_EQ(v.at("summary").at("endpoints").as_int64(), 2);

  for (const char* bad : {"?limit=x", "?offset=-1", "?health=sick", "?limit=99999999"}) {
    auto r = call("GET", std::string("/admin/pools/main/endpoints") + bad);
    EXPECT_EQ(r.status, 400) << bad << ": " << r.body;
  }
}

TEST_F(AdminApiTest, RecentRequestsAreKeptOnlyWhileWatchedAndExplainedAgain) {
  const std::vector<kv::BlockKey> keys = {11, 12, 13, 14};
  auto send = [&](route::RequestId id) {
    route::RouteRequest r;
    r.id = id;
    r.keys = keys;
    r.prompt_tokens = 64;
    return asio::co_spawn(io_, pool_->pick(r, {}), asio::use_future).get();
  };
  // Nobody looked yet: nothing is recorded.
  ASSERT_TRUE(send(1).decision.accepted());
  json::value v = get("/admin/pools/main/recent");
  EXPECT_TRUE(v.at("requests").as_array().empty());
  EXPECT_EQ(v.at("watching_s").as_int64(), 60);
  // Looking started the recording: the next requests are listed, newest first.
  const Pick second = send(2);
  ASSERT_TRUE(second.decision.accepted());
  ASSERT_TRUE(send(3).decision.accepted());
  v = get("/admin/pools/main/recent");
  const json::array& requests = v.at("requests").as_array();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests.at(0).at("id").as_int64(), 3);
  EXPECT_EQ(requests.at(1).at("id").as_int64(), 2);
  EXPECT_EQ(requests.at(1).at("prompt_blocks").as_int64(), 4);
  EXPECT_EQ(requests.at(1).at("endpoint").as_int64(), second.decision.endpoint);
  // One is explained again, as the pool is now.
  auto r = call("POST", "/admin/pools/main/route", R"({"recent_id":2})");
  ASSERT_EQ(r.status, 200) << r.body;
  json::value x = json::parse(r.body);
  EXPECT_EQ(x.at("prompt_blocks").as_int64(), 4);
  EXPECT_EQ(x.at("recent").at("id").as_int64(), 2);
  EXPECT_EQ(x.at("recent").at("url").as_string(), second.endpoint->url);
  EXPECT_EQ(x.at("endpoints").as_array().size(), 2u);
  EXPECT_EQ(call("POST", "/admin/pools/main/route", R"({"recent_id":99})").status, 404);
  EXPECT_EQ(call("POST", "/admin/pools/main/route", R"({"recent_id":"x"})").status, 400);
  // A minute after the last look, decisions are no longer recorded.
  clock_.advance(61 * kSecond);
  ASSERT_TRUE(send(4).decision.accepted());
  asio::co_spawn(io_, pool_->with_router([&](route::Router&) {
    EXPECT_EQ(pool_->recent().entries().size(), 2u);
  }),
                 asio::use_future)
      .get();
}

TEST_F(AdminApiTest, TheIndexSaysWhichPoolSectionsHaveSomething) {
  ASSERT_TRUE(admin_->add_pool_section("autoscaler",
                                       [](std::string_view pool) -> std::optional<json::value> {
                                         if (pool != "main") return std::nullopt;
                                         return json::value({{"replicas", 3}});
                                       }));
  ASSERT_TRUE(admin_->add_pool_section(
      "queue", [](std::string_view) -> std::optional<json::value> { return std::nullopt; }));
  json::value index = get("/admin");
  const json::array& main = index.at("pool_sections_by_pool").at("main").as_array();
  ASSERT_EQ(main.size(), 1u);
  EXPECT_EQ(main.at(0).as_string(), "autoscaler");
  EXPECT_EQ(index.at("pool_sections").as_array().size(), 2u);
}

}  // namespace
}  // namespace kvgate::gateway
