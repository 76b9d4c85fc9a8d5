// Endpoint discovery end to end: a real `kvgate serve` whose pool comes from a watched
// endpoints file, in front of real `kvgate engine` processes that start and stop. Requests
// keep succeeding through the churn (streams on a removed endpoint finish: it drains), a
// new engine gets traffic only once its warm-up admitted it, the admin API says where each
// endpoint came from, and the discovery metrics count what happened. A stream in flight on
// the engine that leaves ends whole, and an engine that vanishes and comes back within the
// grace period keeps what the router knew it cached.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <thread>

#include "support/fault_fixture.h"

namespace kvgate::testing {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace discovery_e2e_test {

namespace json = boost::json;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

std::unique_ptr<EngineProcess> engine(std::vector<std::string> extra = {},
                                      bool wait_healthy = true) {
  std::vector<std::string> args = {"--time-scale", "0.02", "--model", "sim", "--block-size", "16"};
  args.insert(args.end(), extra.begin(), extra.end());
  return std::make_unique<EngineProcess>(args, wait_healthy);
}

class DiscoveryE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) / ("disc_e2e." + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    file_ = (dir_ / "endpoints.yaml").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Replaces the file atomically (as a config manager or a ConfigMap volume does).
  void set_endpoints(const std::vector<std::string>& urls) {
    std::string y = "endpoints:\n";
    for (const auto& u : urls) y += "  - " + u + "\n";
    std::ofstream(file_ + ".tmp") << y;
    std::filesystem::rename(file_ + ".tmp", file_);
  }

  // `router` and `warmup` are the pool's sections of those names ("" for no warm-up).
  std::string yaml(
      const std::string& router = "{policy: round-robin}", int grace_ms = 300,
      const std::string& warmup =
          "{prefixes: 4, budget_ms: 2000, concurrency: 2, ready_timeout_ms: 20000}") const {
    return "listeners:\n  - {address: 127.0.0.1, port: 0}\n"
           "admin: {address: 127.0.0.1, port: 0}\n"
           "timeouts: {header_ms: 5000, drain_ms: 2000, connect_ms: 1000}\n"
           "pools:\n  main:\n    block_size: 16\n    scrape_interval_ms: 50\n"
           "    router: " +
           router + "\n" + (warmup.empty() ? "" : "    warmup: " + warmup + "\n") +
           "    discovery:\n      grace_ms: " + std::to_string(grace_ms) +
           "\n      drain_timeout_ms: 10000\n"
           "      sources:\n        - {kind: file, name: fleet, path: " +
           file_ +
           ", settle_ms: 10}\n"
           "models:\n  - {name: sim, pool: main}\n";
  }

  std::filesystem::path dir_;
  std::string file_;
};

struct Result {
  int status = 0;
  std::string endpoint;
  bool done = false;  // a stream that ended with [DONE]
};

Result complete(const std::string& gw, bool stream, int max_tokens) {
  const std::string body = std::string(R"({"model":"sim","prompt":"hello discovery, )") +
                           R"(tell me more","max_tokens":)" + std::to_string(max_tokens) +
                           (stream ? R"(,"stream":true})" : "}");
  auto r = io::http_fetch("POST", gw + "/v1/completions", body,
                          {{"Content-Type", "application/json"}}, std::chrono::seconds(30));
  Result out;
  if (!r) return out;
  out.status = r->status;
  if (const std::string* e = r->header("x-kvgate-endpoint")) out.endpoint = *e;
  out.done =
      r->body.find("[DONE]") != std::string::npos && r->body.find("\"error\"") == std::string::npos;
  return out;
}

