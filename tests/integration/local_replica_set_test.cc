// The local replica set with real server processes: the core Autoscaler decides,
// the set launches, health-checks, registers, drains and stops replicas, and
// replaces one that crashes. Two kinds of replica: real `kvgate engine` processes that
// boot through the 7B cold-start phases time-scaled to ~1 s, and a plain HTTP server
// (Python's http.server behind a `sleep`) to show the command can be any server.
#include "io/local_replica_set.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "core/scale/autoscaler.h"
#include "io/health_probe.h"

namespace kvgate::io {
namespace {

using namespace std::chrono_literals;

class LocalReplicaSetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("kvgate-actuator-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "health") << "ok\n";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  LocalReplicaSetOptions options() {
    LocalReplicaSetOptions o;
    o.command = {"sh", "-c",
                 "sleep 0.3; exec python3 -m http.server {port} --bind 127.0.0.1 --directory " +
                     dir_.string()};
    o.stop_grace = 2s;
    o.on_change = [this](const ReplicaChange& c) {
      switch (c.kind) {
        case ReplicaChange::Kind::kReady:
          registered_[c.id] = c.url;
          break;
        case ReplicaChange::Kind::kDraining:
          draining_.push_back(c.id);
          registered_.erase(c.id);
          break;
        case ReplicaChange::Kind::kRemoved:
          registered_.erase(c.id);
          removed_.push_back(c.id);
          crashes_ += c.crashed;
          break;
      }
    };
    o.in_flight = [this](const std::string& id) { return in_flight_[id]; };
    return o;
  }

  // Polls until `pred` holds or 20 s pass.
  template <typename Pred>
  bool poll_until(LocalReplicaSet& a, Pred pred) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < deadline) {
      a.poll();
      if (pred()) return true;
      // Waits for the kvgate engine children the set runs to reach the state.
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }

  scale::PoolSignals signals(const LocalReplicaSet& a, double waiting) {
    scale::PoolSignals s;
    s.waiting = waiting;
    s.replicas = a.replicas();
    return s;
  }

  std::filesystem::path dir_;
  std::map<std::string, std::string> registered_;
  std::vector<std::string> draining_, removed_;
  std::map<std::string, uint32_t> in_flight_;
  int crashes_ = 0;

  void scale_one_three_one(std::vector<std::string> command);
};

void LocalReplicaSetTest::scale_one_three_one(std::vector<std::string> command) {
  scale::AutoscaleConfig config;
  config.policy = scale::PolicyKind::kTarget;
  config.signal = scale::Signal::kWaiting;
  config.target = 4;
  config.min_replicas = 1;
  config.max_replicas = 3;
  config.behavior.scale_down.stabilization_window = 0;
  config.young_age = 0;
  auto autoscaler = scale::Autoscaler::make(config);
  ASSERT_TRUE(autoscaler.ok()) << autoscaler.error();

  LocalReplicaSetOptions o = options();
  if (!command.empty()) o.command = std::move(command);
  auto made = LocalReplicaSet::make(o);
  ASSERT_TRUE(made.ok()) << made.error();
  LocalReplicaSet& a = **made;
  ASSERT_TRUE(a.launch(1).ok());
  ASSERT_TRUE(poll_until(a, [&] { return a.ready() == 1; }));
  ASSERT_EQ(registered_.size(), 1u);

  // 12 waiting on one replica, target 4 per replica: three replicas.
  Nanos t = 60 * kSecond;
  scale::Decision up = autoscaler->decide(signals(a, 12), t);
  EXPECT_EQ(up.desired_replicas, 3);
  ASSERT_TRUE(a.apply(up).ok());
  EXPECT_EQ(a.size(), 3u);
  EXPECT_EQ(a.ready(), 1u);  // the new ones are still starting: not registered yet
  EXPECT_EQ(registered_.size(), 1u);
  ASSERT_TRUE(poll_until(a, [&] { return a.ready() == 3; }));
  ASSERT_EQ(registered_.size(), 3u);
  for (const auto& [id, url] : registered_) {
    auto h = parse_url(url + "/health");
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(probe_health(*h, 1s), 200) << id;
  }

  // Nothing waiting: back to one. Drained replicas stop once the router holds nothing.
  for (const auto& [id, url] : registered_) in_flight_[id] = 1;
  t += 120 * kSecond;
  scale::Decision down = autoscaler->decide(signals(a, 0), t);
  EXPECT_EQ(down.desired_replicas, 1);
  ASSERT_EQ(down.drain.size(), 2u);
  ASSERT_TRUE(a.apply(down).ok());
  EXPECT_EQ(draining_.size(), 2u);
  EXPECT_EQ(registered_.size(), 1u);  // the router stopped sending to the drained two
  a.poll();
  EXPECT_EQ(a.size(), 3u) << "a draining replica with requests in flight must not stop";
  for (const std::string& id : draining_) in_flight_[id] = 0;
  ASSERT_TRUE(poll_until(a, [&] { return a.size() == 1; }));
  EXPECT_EQ(removed_.size(), 2u);
  EXPECT_EQ(crashes_, 0);

  // The survivor crashes: it is deregistered and a new one takes its place.
  std::vector<scale::ReplicaSignal> left = a.replicas();
  ASSERT_EQ(left.size(), 1u);
  const std::string survivor = left.front().id;
  // Kill its process group from outside, as a crash would.
  const pid_t pid = a.pid(survivor);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(-pid, SIGKILL), 0);
  ASSERT_TRUE(poll_until(a, [&] { return crashes_ == 1 && a.ready() == 1; }));
  EXPECT_EQ(a.restarts(), 1u);
  EXPECT_EQ(registered_.count(survivor), 0u);
  EXPECT_EQ(registered_.size(), 1u);
}

TEST_F(LocalReplicaSetTest, ScalesOneToThreeToOneAndReplacesACrashedReplica) {
  scale_one_three_one({});
}

// The same with real `kvgate engine` processes booting through the 7B cold-start phases
// at 1/200 of real time (~1 s instead of ~200 s).
TEST_F(LocalReplicaSetTest, ScalesKvgateEngines) {
  const char* bin = std::getenv("KVGATE_BIN");
  if (bin == nullptr) GTEST_SKIP() << "KVGATE_BIN not set";
  scale_one_three_one({bin, "engine", "--port", "{port}", "--startup", "cold", "--time-scale",
                       "0.005", "--num-gpu-blocks", "1024"});
}

TEST_F(LocalReplicaSetTest, ACommandThatCannotRunIsAnError) {
  LocalReplicaSetOptions o = options();
  o.command = {"/nonexistent/kvgate-no-such-server", "--port", "{port}"};
  auto a = LocalReplicaSet::make(o);
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE((*a)->launch(1).ok());
  EXPECT_EQ((*a)->size(), 0u);
  o.command.clear();
  EXPECT_FALSE(LocalReplicaSet::make(o).ok());
}

}  // namespace
}  // namespace kvgate::io
