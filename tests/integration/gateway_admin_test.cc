// The admin API of a real `kvgate serve` in front of real `kvgate engine` processes:
// endpoint state after scrapes and KV events, an endpoint added at run time that then
// gets traffic, one removed while a stream runs on it (the stream completes, then the
// endpoint is gone), the router's view of a prompt after one engine was warmed with its
// prefix, policy parameters changed and read back, token checks and error statuses.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "support/eventually.h"
#include "support/gateway_fixture.h"

namespace kvgate::testing {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace gateway_admin_test {

namespace json = boost::json;

constexpr const char* kToken = "admin-test-token";

std::string tokenizer_dir() { return source_dir() + "/.deps/fixtures/qwen3"; }

// An engine whose KV events the gateway subscribes to (its PUB binds a wildcard).
struct Engine {
  std::string pub_port = std::to_string(free_port());
  std::unique_ptr<EngineProcess> proc;
  std::string url;

  // Without a tokenizer the engine counts one token per word (faster to start).
  explicit Engine(const std::string& time_scale = "0.01", bool tokenizer = true) {
    std::vector<std::string> args = {
        "--time-scale",         time_scale,           "--model", "sim", "--block-size", "16",
        "--kv-events-endpoint", "tcp://*:" + pub_port};
    if (tokenizer) {
      args.push_back("--tokenizer");
      args.push_back(tokenizer_dir());
    }
    proc = std::make_unique<EngineProcess>(args);
    url = proc->url;
  }
  std::string publisher() const { return "tcp://127.0.0.1:" + pub_port; }
  std::string yaml_entry() const {
    return "      - url: " + url + "\n        kv_events: {publisher: " + publisher() + "}\n";
  }
  void complete(const std::string& prompt) {
    auto r = io::http_fetch("POST", url + "/v1/completions",
                            R"({"model":"sim","prompt":")" + prompt + R"(","max_tokens":1})");
    ASSERT_TRUE(r && r->status == 200);
  }
};

std::string admin_yaml(const std::vector<const Engine*>& engines, const std::string& policy,
                       const std::string& overlap, bool tokenizer = true) {
  std::string y = std::string("listeners:\n  - address: 127.0.0.1\n    port: 0\n") +
                  "admin: {address: 127.0.0.1, port: 0, token: " + kToken + "}\n" +
                  "timeouts: {header_ms: 5000, drain_ms: 5000, connect_ms: 1000}\n" +
                  "pools:\n  sim:\n    block_size: 16\n    scrape_interval_ms: 50\n";
  if (tokenizer) y += "    tokenizer: " + tokenizer_dir() + "/tokenizer.json\n";
  y += "    router:\n      policy: " + policy + "\n      overlap: " + overlap +
       "\n      filters: []\n    endpoints:\n";
  for (const Engine* e : engines) y += e->yaml_entry();
  return y + "models:\n  - name: sim\n    pool: sim\n";
}

// The gateway plus its admin URL.
struct Admin {
  GatewayProcess gw;
  std::string url;

  explicit Admin(const std::string& yaml) : gw(yaml), url(gw.wait_for_admin_url()) {}