TEST_F(DiscoveryE2E, EnginesJoinAndLeaveThroughAWatchedFileWithoutFailedRequests) {
  auto a = engine();
  set_endpoints({a->url});
  GatewayProcess gw(yaml());
  ASSERT_FALSE(gw.url.empty());
  auto admin_url = gw.proc->wait_for_admin_url();
  ASSERT_TRUE(admin_url) << admin_url.error();
  const std::string admin = *admin_url;

  // The file's engine joins (warmed: its /health answers at once) and serves.
  Result first;
  for (int i = 0; i < 200 && first.status != 200; ++i) {
    first = complete(gw.url, false, 2);
    // Waits for the kvgate serve child to admit the file's kvgate engine child.
    if (first.status != 200) std::this_thread::sleep_for(milliseconds(20));
  }
  ASSERT_EQ(first.status, 200);
  EXPECT_EQ(first.endpoint, a->url);
  json::value eps = get_json(admin + "/admin/pools/main/endpoints");
  ASSERT_FALSE(eps.is_null());
  EXPECT_EQ(eps.at("endpoints").as_array().at(0).at("source").as_string(), "discovery:fleet");

  // Traffic through the churn: streams and whole answers, counted.
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, failed{0};
  std::mutex seen_mu;
  std::set<std::string> seen;
  std::vector<std::thread> clients;
  for (int t = 0; t < 3; ++t) {
    clients.emplace_back([&, t] {
      while (!stop) {
        Result r = complete(gw.url, t != 0, t == 0 ? 2 : 24);
        const bool good = r.status == 200 && (t == 0 || r.done);
        (good ? ok : failed)++;
        std::lock_guard lock(seen_mu);
        seen.insert(r.endpoint);
      }
    });
  }
  auto routed_to = [&](const std::string& url) {
    std::lock_guard lock(seen_mu);
    return seen.contains(url);
  };

  // A second engine, already up: routed to within a second of the file change.
  auto b = engine();
  const auto t0 = Clock::now();
  set_endpoints({a->url, b->url});
  ASSERT_TRUE(eventually([&] { return routed_to(b->url); }, std::chrono::seconds(5)));
  const double join_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  std::printf("discovery e2e: file change -> first request on the new engine: %.0f ms\n", join_ms);
  EXPECT_LT(join_ms, 1000);

  // A third engine that takes a while to start (cold: /health is 503 while it loads): in
  // the file at once, but no request reaches it before warm-up admitted it.
  auto c = engine({"--startup", "cold"}, /*wait_healthy=*/false);
  set_endpoints({a->url, b->url, c->url});
  ASSERT_TRUE(eventually(
      [&] {
        json::value w = get_json(admin + "/admin/warmup");
        if (w.is_null()) return false;
        for (const auto& run : w.at("pools").as_array().at(0).at("runs").as_array()) {
          if (run.at("url").as_string() == c->url) return true;
        }
        return false;
      },
      std::chrono::seconds(5)));
  EXPECT_FALSE(routed_to(c->url));  // still loading, held out of routing
  ASSERT_TRUE(c->proc->wait_for_status(c->url + "/health", 200, std::chrono::seconds(30)).ok());
  ASSERT_TRUE(eventually([&] { return routed_to(c->url); }, std::chrono::seconds(10)));
  // Not one request was sent to it while it was loading (it would have answered 503).
  auto upstream_errors = [&](const std::string& url) {
    double n = 0;
    for (const char* kind : {"status_503", "connect", "closed", "timeout", "protocol"}) {
      n += gw.metric("kvgate_upstream_errors_total",
                     {{"pool", "main"}, {"endpoint", url}, {"kind", kind}});
    }
    return n;
  };
  EXPECT_EQ(upstream_errors(c->url), 0);

  // A leaves the file: it drains (its streams finish), then its process stops.
  set_endpoints({b->url, c->url});
  ASSERT_TRUE(eventually(
      [&] {
        json::value v = get_json(admin + "/admin/pools/main/endpoints");
        if (v.is_null()) return false;
        for (const auto& e : v.at("endpoints").as_array()) {
          if (e.at("url").as_string() == a->url) return false;
        }
        return true;
      },
      std::chrono::seconds(10)));
  a->proc->stop();
  // Keeps the clients' traffic on the two engines left for 300 ms, in which none may fail: a
  // negative check, it waits for nothing.
  std::this_thread::sleep_for(milliseconds(300));
  stop = true;
  for (auto& t : clients) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_GT(ok.load(), 20);
  EXPECT_EQ(upstream_errors(a->url), 0);  // drained before it stopped: nothing was cut

  // Where the pool's endpoints came from, and what discovery did, in metrics.
  json::value d = get_json(admin + "/admin/pools/main/discovery");
  ASSERT_FALSE(d.is_null());
  EXPECT_EQ(d.at("sources").as_array().at(0).at("name").as_string(), "fleet");
  EXPECT_EQ(d.at("endpoints").as_array().size(), 2u);
  const metrics::Labels src = {{"pool", "main"}, {"source", "fleet"}, {"kind", "file"}};
  EXPECT_EQ(gw.metric("kvgate_discovery_endpoints", src), 2);
  EXPECT_GE(gw.metric("kvgate_discovery_changes_total", src), 5);  // 3 adds, suspend, remove
  EXPECT_EQ(gw.metric("kvgate_discovery_errors_total", src), 0);
}

// The pool's endpoints as the admin API lists them, by URL.
std::map<std::string, json::object> pool_endpoints(const std::string& admin) {
  std::map<std::string, json::object> out;
  json::value v = get_json(admin + "/admin/pools/main/endpoints");
  if (v.is_null()) return out;
  for (const auto& e : v.at("endpoints").as_array()) {
    out[std::string(e.at("url").as_string())] = e.as_object();
  }
  return out;
}

