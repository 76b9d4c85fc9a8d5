// Endpoint discovery end to end: a real `kvgate serve` whose pool comes from a watched
// endpoints file, in front of real `kvgate engine` processes that start and stop. Requests
// keep succeeding through the churn (streams on a removed endpoint finish: it drains), a
// new engine gets traffic only once its warm-up admitted it, the admin API says where each
// endpoint came from, and the discovery metrics count what happened.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <thread>

#include "support/engine_fixture.h"
#include "support/gateway_fixture.h"

namespace kvgate::testing {
namespace {

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

  std::string yaml() const {
    return "listeners:\n  - {address: 127.0.0.1, port: 0}\n"
           "admin: {address: 127.0.0.1, port: 0}\n"
           "timeouts: {header_ms: 5000, drain_ms: 2000, connect_ms: 1000}\n"
           "pools:\n  main:\n    block_size: 16\n    scrape_interval_ms: 50\n"
           "    router: {policy: round-robin}\n"
           "    warmup: {prefixes: 4, budget_ms: 2000, concurrency: 2, ready_timeout_ms: 20000}\n"
           "    discovery:\n      grace_ms: 300\n      drain_timeout_ms: 10000\n"
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

json::value get_json(const std::string& url) {
  auto r = io::http_fetch("GET", url);
  if (!r || r->status != 200) return nullptr;
  return parse_json(r->body);
}

TEST_F(DiscoveryE2E, EnginesJoinAndLeaveThroughAWatchedFileWithoutFailedRequests) {
  auto a = engine();
  set_endpoints({a->url});
  GatewayProcess gw(yaml());
  ASSERT_FALSE(gw.url.empty());
  auto admin_line = gw.proc->wait_for_line("admin API on http://");
  ASSERT_TRUE(admin_line) << admin_line.error();
  const std::string admin = admin_line->substr(admin_line->find("http://"));

  // The file's engine joins (warmed: its /health answers at once) and serves.
  Result first;
  for (int i = 0; i < 200 && first.status != 200; ++i) {
    first = complete(gw.url, false, 2);
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
  auto wait_for = [&](const std::function<bool()>& pred, milliseconds timeout) {
    const auto end = Clock::now() + timeout;
    while (Clock::now() < end) {
      if (pred()) return true;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return pred();
  };
  auto routed_to = [&](const std::string& url) {
    std::lock_guard lock(seen_mu);
    return seen.contains(url);
  };

  // A second engine, already up: routed to within a second of the file change.
  auto b = engine();
  const auto t0 = Clock::now();
  set_endpoints({a->url, b->url});
  ASSERT_TRUE(wait_for([&] { return routed_to(b->url); }, std::chrono::seconds(5)));
  const double join_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  std::printf("discovery e2e: file change -> first request on the new engine: %.0f ms\n", join_ms);
  EXPECT_LT(join_ms, 1000);

  // A third engine that takes a while to start (cold: /health is 503 while it loads): in
  // the file at once, but no request reaches it before warm-up admitted it.
  auto c = engine({"--startup", "cold"}, /*wait_healthy=*/false);
  set_endpoints({a->url, b->url, c->url});
  ASSERT_TRUE(wait_for(
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
  ASSERT_TRUE(wait_for([&] { return routed_to(c->url); }, std::chrono::seconds(10)));
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
  ASSERT_TRUE(wait_for(
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
  std::this_thread::sleep_for(milliseconds(300));  // traffic on the two left
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

}  // namespace
}  // namespace kvgate::testing
