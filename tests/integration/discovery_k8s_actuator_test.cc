// The Kubernetes actuator and Kubernetes discovery on one pool of a real `kvgate serve`:
// the autoscaler PATCHes the Deployment's scale subresource, the test plays the
// Deployment controller on the test API server (support/fake_kube_api.h: pods created
// Pending, Ready a little later, given a deletionTimestamp before they go), and
// discovery brings each pod in as it becomes Ready and drains it as it terminates. The
// pods are real `kvgate engine` processes on loopback. No request fails, no request
// reaches a pod before it is Ready, and the autoscaler counts its ready replicas from
// what discovery admitted.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "support/engine_fixture.h"
#include "support/eventually.h"
#include "support/fake_kube_api.h"
#include "support/gateway_fixture.h"

namespace kvgate::testing {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace discovery_k8s_actuator_test {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

int port_of(const std::string& url) { return std::stoi(url.substr(url.rfind(':') + 1)); }

// The Deployment controller: every 20 ms, pods up to spec.replicas (vllm-0, vllm-1, ...,
// each bound to the engine of the same index), Pending for `pending` and then Ready; above
// spec.replicas, the newest pod gets a deletionTimestamp and is deleted `grace` later.
class Controller {
 public:
  Controller(FakeKubeApi& api, std::vector<std::string> engines, Clock::duration pending,
             Clock::duration grace)
      : api_(api), engines_(std::move(engines)), pending_(pending), grace_(grace) {
    thread_ = std::thread([this] {
      while (!stop_) {
        step();
        // Paces the fake controller's steps (every 20 ms), as a real one's loop: it waits for
        // nothing.
        std::this_thread::sleep_for(20ms);
      }
    });
  }
  ~Controller() {
    stop_ = true;
    thread_.join();
  }
  // When pod `i` turned Ready (Clock::time_point::max() while it has not).
  Clock::time_point ready_at(size_t i) {
    std::lock_guard lock(mu_);
    return i < pods_.size() ? pods_[i].ready_at : Clock::time_point::max();
  }
  int deleted() {
    std::lock_guard lock(mu_);
    return deleted_;
  }

 private:
  struct Pod {
    bool exists = false;
    Clock::time_point created, ready_at = Clock::time_point::max(), terminating_at;
    bool terminating = false;
  };
  boost::json::object pod(size_t i, bool ready, bool terminating) const {
    boost::json::object p = make_pod("vllm-" + std::to_string(i), "127.0.0.1", port_of(engines_[i]),
                                     ready && !terminating);
    if (terminating) {
      p["metadata"].as_object()["deletionTimestamp"] = "2026-12-02T10:00:00Z";
      p["metadata"].as_object()["deletionGracePeriodSeconds"] = 30;
    }
    return p;
  }
  void step() {
    std::lock_guard lock(mu_);
    const auto now = Clock::now();
    const size_t spec =
        std::min<size_t>(static_cast<size_t>(api_.spec_replicas()), engines_.size());
    pods_.resize(engines_.size());
    size_t live = 0;
    for (const Pod& p : pods_) live += p.exists && !p.terminating;
    for (size_t i = 0; i < pods_.size() && live < spec; ++i) {  // scale up: lowest free index
      if (pods_[i].exists) continue;
      pods_[i] = {.exists = true, .created = now};
      api_.upsert(pod(i, false, false));
      ++live;
    }
    for (size_t i = pods_.size(); i-- > 0 && live > spec;) {  // scale down: the newest
      if (!pods_[i].exists || pods_[i].terminating) continue;
      pods_[i].terminating = true;
      pods_[i].terminating_at = now;
      api_.upsert(pod(i, true, true));
      --live;
    }
    int32_t existing = 0;
    for (size_t i = 0; i < pods_.size(); ++i) {
      Pod& p = pods_[i];
      if (!p.exists) continue;
      if (p.terminating && now - p.terminating_at >= grace_) {
        api_.remove("vllm-" + std::to_string(i));
        p = {};
        ++deleted_;
        continue;
      }
      ++existing;
      if (!p.terminating && p.ready_at == Clock::time_point::max() && now - p.created >= pending_) {
        p.ready_at = now;
        api_.upsert(pod(i, true, false));
      }
    }
    api_.set_status_replicas(existing);
  }