// Discovery's state of `url` ("active", "suspended"), or "" when discovery holds it no more.
std::string discovery_state(const std::string& admin, const std::string& url) {
  json::value v = get_json(admin + "/admin/pools/main/discovery");
  if (v.is_null()) return "?";
  for (const auto& e : v.at("endpoints").as_array()) {
    if (e.at("url").as_string() == url) return std::string(e.at("state").as_string());
  }
  return "";
}

// A file not written yet is not refused (docs/discovery.md): the gateway starts, says it
// waits for the file, the admin API shows the source with no endpoints and why, and the
// engines join once the file is written.
TEST_F(DiscoveryE2E, AFileMissingAtStartStartsThePoolEmptyUntilItIsWritten) {
  auto a = engine();
  AdminGateway gw(yaml("{policy: round-robin}", 300, /*warmup=*/""));
  ASSERT_FALSE(gw.admin_url.empty());
  const std::string& admin = gw.admin_url;
  auto waiting = gw.gw.proc->wait_for_line("discovery: waiting for " + file_);
  ASSERT_TRUE(waiting) << waiting.error();
  json::value d;
  ASSERT_TRUE(eventually([&] {
    d = get_json(admin + "/admin/pools/main/discovery");
    return !d.is_null() && d.at("sources").as_array().at(0).at("errors").to_number<int64_t>() > 0;
  }));
  const json::value& fleet = d.at("sources").as_array().at(0);
  EXPECT_EQ(fleet.at("endpoints").to_number<int64_t>(), 0);
  EXPECT_NE(std::string(fleet.at("last_error").as_string()).find("cannot read " + file_),
            std::string::npos)
      << json::serialize(fleet);
  EXPECT_TRUE(pool_endpoints(admin).empty());

  set_endpoints({a->url});
  ASSERT_TRUE(eventually([&] { return pool_endpoints(admin).contains(a->url); }));
}

TEST_F(DiscoveryE2E, AStreamInFlightOnAnEngineRemovedFromTheFileEndsWhole) {
  // ~5 ms of wall time per token: a 400-token answer outlives the grace period (300 ms)
  // and the drain that begins after it.
  constexpr int kTokens = 400;
  const std::vector<std::string> slow = {"--time-scale", "0.3", "--model", "sim"};
  EngineProcess a(slow), b(slow);
  ASSERT_FALSE(a.url.empty() || b.url.empty());
  set_endpoints({a.url, b.url});
  AdminGateway gw(yaml("{policy: round-robin}", 300, /*warmup=*/""));
  ASSERT_FALSE(gw.admin_url.empty());
  const std::string& admin = gw.admin_url;
  ASSERT_TRUE(eventually([&] { return pool_endpoints(admin).size() == 2; }));

  const std::string prompt = "a long answer from an engine about to leave";
  auto ref =
      b.post("/v1/completions", R"({"model":"sim","prompt":")" + prompt + R"(","max_tokens":)" +
                                    std::to_string(kTokens) + R"(,"temperature":0})");
  ASSERT_EQ(ref.status, 200) << ref.body;
  const std::string expected(parse_json(ref.body).at("choices").at(0).at("text").as_string());

  // Streams until one is on A (round-robin: the first or the second); the others finish.
  const std::string body = R"({"model":"sim","prompt":")" + prompt + R"(","max_tokens":)" +
                           std::to_string(kTokens) + R"(,"temperature":0,"stream":true})";
  std::vector<std::unique_ptr<RawClient>> streams;
  RawClient* on_a = nullptr;
  for (int i = 0; i < 4 && !on_a; ++i) {
    auto c = std::make_unique<RawClient>(gw.gw.url);
    ASSERT_TRUE(c->send(raw_post("/v1/completions", body)));
    ASSERT_TRUE(c->read_until("\r\n\r\n"));
    if (response_header(c->received(), "x-kvgate-endpoint") == a.url) on_a = c.get();
    streams.push_back(std::move(c));
  }
  ASSERT_NE(on_a, nullptr);
  ASSERT_TRUE(on_a->read_until("\"text\":"));

  // A leaves the file: held out of routing for the grace period, then drained. The drain
  // begins while its stream is still running, and waits for it.
  set_endpoints({b.url});
  ASSERT_TRUE(eventually([&] { return discovery_state(admin, a.url).empty(); }));
  auto eps = pool_endpoints(admin);
  ASSERT_TRUE(eps.contains(a.url)) << "removed before its stream ended";
  EXPECT_EQ(eps[a.url].at("health").as_string(), "draining");
  EXPECT_EQ(eps[a.url].at("load").at("in_flight").to_number<int64_t>(), 1);
  EXPECT_EQ(on_a->received().find("[DONE]"), std::string::npos);
  Result meanwhile = complete(gw.gw.url, false, 2);  // new requests go to B only
  EXPECT_EQ(meanwhile.status, 200);
  EXPECT_EQ(meanwhile.endpoint, b.url);

  // The stream ends whole: every token, the text an uninterrupted answer has, [DONE].
  ASSERT_TRUE(on_a->read_until("data: [DONE]", std::chrono::seconds(30))) << on_a->received();
  std::string text;
  int chunks = 0;
  for (const std::string& e : sse_events(response_body(on_a->received()))) {
    if (e == "[DONE]") break;
    json::value v = parse_json(e);
    ASSERT_TRUE(v.is_object()) << e;
    EXPECT_FALSE(v.as_object().contains("error")) << e;
    text += std::string(v.at("choices").at(0).at("text").as_string());
    ++chunks;
  }
  EXPECT_EQ(chunks, kTokens);
  EXPECT_EQ(text, expected);
  // Then it leaves the pool, having failed nothing.
  ASSERT_TRUE(eventually([&] { return !pool_endpoints(admin).contains(a.url); }));
  for (auto& s : streams) {
    if (s.get() != on_a) {
      EXPECT_TRUE(s->read_until("data: [DONE]", std::chrono::seconds(30)));
    }
  }
  for (const char* kind : {"connect", "closed", "timeout", "protocol"}) {
    EXPECT_EQ(gw.gw.metric("kvgate_upstream_errors_total",
                           {{"pool", "main"}, {"endpoint", a.url}, {"kind", kind}}),
              0)
        << kind;
  }
}