  io::HttpClientResponse call(const std::string& method, const std::string& path,
                              const std::string& body = {}, const char* token = kToken) {
    std::vector<io::HttpHeader> headers = {{"Content-Type", "application/json"}};
    if (token) headers.push_back({"Authorization", std::string("Bearer ") + token});
    auto r = io::http_fetch(method, url + path, body, headers, std::chrono::seconds(30));
    if (!r) {
      ADD_FAILURE() << method << " " << path << ": " << r.error();
      return {};
    }
    return *r;
  }
  json::value get_json(const std::string& path) {
    auto r = call("GET", path);
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
    return parse_json(r.body);
  }
  // The endpoint with `url` in the pool's listing, or null.
  json::value endpoint(const std::string& engine_url) {
    json::value list = get_json("/admin/pools/sim/endpoints");
    for (const json::value& e : list.at("endpoints").as_array()) {
      if (e.at("url").as_string() == engine_url) return e;
    }
    return nullptr;
  }
  // Polls the endpoint's state until `pred` holds (at most ~10 s).
  template <typename Pred>
  json::value wait_endpoint(const std::string& engine_url, Pred pred) {
    json::value e;
    for (int i = 0; i < 500; ++i) {
      e = endpoint(engine_url);
      if (!e.is_null() && pred(e)) return e;
      // Waits for the kvgate serve child's view of the endpoint to change.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "endpoint " << engine_url
                  << " never reached the state; last: " << json::serialize(e);
    return e;
  }
};

int64_t as_int(const json::value& v) { return v.to_number<int64_t>(); }

TEST(GatewayAdmin, ListsEndpointsWithMetricsCacheAndEventStats) {
  Engine a, b;
  ASSERT_FALSE(a.url.empty() || b.url.empty());
  Admin admin(admin_yaml({&a, &b}, "kv-cost", "precise"));
  ASSERT_FALSE(admin.url.empty());

  json::value pools = admin.get_json("/admin/pools");
  ASSERT_EQ(pools.at("pools").as_array().size(), 1u);
  EXPECT_EQ(pools.at("pools").at(0).at("name").as_string(), "sim");
  EXPECT_EQ(pools.at("pools").at(0).at("endpoints").as_array().size(), 2u);

  for (const Engine* e : {&a, &b}) {
    json::value s = admin.wait_endpoint(e->url, [](const json::value& v) {
      return !v.at("metrics").is_null() && v.at("metrics").at("age_ms").to_number<double>() < 5000;
    });
    EXPECT_EQ(s.at("health").as_string(), "healthy");
    EXPECT_EQ(s.at("role").as_string(), "both");
    EXPECT_EQ(s.at("breaker").at("state").as_string(), "closed");
    EXPECT_EQ(as_int(s.at("metrics").at("waiting")), 0);
    EXPECT_EQ(s.at("kv_events").at("publisher").as_string(), e->publisher());
  }
  // Events: warm A until its batches reach the gateway (ZeroMQ's slow joiner may lose
  // the first ones); then the precise index holds A's blocks and the sequence advanced.
  json::value warmed;
  for (int i = 0; i < 100; ++i) {
    a.complete(words_prompt("warm" + std::to_string(i), 40));
    json::value s = admin.endpoint(a.url);
    if (as_int(s.at("kv_events").at("batches")) > 0 &&
        as_int(s.at("cache").at("precise_blocks")) > 0) {
      warmed = s;
      break;
    }
    // Waits for the kvgate serve child to apply the kvgate engine child's KV events.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(warmed.is_null()) << json::serialize(admin.endpoint(a.url));
  EXPECT_GT(as_int(warmed.at("kv_events").at("next_sequence")), 0);
  EXPECT_GT(as_int(warmed.at("cache").at("stored_blocks")), 0);
  EXPECT_EQ(as_int(admin.endpoint(b.url).at("cache").at("precise_blocks")), 0);

  // One endpoint by id.
  const int64_t id = as_int(warmed.at("id"));
  json::value one = admin.get_json("/admin/pools/sim/endpoints/" + std::to_string(id));
  EXPECT_EQ(one.at("url").as_string(), a.url);
}

TEST(GatewayAdmin, RouteViewShowsTheEngineHoldingThePrefix) {
  Engine a, b;
  ASSERT_FALSE(a.url.empty() || b.url.empty());
  Admin admin(admin_yaml({&a, &b}, "kv-cost", "precise"));
  ASSERT_FALSE(admin.url.empty());
  // First make sure B's KV events reach the gateway (ZeroMQ's slow joiner may drop the
  // first batches, and a prefix whose events were lost is never announced again).
  bool subscribed = false;
  for (int i = 0; i < 200 && !subscribed; ++i) {
    b.complete(words_prompt("join" + std::to_string(i), 20));
    subscribed = as_int(admin.endpoint(b.url).at("kv_events").at("batches")) > 0;
    // Waits for the kvgate serve child to receive B's (a kvgate engine child's) KV events.
    if (!subscribed) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(subscribed) << json::serialize(admin.endpoint(b.url));
  // A fixed wait for the kvgate serve child to apply the rest of those batches: neither child shows
  // when the last one is in.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const int64_t base = as_int(admin.endpoint(b.url).at("cache").at("precise_blocks"));
  // Warm B (directly: the gateway learns it from B's KV events only).
  const std::string prefix = words_prompt("shared", 96);
  json::value held;
  for (int i = 0; i < 100 && held.is_null(); ++i) {
    b.complete(prefix + "warm" + std::to_string(i));
    json::value s = admin.endpoint(b.url);
    if (as_int(s.at("cache").at("precise_blocks")) >= base + 6) held = s;
    // Waits for the kvgate serve child to learn B's blocks from its KV events.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(held.is_null());
  // A fixed wait for the kvgate serve child to apply the rest of the batch (as above).
  std::this_thread::sleep_for(std::chrono::milliseconds(100));

  const int64_t in_flight_before = as_int(held.at("load").at("routed_total"));
  auto r = admin.call("POST", "/admin/pools/sim/route",
                      R"({"model":"sim","prompt":")" + prefix + R"(question","max_tokens":8})");
  ASSERT_EQ(r.status, 200) << r.body;
  json::value v = parse_json(r.body);
  EXPECT_EQ(v.at("kind").as_string(), "completion");
  EXPECT_GE(as_int(v.at("prompt_tokens")), 96);
  EXPECT_EQ(as_int(v.at("prompt_blocks")), as_int(v.at("prompt_tokens")) / 16);
  EXPECT_EQ(v.at("policy").as_string(), "kv-cost");
  const json::value& d = v.at("decision");
  EXPECT_TRUE(d.at("accepted").as_bool());
  EXPECT_EQ(d.at("url").as_string(), b.url);
  EXPECT_GE(as_int(d.at("matched_blocks")), 6);
  const json::array& eps = v.at("endpoints").as_array();
  ASSERT_EQ(eps.size(), 2u);
  for (const json::value& e : eps) {
    ASSERT_FALSE(e.at("cost").is_null()) << json::serialize(e);
    if (e.at("url").as_string() == b.url) {
      EXPECT_GE(as_int(e.at("matched_blocks")), 6);
    } else {
      EXPECT_EQ(as_int(e.at("matched_blocks")), 0);
    }
  }
  double cost_a = 0, cost_b = 0;
  for (const json::value& e : eps) {
    (e.at("url").as_string() == b.url ? cost_b : cost_a) = e.at("cost").to_number<double>();
  }
  EXPECT_LT(cost_b, cost_a);
  // A view routes nothing.
  EXPECT_EQ(as_int(admin.endpoint(b.url).at("load").at("routed_total")), in_flight_before);

  // A chat body works too (no chat template here: the byte-level fallback).
  r = admin.call("POST", "/admin/pools/sim/route",
                 R"({"messages":[{"role":"user","content":"hello there"}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(parse_json(r.body).at("kind").as_string(), "chat");
  // A bad body is a 400.
  EXPECT_EQ(admin.call("POST", "/admin/pools/sim/route", "{nope").status, 400);
  EXPECT_EQ(admin.call("POST", "/admin/pools/sim/route", R"({"model":"sim"})").status, 400);
}

TEST(GatewayAdmin, PolicyParametersChangeAtRunTimeAndAreValidated) {
  Engine a("0.01", /*tokenizer=*/false);
  ASSERT_FALSE(a.url.empty());
  Admin admin(admin_yaml({&a}, "kv-cost", "approx", /*tokenizer=*/false));
  ASSERT_FALSE(admin.url.empty());

  json::value p = admin.get_json("/admin/pools/sim/policy");
  EXPECT_EQ(p.at("policy").as_string(), "kv-cost");
  EXPECT_TRUE(p.at("params").as_object().empty());
  EXPECT_EQ(p.at("overlap").as_string(), "approx");

  auto r = admin.call("PATCH", "/admin/pools/sim/policy",
                      R"({"params":{"overlap_weight":3,"temperature":0.25},)"
                      R"("saturation":{"queue_threshold":8}})");
  ASSERT_EQ(r.status, 200) << r.body;
  p = admin.get_json("/admin/pools/sim/policy");
  EXPECT_DOUBLE_EQ(p.at("params").at("overlap_weight").to_number<double>(), 3);
  EXPECT_DOUBLE_EQ(p.at("params").at("temperature").to_number<double>(), 0.25);
  EXPECT_DOUBLE_EQ(p.at("saturation").at("queue_threshold").to_number<double>(), 8);

  // Bad values: 400 naming the field, nothing changed.
  r = admin.call("PATCH", "/admin/pools/sim/policy", R"({"params":{"overlap_weight":-1}})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("overlap_weight"), std::string::npos) << r.body;
  r = admin.call("PATCH", "/admin/pools/sim/policy", R"({"params":{"overlap_wieght":1}})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("overlap_wieght"), std::string::npos) << r.body;
  r = admin.call("PATCH", "/admin/pools/sim/policy", R"({"saturation":{"kv_threshold":0}})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("saturation.kv_threshold"), std::string::npos) << r.body;
  r = admin.call("PATCH", "/admin/pools/sim/policy", R"({"policy":"no-such-policy"})");
  EXPECT_EQ(r.status, 400);
  r = admin.call("PATCH", "/admin/pools/sim/policy", R"({"block_size":32})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("block_size"), std::string::npos) << r.body;
  EXPECT_EQ(admin.call("PATCH", "/admin/pools/sim/policy", "{").status, 400);
  p = admin.get_json("/admin/pools/sim/policy");
  EXPECT_DOUBLE_EQ(p.at("params").at("overlap_weight").to_number<double>(), 3);

  // PUT replaces: another policy, the defaults for the rest.
  r = admin.call("PUT", "/admin/pools/sim/policy", R"({"policy":"least-request"})");
  ASSERT_EQ(r.status, 200) << r.body;
  p = parse_json(r.body);
  EXPECT_EQ(p.at("policy").as_string(), "least-request");
  EXPECT_DOUBLE_EQ(p.at("saturation").at("queue_threshold").to_number<double>(), 5);
  EXPECT_EQ(p.at("overlap").as_string(), "approx");
  // Requests still route under the new policy.
  auto g = admin.gw.post("/v1/completions", R"({"model":"sim","prompt":"hi","max_tokens":2})");
  EXPECT_EQ(g.status, 200) << g.body;
  EXPECT_EQ(admin.call("DELETE", "/admin/pools/sim/policy").status, 405);
}

TEST(GatewayAdmin, TokenAndErrorStatuses) {
  Engine a("0.01", /*tokenizer=*/false);
  ASSERT_FALSE(a.url.empty());
  Admin admin(admin_yaml({&a}, "round-robin", "approx", /*tokenizer=*/false));
  ASSERT_FALSE(admin.url.empty());
  auto r = admin.call("GET", "/admin/pools", {}, nullptr);
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(parse_json(r.body).at("error").at("code").as_string(), "invalid_admin_token");
  EXPECT_EQ(admin.call("GET", "/admin/pools", {}, "wrong-token").status, 401);
  EXPECT_EQ(admin.call("GET", "/admin/pools", {}, "admin-test-token-but-longer").status, 401);
  EXPECT_EQ(
      admin.call("POST", "/admin/pools/sim/endpoints", R"({"url":"http://x:1"})", nullptr).status,
      401);
  EXPECT_EQ(admin.call("GET", "/admin/pools").status, 200);
  EXPECT_EQ(admin.call("GET", "/admin/pools/nope/endpoints").status, 404);
  EXPECT_EQ(admin.call("GET", "/admin/pools/sim/endpoints/99").status, 404);
  EXPECT_EQ(admin.call("DELETE", "/admin/pools/sim/endpoints/99").status, 404);
  EXPECT_EQ(admin.call("GET", "/admin/nothing-here").status, 404);
  EXPECT_EQ(admin.call("GET", "/v1/models").status, 404);  // not the data plane
  EXPECT_EQ(admin.call("POST", "/admin/pools/sim/endpoints", "{bad json").status, 400);
  EXPECT_EQ(admin.call("POST", "/admin/pools/sim/endpoints", R"({"url":"nope"})").status, 400);
  r = admin.call("POST", "/admin/pools/sim/endpoints", R"({"url":")" + a.url + R"("})");
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(admin.call("PUT", "/admin/pools/sim/endpoints").status, 405);
  EXPECT_EQ(admin.call("GET", "/admin/pools/sim/route").status, 405);
  EXPECT_EQ(admin.call("POST", "/admin/pools").status, 405);
  // The data plane does not serve the admin API.
  auto d = io::http_fetch("GET", admin.gw.url + "/admin/pools");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->status, 404);
}

TEST(GatewayAdmin, AddedEndpointGetsTrafficRemovedOneDrainsItsStreamFirst) {
  // Real time (time scale 1) so that a 200-token stream lasts long enough to remove its
  // endpoint under it.
  Engine a("1", /*tokenizer=*/false), c("1", /*tokenizer=*/false);
  ASSERT_FALSE(a.url.empty() || c.url.empty());
  Admin admin(admin_yaml({&a}, "round-robin", "approx", /*tokenizer=*/false));
  ASSERT_FALSE(admin.url.empty());

  // Add C at run time, with its KV events.
  auto r = admin.call("POST", "/admin/pools/sim/endpoints",
                      R"({"url":")" + c.url + R"(","zone":"z2","rack":"r9",)" +
                          R"("kv_events":{"publisher":")" + c.publisher() + R"("}})");
  ASSERT_EQ(r.status, 201) << r.body;
  const int64_t c_id = as_int(parse_json(r.body).at("id"));
  json::value cs = admin.wait_endpoint(c.url, [](const json::value& v) {
    return !v.at("metrics").is_null();  // scraped
  });
  EXPECT_EQ(as_int(cs.at("id")), c_id);
  EXPECT_EQ(cs.at("rack").as_string(), "r9");
  EXPECT_FALSE(cs.at("kv_events").is_null());

  // Round robin over two endpoints: C gets one of two requests.
  int to_c = 0;
  for (int i = 0; i < 4; ++i) {
    auto g = admin.gw.post("/v1/completions", R"({"model":"sim","prompt":"hello )" +
                                                  std::to_string(i) + R"(","max_tokens":1})");
    ASSERT_EQ(g.status, 200) << g.body;
    ASSERT_NE(g.header("x-kvgate-endpoint"), nullptr);
    if (*g.header("x-kvgate-endpoint") == c.url) ++to_c;
  }
  EXPECT_EQ(to_c, 2);

  // A stream in flight on one endpoint; remove that endpoint under it.
  std::atomic<bool> started{false}, done{false};
  std::string stream_body;
  int stream_status = 0;
  std::thread client([&] {
    auto s = io::http_fetch_streaming(
        "POST", admin.gw.url + "/v1/completions",
        R"({"model":"sim","prompt":"tell me a long story","max_tokens":200,"stream":true})",
        {{"Content-Type", "application/json"}},
        [&](std::string_view piece) {
          stream_body += piece;
          started = true;
          return true;
        },
        std::chrono::seconds(60));
    if (s) stream_status = s->status;
    done = true;
  });
  // Waits for the client thread to get the stream's first bytes from the kvgate serve child.
  if (!eventually([&] { return started.load(); }, std::chrono::seconds(60))) {
    client.join();
    FAIL() << "the stream never started";
  }
  std::string busy_url;
  int64_t busy_id = -1;
  const json::value listing = admin.get_json("/admin/pools/sim/endpoints");
  for (const json::value& e : listing.at("endpoints").as_array()) {
    if (as_int(e.at("load").at("in_flight")) == 1) {
      busy_url = std::string(e.at("url").as_string());
      busy_id = as_int(e.at("id"));
    }
  }
  ASSERT_GE(busy_id, 0);
  // The stream is still running when the removal starts: the answer waits for it.
  EXPECT_FALSE(done.load());
  r = admin.call("DELETE",
                 "/admin/pools/sim/endpoints/" + std::to_string(busy_id) + "?timeout_ms=30000");
  client.join();
  ASSERT_EQ(r.status, 200) << r.body;
  json::value removed = parse_json(r.body);
  EXPECT_TRUE(removed.at("drained").as_bool());
  EXPECT_EQ(removed.at("url").as_string(), busy_url);
  // The stream completed normally.
  EXPECT_EQ(stream_status, 200);
  std::vector<std::string> events = sse_events(stream_body);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_EQ(stream_body.find("\"error\""), std::string::npos) << stream_body;
  // The endpoint is gone, and traffic goes elsewhere.
  EXPECT_TRUE(admin.endpoint(busy_url).is_null());
  EXPECT_EQ(admin.call("GET", "/admin/pools/sim/endpoints/" + std::to_string(busy_id)).status, 404);
  for (int i = 0; i < 3; ++i) {
    auto g = admin.gw.post("/v1/completions", R"({"model":"sim","prompt":"after )" +
                                                  std::to_string(i) + R"(","max_tokens":1})");
    ASSERT_EQ(g.status, 200) << g.body;
    EXPECT_NE(*g.header("x-kvgate-endpoint"), busy_url);
  }
}

}  // namespace gateway_admin_test
}  // namespace kvgate::testing