  FakeKubeApi& api_;
  const std::vector<std::string> engines_;
  const Clock::duration pending_, grace_;
  std::mutex mu_;
  std::vector<Pod> pods_;
  int deleted_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

std::string write_kubeconfig(const std::string& server) {
  const std::string token = write_temp_file("k8s-token", "tok-1\n");
  return write_temp_file("k8s-kubeconfig", test_kubeconfig(server, token));
}

// Streams completions from `n` threads; records for each one its endpoint and when it
// was sent, and every failure.
class Load {
 public:
  Load(const std::string& url, int n) {
    for (int i = 0; i < n; ++i) {
      threads_.emplace_back([this, url, i] {
        for (int k = 0; !stop_; ++k) {
          const auto sent = Clock::now();
          auto r = io::http_fetch("POST", url + "/v1/completions",
                                  R"({"model":"sim","stream":true,"max_tokens":60,"prompt":"k8s )" +
                                      std::to_string(i) + " " + std::to_string(k) + R"( a b c"})",
                                  {{"Content-Type", "application/json"}}, 30s);
          std::lock_guard lock(mu_);
          if (!r || r->status != 200 || r->body.find("[DONE]") == std::string::npos ||
              r->body.find("\"error\"") != std::string::npos) {
            failures_.push_back(r ? std::to_string(r->status) + ": " + r->body.substr(0, 200)
                                  : r.error());
            continue;
          }
          if (const std::string* e = r->header("x-kvgate-endpoint")) {
            auto& first = first_sent_[*e];
            if (first == Clock::time_point{} || sent < first) first = sent;
            ++served_[*e];
          }
        }
      });
    }
  }
  ~Load() { stop(); }
  void stop() {
    stop_ = true;
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  int served(const std::string& e) {
    std::lock_guard lock(mu_);
    return served_.contains(e) ? served_[e] : 0;
  }
  Clock::time_point first_sent(const std::string& e) {
    std::lock_guard lock(mu_);
    return first_sent_[e];
  }
  std::vector<std::string> failures() {
    std::lock_guard lock(mu_);
    return failures_;
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::map<std::string, int> served_;
  std::map<std::string, Clock::time_point> first_sent_;
  std::vector<std::string> failures_;
};

// testing::eventually() polling every 50 ms: each poll here asks the gateway child.
template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout) {
  return testing::eventually(pred, timeout, 50ms);
}

TEST(KubernetesActuatorWithDiscovery, ScalesTheDeploymentAndRoutesToPodsOnceReady) {
  // Slow engines (5 ms per step, two sequences at a time): a handful of streams queue.
  const std::string profile = write_temp_file(
      "k8s-profile.yaml", "name: slow-test-gpu\nbase: h100-qwen2.5-7b\nstep_overhead_s: 0.5\n");
  std::vector<std::unique_ptr<EngineProcess>> engines;
  std::vector<std::string> urls;
  for (int i = 0; i < 3; ++i) {
    engines.push_back(std::make_unique<EngineProcess>(std::vector<std::string>{
        "--model", "sim", "--profile", profile, "--max-num-seqs", "2", "--time-scale", "0.01"}));
    ASSERT_FALSE(engines.back()->url.empty());
    urls.push_back(engines.back()->url);
  }
  FakeKubeApi api("tok-1");
  ASSERT_TRUE(api.error().empty()) << api.error();
  api.add_deployment("vllm", 1);
  Controller controller(api, urls, /*pending=*/600ms, /*grace=*/1500ms);
  const std::string kubeconfig = write_kubeconfig(api.url());

  GatewayProcess gw(
      "listeners:\n  - {address: 127.0.0.1, port: 0}\n"
      "timeouts: {header_ms: 5000, drain_ms: 5000, connect_ms: 1000}\n"
      "pools:\n  main:\n    block_size: 16\n    scrape_interval_ms: 100\n"
      "    router: {policy: kv-cost, overlap: approx}\n"
      "    autoscale:\n      signal: waiting\n      target: 2\n      min_replicas: 1\n"
      "      max_replicas: 3\n      interval: 200ms\n      window: 5s\n"
      "      behavior:\n        scale_down: {stabilization_window: 2s}\n"
      "      cold_start: {startup_time: 2s, young_age: 0s}\n"
      "      actuator: {kind: kubernetes, deployment: vllm, kubeconfig: " +
      kubeconfig +
      "}\n"
      "    discovery:\n      grace_ms: 200\n      drain_timeout_ms: 10000\n"
      "      sources:\n        - {kind: kubernetes, name: pods, selector: app=vllm, "
      "backoff_ms: 100, kubeconfig: " +
      kubeconfig +
      "}\n"
      "models:\n  - {name: sim, pool: main}\n");
  ASSERT_FALSE(gw.url.empty());
  const auto metric = [&](const std::string& name) { return gw.metric(name, {{"pool", "main"}}); };

  // The Deployment's one pod is discovered and ready.
  ASSERT_TRUE(eventually([&] { return metric("kvgate_autoscaler_ready_replicas") == 1; }, 15s));

  // Load: the autoscaler raises spec.replicas; new pods join only once Ready.
  Load load(gw.url, 10);
  ASSERT_TRUE(eventually([&] { return api.spec_replicas() >= 2; }, 20s))
      << "no scale-up; patches: " << api.scale_patches().size();
  ASSERT_TRUE(eventually([&] { return load.served(urls[1]) > 0; }, 20s));
  EXPECT_GE(load.first_sent(urls[1]), controller.ready_at(1))
      << "a request reached vllm-1 before its pod was Ready";
  // The autoscaler's ready count is what discovery admitted, not the scale subresource's.
  ASSERT_TRUE(eventually([&] { return metric("kvgate_autoscaler_ready_replicas") >= 2; }, 10s));

  // No load: spec.replicas comes down, the terminating pods drain and go.
  load.stop();
  ASSERT_TRUE(eventually([&] { return api.spec_replicas() == 1; }, 30s));
  ASSERT_TRUE(eventually([&] { return controller.deleted() >= 1; }, 15s));
  ASSERT_TRUE(eventually([&] { return metric("kvgate_autoscaler_ready_replicas") == 1; }, 15s));
  EXPECT_TRUE(load.failures().empty())
      << load.failures().size() << " failed, first: " << load.failures().front();
  EXPECT_GT(load.served(urls[0]), 0);
  std::printf("k8s actuator + discovery: spec.replicas patches %zu, served %d/%d/%d\n",
              api.scale_patches().size(), load.served(urls[0]), load.served(urls[1]),
              load.served(urls[2]));
}

}  // namespace discovery_k8s_actuator_test
}  // namespace kvgate::testing