TEST_F(DiscoveryE2E, AnEngineBackWithinTheGracePeriodKeepsItsPrefixEntries) {
  auto x = engine(), y = engine();
  ASSERT_FALSE(x->url.empty() || y->url.empty());
  set_endpoints({x->url, y->url});
  // Prefix-aware routing on the router's own history (the approximate index), and a grace
  // period long enough for a flap, short enough to wait out.
  AdminGateway gw(yaml("{policy: kv-cost, overlap: approx}", 1500, /*warmup=*/""));
  ASSERT_FALSE(gw.admin_url.empty());
  const std::string& admin = gw.admin_url;
  ASSERT_TRUE(eventually([&] { return pool_endpoints(admin).size() == 2; }));

  const std::string prefix = words_prompt("flap", 80);
  auto first = gw.gw.post("/v1/completions",
                          R"({"model":"sim","prompt":")" + prefix + R"(first","max_tokens":2})");
  ASSERT_EQ(first.status, 200) << first.body;
  ASSERT_NE(first.header("x-kvgate-endpoint"), nullptr);
  const std::string holder = *first.header("x-kvgate-endpoint");
  const std::string other = holder == x->url ? y->url : x->url;
  const std::string follow_up = prefix + "second";
  const int64_t held = gw.matched_blocks(follow_up, holder);
  ASSERT_GE(held, 4);
  EXPECT_EQ(gw.matched_blocks(follow_up, other), 0);

  // The holder vanishes from the file and is back well within the grace period.
  set_endpoints({other});
  ASSERT_TRUE(eventually([&] { return discovery_state(admin, holder) == "suspended"; }));
  set_endpoints({x->url, y->url});
  ASSERT_TRUE(eventually([&] { return discovery_state(admin, holder) == "active"; }));
  // What the router knew it cached is still there, and the follow-up goes by it: to the
  // holder, whose engine serves the prefix from its cache.
  EXPECT_EQ(gw.matched_blocks(follow_up, holder), held);
  auto again = gw.gw.post("/v1/completions",
                          R"({"model":"sim","prompt":")" + follow_up + R"(","max_tokens":2})");
  ASSERT_EQ(again.status, 200) << again.body;
  ASSERT_NE(again.header("x-kvgate-endpoint"), nullptr);
  EXPECT_EQ(*again.header("x-kvgate-endpoint"), holder);
  EXPECT_GE(
      parse_json(again.body).at("usage").at("prompt_tokens_details").at("cached_tokens").as_int64(),
      64);

  // Gone for longer than the grace period, it is drained and removed with its entries:
  // back, it is a new endpoint that holds nothing as far as the router knows.
  set_endpoints({other});
  ASSERT_TRUE(eventually([&] { return !pool_endpoints(admin).contains(holder); }));
  set_endpoints({x->url, y->url});
  ASSERT_TRUE(eventually([&] { return pool_endpoints(admin).contains(holder); }));
  EXPECT_EQ(gw.matched_blocks(follow_up, holder), 0);
  const metrics::Labels src = {{"pool", "main"}, {"source", "fleet"}, {"kind", "file"}};
  EXPECT_EQ(gw.gw.metric("kvgate_discovery_errors_total", src), 0);
}

}  // namespace discovery_e2e_test
}  // namespace kvgate::testing
