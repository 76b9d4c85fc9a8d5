// `kvgate serve` autoscaling a pool of real `kvgate engine` processes it launches itself
// (the local actuator): streaming load queues requests in the engines, the autoscaler
// launches replicas, registers them once healthy and routes to them; when the load stops
// it drains them (no request fails) and stops them. The decision is exported as
// kvgate_autoscaler_* metrics.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "support/gateway_fixture.h"

namespace kvgate::testing {
namespace {

using namespace std::chrono_literals;

// Engines that are slow in wall time but boot fast: 0.5 s of simulated overhead per
// step at --time-scale 0.01 is a 5 ms step, and the 7B "caches kept" start (~68 s) is
// under a second. Two sequences at a time: a handful of streams queue.
std::string write_profile() {
  return write_temp_file("autoscale-profile.yaml",
                         "name: slow-test-gpu\nbase: h100-qwen2.5-7b\nstep_overhead_s: 0.5\n");
}

std::string autoscale_yaml(const std::string& profile) {
  return "listeners:\n  - address: 127.0.0.1\n    port: 0\n"
         "timeouts: {header_ms: 5000, drain_ms: 5000, connect_ms: 1000}\n"
         "pools:\n"
         "  main:\n"
         "    block_size: 16\n"
         "    scrape_interval_ms: 100\n"
         "    router: {policy: kv-cost, overlap: approx}\n"
         "    autoscale:\n"
         "      signal: waiting\n"
         "      target: 2\n"
         "      min_replicas: 1\n"
         "      max_replicas: 3\n"
         "      interval: 200ms\n"
         "      window: 5s\n"
         "      behavior:\n"
         "        scale_down: {stabilization_window: 2s}\n"
         "      cold_start: {startup_time: 2s, young_age: 0s}\n"
         "      actuator:\n"
         "        kind: local\n"
         "        command: [kvgate, engine, --port, \"{port}\", --model, sim, --profile, " +
         profile +
         ", --max-num-seqs, \"2\", --startup, caches-kept, --time-scale, \"0.01\"]\n"
         "        drain_timeout: 15s\n"
         "        stop_grace: 3s\n"
         "        log_output: true\n"
         "models:\n  - name: sim\n    pool: main\n";
}

double pool_metric(GatewayProcess& gw, const std::string& name) {
  return gw.metric(name, {{"pool", "main"}});
}

// Polls `pred` every 100 ms until it holds or `timeout` passes.
template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(100ms);
  }
  return pred();
}

// Streams completions through the gateway from `n` threads until stopped; records which
// endpoint served each one and every status that was not 200.
class StreamingLoad {
 public:
  StreamingLoad(const std::string& url, int n) {
    for (int i = 0; i < n; ++i) {
      threads_.emplace_back([this, url, i] {
        for (int k = 0; !stop_.load(); ++k) {
          const std::string body =
              R"({"model":"sim","stream":true,"max_tokens":60,"prompt":"load )" +
              std::to_string(i) + " " + std::to_string(k) + R"( a b c d e f g h"})";
          auto r = io::http_fetch("POST", url + "/v1/completions", body,
                                  {{"Content-Type", "application/json"}}, 30s);
          std::lock_guard lock(mu_);
          ++done_;
          if (!r) {
            failures_.push_back(r.error());
            continue;
          }
          if (r->status != 200 || r->body.find("[DONE]") == std::string::npos ||
              r->body.find("\"error\"") != std::string::npos) {
            failures_.push_back(std::to_string(r->status) + ": " + r->body.substr(0, 300));
          }
          if (const std::string* e = r->header("x-kvgate-endpoint")) ++served_by_[*e];
        }
      });
    }
  }
  ~StreamingLoad() { stop(); }

  void stop() {
    stop_.store(true);
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  std::map<std::string, int> served_by() {
    std::lock_guard lock(mu_);
    return served_by_;
  }
  std::vector<std::string> failures() {
    std::lock_guard lock(mu_);
    return failures_;
  }
  int done() {
    std::lock_guard lock(mu_);
    return done_;
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::map<std::string, int> served_by_;
  std::vector<std::string> failures_;
  int done_ = 0;
};

TEST(GatewayAutoscale, LaunchesRegistersDrainsAndStopsLocalReplicas) {
  GatewayProcess gw(autoscale_yaml(write_profile()));
  ASSERT_FALSE(gw.url.empty());
  auto log = [&] { return gw.proc->output() + gw.proc->errors(); };

  // The pool starts empty; the autoscaler brings it to min_replicas.
  ASSERT_TRUE(
      eventually([&] { return pool_metric(gw, "kvgate_autoscaler_ready_replicas") == 1; }, 30s))
      << log();
  EXPECT_EQ(pool_metric(gw, "kvgate_autoscaler_desired_replicas"), 1);
  EXPECT_EQ(pool_metric(gw, "kvgate_autoscaler_min_replicas"), 1);
  EXPECT_EQ(pool_metric(gw, "kvgate_autoscaler_max_replicas"), 3);

  // Ten streams on a replica that runs two at a time: ~8 waiting against a target of 2.
  StreamingLoad load(gw.url, 10);
  ASSERT_TRUE(
      eventually([&] { return pool_metric(gw, "kvgate_autoscaler_desired_replicas") > 1; }, 20s))
      << log();
  ASSERT_TRUE(
      eventually([&] { return pool_metric(gw, "kvgate_autoscaler_ready_replicas") >= 2; }, 30s))
      << log();
  // The new replicas are registered with the router: requests reach them.
  ASSERT_TRUE(eventually([&] { return load.served_by().size() >= 2; }, 20s)) << log();
  EXPECT_GE(gw.metric("kvgate_autoscaler_decisions_total", {{"pool", "main"}, {"direction", "up"}}),
            1);
  EXPECT_NE(log().find("pool main: autoscaler: waiting"), std::string::npos) << log();
  EXPECT_NE(log().find("routing to it"), std::string::npos) << log();

  // Load stops: after the 2 s stabilization window the extra replicas are drained (their
  // streams finish) and stopped.
  load.stop();
  const std::map<std::string, int> served = load.served_by();
  ASSERT_TRUE(eventually(
      [&] {
        return pool_metric(gw, "kvgate_autoscaler_current_replicas") == 1 &&
               pool_metric(gw, "kvgate_autoscaler_ready_replicas") == 1 &&
               pool_metric(gw, "kvgate_autoscaler_draining_replicas") == 0;
      },
      30s))
      << log();
  EXPECT_EQ(pool_metric(gw, "kvgate_autoscaler_desired_replicas"), 1);
  EXPECT_GE(
      gw.metric("kvgate_autoscaler_decisions_total", {{"pool", "main"}, {"direction", "down"}}), 1);
  EXPECT_TRUE(load.failures().empty()) << load.failures().size() << " of " << load.done()
                                       << " failed, first: " << load.failures().front();

  // The replica left serves; the others' processes are gone.
  auto r = gw.post("/v1/completions", R"({"model":"sim","prompt":"after","max_tokens":3})");
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_NE(r.header("x-kvgate-endpoint"), nullptr);
  const std::string survivor = *r.header("x-kvgate-endpoint");
  for (const auto& [url, n] : served) {
    auto h = io::http_fetch("GET", url + "/health", {}, {}, 2s);
    EXPECT_EQ(h && h->status == 200, url == survivor) << url << " served " << n;
  }
}

}  // namespace
}  // namespace kvgate::testing
