// `kvgate serve` autoscaling a pool of real `kvgate engine` processes it launches itself
// (the local actuator): streaming load queues requests in the engines, the autoscaler
// launches replicas, registers them once healthy and routes to them; when the load stops
// it drains them (no request fails) and stops them. The decision is exported as
// kvgate_autoscaler_* metrics.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "support/eventually.h"
#include "support/gateway_fixture.h"

namespace kvgate::testing {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace gateway_autoscale_test {

using namespace std::chrono_literals;
namespace json = boost::json;

// Engines that are slow in wall time but boot fast: 0.5 s of simulated overhead per
// step at --time-scale 0.01 is a 5 ms step, and the 7B "caches kept" start (~68 s) is
// under a second. Two sequences at a time: a handful of streams queue.
std::string write_profile() {
  return write_temp_file("autoscale-profile.yaml",
                         "name: slow-test-gpu\nbase: h100-qwen2.5-7b\nstep_overhead_s: 0.5\n");
}

// The policy's lines of the autoscale section: target tracking on waiting requests.
const char* const kWaitingPolicy =
    "      signal: waiting\n"
    "      target: 2\n"
    "      min_replicas: 1\n"
    "      max_replicas: 3\n"
    "      interval: 200ms\n"
    "      window: 5s\n"
    "      behavior:\n"
    "        scale_down: {stabilization_window: 2s}\n";

std::string autoscale_yaml(const std::string& profile, const std::string& policy = kWaitingPolicy) {
  return "listeners:\n  - address: 127.0.0.1\n    port: 0\n"
         "timeouts: {header_ms: 5000, drain_ms: 5000, connect_ms: 1000}\n"
         "pools:\n"
         "  main:\n"
         "    block_size: 16\n"
         "    scrape_interval_ms: 100\n"
         "    router: {policy: kv-cost, overlap: approx}\n"
         "    autoscale:\n" +
         policy +
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

// testing::eventually() polling every 100 ms: each poll here scrapes the gateway child.
template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout) {
  return testing::eventually(pred, timeout, 100ms);
}

// Streams completions through the gateway from `n` threads until stopped, each thread
// pausing `think` after each answer; records which endpoint served each one and every
// status that was not 200.
class StreamingLoad {
 public:
  StreamingLoad(const std::string& url, int n,
                std::chrono::milliseconds think = std::chrono::milliseconds(0)) {
    for (int i = 0; i < n; ++i) {
      threads_.emplace_back([this, url, i, think] {
        for (int k = 0; !stop_.load(); ++k) {
          const std::string body =
              R"({"model":"sim","stream":true,"max_tokens":60,"prompt":"load )" +
              std::to_string(i) + " " + std::to_string(k) + R"( a b c d e f g h"})";
          auto r = io::http_fetch("POST", url + "/v1/completions", body,
                                  {{"Content-Type", "application/json"}}, 30s);
          {
            std::lock_guard lock(mu_);
            ++done_;
            if (!r) {
              failures_.push_back(r.error());
            } else {
              if (r->status != 200 || r->body.find("[DONE]") == std::string::npos ||
                  r->body.find("\"error\"") != std::string::npos) {
                failures_.push_back(std::to_string(r->status) + ": " + r->body.substr(0, 300));
              }
              if (const std::string* e = r->header("x-kvgate-endpoint")) ++served_by_[*e];
            }
          }
          if (think.count() > 0) std::this_thread::sleep_for(think);  // a client's pause
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

// Time to a first token as a user feels it: a one-token completion every 100 ms, timed
// from the request to the whole answer.
class TtftProbe {
 public:
  explicit TtftProbe(const std::string& url) {
    thread_ = std::thread([this, url] {
      while (!stop_.load()) {
        const auto start = std::chrono::steady_clock::now();
        auto r = io::http_fetch("POST", url + "/v1/completions",
                                R"({"model":"sim","max_tokens":1,"prompt":"probe"})",
                                {{"Content-Type", "application/json"}}, 30s);
        const auto end = std::chrono::steady_clock::now();
        {
          std::lock_guard lock(mu_);
          if (!r || r->status != 200) ++failures_;
          samples_.push_back({start, std::chrono::duration<double>(end - start).count()});
        }
        // Paces the probe: one request every 250 ms from start to start, whatever the
        // machine's speed (a sleep after each answer made a fast machine's probe a load of
        // its own, enough for the horizon's burst path under the base load alone).
        std::this_thread::sleep_until(start + 250ms);
      }
    });
  }
  ~TtftProbe() {
    stop_.store(true);
    thread_.join();
  }
  // The p90 of the probes sent within [from, to] and how many there were.
  std::pair<double, size_t> p90(std::chrono::steady_clock::time_point from,
                                std::chrono::steady_clock::time_point to) {
    std::vector<double> v;
    std::lock_guard lock(mu_);
    for (const auto& [at, seconds] : samples_) {
      if (at >= from && at <= to) v.push_back(seconds);
    }
    if (v.empty()) return {0, 0};
    std::sort(v.begin(), v.end());
    return {v[std::min(v.size() - 1, v.size() * 9 / 10)], v.size()};
  }
  int failures() {
    std::lock_guard lock(mu_);
    return failures_;
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::pair<std::chrono::steady_clock::time_point, double>> samples_;
  int failures_ = 0;
};

// The horizon policy in `kvgate serve` with the local actuator: a step load (one stream,
// then eight at once) on a pool whose replica runs two sequences at a time. The burst
// path asks for replicas within a few control intervals, they start (the 7B "caches
// kept" start time-scaled to under a second) and join the routing, and the time to a
// first token is back under the 0.5 s target within one startup time of the step plus
// a few intervals; no request is lost. The decision's inputs are exported.
TEST(GatewayAutoscale, HorizonPolicyMeetsAStepLoadAgainWithinOneStartup) {
  const std::string policy =
      "      policy: horizon\n"
      "      min_replicas: 1\n"
      "      max_replicas: 4\n"
      "      interval: 200ms\n"
      "      window: 5s\n"
      "      behavior:\n"
      "        scale_down: {stabilization_window: 60s}\n"
      "      horizon:\n"
      "        ttft_target: 0.5s\n"
      "        quantile: 0.9\n"
      "        headroom: 1.0\n"
      "        replica: {prefill_tokens_per_s: 100000, itl: 5ms, kv_tokens: 200, max_batch: 2}\n"
      "        burst: {enabled: true, max_step: 4}\n";
  GatewayProcess gw(autoscale_yaml(write_profile(), policy));
  ASSERT_FALSE(gw.url.empty());
  auto log = [&] { return gw.proc->output() + gw.proc->errors(); };
  ASSERT_TRUE(
      eventually([&] { return pool_metric(gw, "kvgate_autoscaler_ready_replicas") == 1; }, 30s))
      << log();

  TtftProbe probe(gw.url);
  // The base load: one client with a 300 ms pause after each answer, well within one
  // replica's modelled rate (a closed loop with no pause keeps one of the replica's two
  // sequences busy all the time: at the model's limit, so the burst path could fire).
  StreamingLoad base(gw.url, 1, 300ms);
  // A negative check: under the base load the kvgate serve child's autoscaler wants no more
  // replicas within 2 s.
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(pool_metric(gw, "kvgate_autoscaler_desired_replicas"), 1) << log();
  const auto step = std::chrono::steady_clock::now();
  StreamingLoad burst(gw.url, 8);
  ASSERT_TRUE(
      eventually([&] { return pool_metric(gw, "kvgate_autoscaler_desired_replicas") >= 3; }, 5s))
      << log();
  ASSERT_TRUE(
      eventually([&] { return pool_metric(gw, "kvgate_autoscaler_ready_replicas") >= 3; }, 30s))
      << log();
  const auto ready = std::chrono::steady_clock::now();
  const double startup =
      gw.metric("kvgate_autoscaler_horizon", {{"pool", "main"}, {"input", "startup_seconds"}});
  EXPECT_GT(startup, 0) << "the startup estimate is exported";
  // One startup (the estimate, at most the 2 s prior until starts are measured) plus the
  // decision's control intervals and the replicas' registration, with room for a
  // sanitizer build on a busy machine.
  const double to_ready = std::chrono::duration<double>(ready - step).count();
  EXPECT_LE(to_ready, startup + 4.0) << "startup estimate " << startup << " s; " << log();

  // Once the replicas serve: the target is met again.
  // Lets the new kvgate engine replicas serve for 1 s before the window measured: a fixed span, not
  // a state.
  std::this_thread::sleep_for(1s);
  const auto from = std::chrono::steady_clock::now();
  // The window (3 s) the probe's p90 is measured over: it waits for nothing.
  std::this_thread::sleep_for(3s);
  const auto [p90, n] = probe.p90(from, std::chrono::steady_clock::now());
  const auto [during, n_during] = probe.p90(step, ready);
  std::printf(
      "step -> %.2f s to 3 ready replicas (startup estimate %.2f s); probe p90 %.3f s "
      "while scaling (%zu), %.3f s after (%zu)\n",
      to_ready, startup, during, n_during, p90, n);
  EXPECT_GE(n, 5u);
  EXPECT_LE(p90, 0.5) << n << " probes; " << log();
  EXPECT_GT(gw.metric("kvgate_autoscaler_horizon",
                      {{"pool", "main"}, {"input", "model_rate_per_replica"}}),
            0)
      << "the queueing model's rate is exported";
  burst.stop();
  base.stop();
  EXPECT_EQ(probe.failures(), 0);
  EXPECT_TRUE(burst.failures().empty()) << burst.failures().front();
  EXPECT_TRUE(base.failures().empty()) << base.failures().front();
  EXPECT_NE(log().find("horizon: "), std::string::npos) << "every decision logs its reason";
}

// The horizon policy's standby replicas in `kvgate serve`: with `standby: 1` the pool
// runs one replica above its need, started and ready but out of routing (health
// "standby" in the admin API); no request reaches it while one replica is enough. A
// burst puts it back into routing at once, before any new replica is ready. The admin
// API's autoscaler view shows the horizon decision: its inputs, the standby count and
// the reason.
TEST(GatewayAutoscale, HorizonStandbyReplicaIsReadyButOutOfRoutingUntilABurst) {
  const std::string policy =
      "      policy: horizon\n"
      "      min_replicas: 1\n"
      "      max_replicas: 4\n"
      "      interval: 500ms\n"
      "      window: 5s\n"
      "      behavior:\n"
      "        scale_down: {stabilization_window: 60s}\n"
      "      horizon:\n"
      "        ttft_target: 3s\n"
      "        quantile: 0.9\n"
      "        headroom: 1.0\n"
      "        standby: 1\n"
      "        replica: {prefill_tokens_per_s: 100000, itl: 5ms, kv_tokens: 200, max_batch: 2}\n"
      "        burst: {enabled: true, threshold: 3, max_step: 4}\n";
  GatewayProcess gw("admin: {address: 127.0.0.1, port: 0}\n" +
                    autoscale_yaml(write_profile(), policy));
  ASSERT_FALSE(gw.url.empty());
  auto log = [&] { return gw.proc->output() + gw.proc->errors(); };
  auto admin_url = gw.proc->wait_for_admin_url();
  ASSERT_TRUE(admin_url) << admin_url.error();
  const std::string admin = *admin_url;
  // The endpoints' URLs by health.
  auto by_health = [&] {
    std::map<std::string, std::vector<std::string>> out;
    json::value v = get_json(admin + "/admin/pools/main/endpoints");
    if (v.is_null()) return out;
    for (const auto& e : v.at("endpoints").as_array()) {
      out[std::string(e.at("health").as_string())].emplace_back(e.at("url").as_string());
    }
    return out;
  };

  // The horizon policy sizes the pool once it has seen a request mix: a light load (one
  // stream). Its decisions must hold still under it (a 3 s TTFT target, decisions every
  // 500 ms, a burst only at 4x the expected rate), so that the replica stays on standby. One
  // replica for the need, one more on standby: both ready, one routed.
  ASSERT_TRUE(
      eventually([&] { return pool_metric(gw, "kvgate_autoscaler_ready_replicas") == 1; }, 30s))
      << log();
  StreamingLoad light(gw.url, 1);
  std::map<std::string, std::vector<std::string>> health;
  ASSERT_TRUE(eventually(
      [&] {
        health = by_health();
        return health["healthy"].size() == 1 && health["standby"].size() == 1;
      },
      30s))
      << log();
  EXPECT_EQ(pool_metric(gw, "kvgate_autoscaler_ready_replicas"), 2) << "standby counts as ready";
  const std::string routed = health["healthy"].front();
  const std::string standby = health["standby"].front();

  // The decision as the admin API shows it: one routed replica's need, one on standby.
  json::value view;
  EXPECT_TRUE(eventually(
      [&] {
        view = get_json(admin + "/admin/pools/main/autoscaler");
        return view.is_object() && view.at("standby").to_number<int>() == 1 &&
               view.at("desired_replicas").to_number<int>() == 2;
      },
      10s))
      << view;
  ASSERT_TRUE(view.is_object()) << log();
  const json::object& inputs = view.at("inputs").as_object();
  for (const char* name : {"need_horizon", "startup_seconds", "model_rate_per_replica", "band",
                           "ttft_correction", "standby"}) {
    EXPECT_TRUE(inputs.contains(name)) << "the horizon input " << name << " in " << view;
  }
  EXPECT_EQ(inputs.at("standby").to_number<double>(), 1);
  const std::string reason(view.at("reason").as_string());
  EXPECT_NE(reason.find("horizon: "), std::string::npos) << reason;
  EXPECT_NE(reason.find("standby"), std::string::npos) << reason;

  // Under the light load, from now on only the routed replica is routed to (the router's
  // own count: a request routed before the hold may still be answered after it).
  auto routed_to = [&](const std::string& url) -> int64_t {
    json::value v = get_json(admin + "/admin/pools/main/endpoints");
    if (v.is_null()) return -1;
    for (const auto& e : v.at("endpoints").as_array()) {
      if (e.at("url").as_string() == url)
        return e.at("load").at("routed_total").to_number<int64_t>();
    }
    return -1;
  };
  const int64_t routed_before = routed_to(routed), standby_before = routed_to(standby);
  // A negative check: for 2 s no request reaches the standby replica (the routed one gets some).
  std::this_thread::sleep_for(2s);
  EXPECT_GT(routed_to(routed), routed_before) << log();
  EXPECT_EQ(routed_to(standby), standby_before) << "a standby replica got a request";
  EXPECT_EQ(by_health()["standby"].size(), 1u);

  // A burst: the standby replica routes again before any new replica is ready.
  StreamingLoad burst(gw.url, 8);
  EXPECT_TRUE(eventually([&] { return burst.served_by().count(standby) > 0; }, 10s))
      << "the standby replica never joined the burst; " << log();
  burst.stop();
  light.stop();
  EXPECT_TRUE(burst.failures().empty()) << burst.failures().front();
  EXPECT_TRUE(light.failures().empty()) << light.failures().front();
}

}  // namespace gateway_autoscale_test
}  // namespace kvgate::testing
