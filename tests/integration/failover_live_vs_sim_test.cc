// Failover live vs simulated: one engine of three fail-stops, once under `kvgate serve`
// with real `kvgate engine` processes (SIGKILL) and once in `kvgate sim` (a fail_stop
// failure), and both must account for every request the same way. Both shells decide
// with the core's rule (route::after_failure, core/route/failover.h) and the core's
// circuit breakers, so the outcome is the rule's, not the timing's.
//
// The scenario is built so that every figure compared is fixed by the rule, not by how
// fast real processes run:
//   1. six streams, routed round-robin over the three engines: two on each. Engine 1
//      dies while all six are streaming (their answers have begun: the engine sent their
//      200 when it accepted them), so its two are lost (migration is off) and the other
//      four complete.
//   2. six more requests after the death. Engine 1's breaker opens at its third failure
//      in a row (circuit_breaker.failures: 3): the two lost streams and the first new
//      request round-robin sends there, which is refused and retried on another engine.
//      From then on engine 1 is out of routing (open for longer than the test).
// Exact in both worlds: lost 2, completed 10, one request retried, one breaker opening,
// nothing migrated, and nothing answered by engine 1 after its death. Timing (TTFT, how
// long the streams took) differs between real processes and the simulation and is not
// compared.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "support/fault_fixture.h"

namespace kvgate::testing {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace failover_live_vs_sim_test {

constexpr int kBefore = 6;  // streams in flight when engine 1 dies, two per engine
constexpr int kAfter = 6;   // requests after its death
constexpr int kLost = kBefore / 3;

// The simulated run: constant arrivals, 6 at 0.1-0.6 s, none until 1.5 s, then 6 at
// 1.75-3.0 s; engine 1 fail-stops at 1 s, when the first six are still streaming (400
// tokens take seconds). Round-robin, retries and breaker as the live gateway's config.
constexpr const char* kScenario = R"(name: failover-live-vs-sim
seed: 1
cluster: {engines: 3, profile: h100-qwen2.5-7b, num_gpu_blocks: 2000}
gateway:
  model: sim
  hop_delay_ms: 1
  scrape_interval_ms: 100
  kv_event_delay_ms: 10
  retries: {max_attempts: 3}
  circuit_breaker: {failures: 3, open_ms: 100000}
policies:
  - {name: round-robin, policy: round-robin, overlap: none}
workload:
  kind: shared_prefix
  shared_prefix: {groups: 12, prompts_per_group: 1, system_prompt_tokens: 64,
                  question_tokens: 16, output_tokens: 400}
  arrivals:
    kind: constant
    stages: [{qps: 10, duration_s: 0.65}, {qps: 0, duration_s: 0.85}, {qps: 4, duration_s: 1.6}]
failures:
  - {endpoint: 1, at: 1, kind: fail_stop}
)";

// Requests lost, completed and retried, breaker openings, streams migrated, and how many
// answers came from the dead engine after its death.
struct Outcome {
  int requests = 0;
  int lost = 0;
  int completed = 0;
  int retried = 0;
  int breaker_openings = 0;
  int migrated = 0;
  int served_by_dead = 0;
};

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs a child to completion (polling, at most `limit`); returns its exit code.
int wait_exit(ChildProcess& p, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (p.running() && std::chrono::steady_clock::now() < deadline) {
    // Waits for the child to exit by itself.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return p.stop();
}

Outcome simulated(const std::filesystem::path& dir) {
  Outcome o;
  const std::filesystem::path scenario = dir / "failover.yaml";
  std::ofstream(scenario) << kScenario;
  auto sim = ChildProcess::spawn(kvgate_bin(), {"sim", scenario.string(), "--no-progress",
                                                "--requests-csv", "--out", (dir / "sim").string()});
  if (!sim) {
    ADD_FAILURE() << sim.error();
    return o;
  }
  EXPECT_EQ(wait_exit(**sim, std::chrono::seconds(30)), 0) << (*sim)->errors();
  boost::json::value report = parse_json(read_text(dir / "sim" / "report.json"));
  if (!report.is_object() || !report.as_object().contains("policies")) {
    ADD_FAILURE() << "no report from kvgate sim: " << (*sim)->output() << (*sim)->errors();
    return o;
  }
  const boost::json::object& p = report.as_object().at("policies").as_array().at(0).as_object();
  if (!p.contains("failed")) {
    ADD_FAILURE() << "the report has no failure figures: " << boost::json::serialize(p);
    return o;
  }
  o.requests = p.at("requests").to_number<int>();
  o.completed = p.at("completed").to_number<int>();
  o.lost = p.at("failed").to_number<int>();
  o.retried = p.at("retried").to_number<int>();
  o.migrated = p.at("migrated").to_number<int>();
  o.breaker_openings = p.at("breaker_openings").to_number<int>();
  // requests.csv: policy,request,stage,endpoint,arrival_s,ttft_s,e2e_s,...; a request
  // keeps the endpoint it was last sent to, and e2e_s -1 when it did not complete.
  std::stringstream csv(read_text(dir / "sim" / "requests.csv"));
  std::string row;
  std::getline(csv, row);  // header
  while (std::getline(csv, row)) {
    std::vector<std::string> f;
    std::stringstream ss(row);
    for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
    if (f.size() < 7) {
      ADD_FAILURE() << "bad requests.csv row: " << row;
      continue;
    }
    o.served_by_dead += f[3] == "1" && std::stod(f[6]) >= 0;
  }
  return o;
}

Outcome live() {
  Outcome o;
  const std::vector<std::string> args = {"--time-scale", "0.5", "--model", "sim"};
  EngineProcess a(args), b(args), c(args);
  if (a.url.empty() || b.url.empty() || c.url.empty()) return o;
  GatewayProcess gw(gateway_yaml({a.url, b.url, c.url}, "round-robin",
                                 "retries: {max_attempts: 3}\n"
                                 "circuit_breaker: {failures: 3, open_ms: 100000}\n"));
  if (gw.url.empty()) return o;

  // 1. Six streams; once each has its first token, engine b dies.
  std::vector<RawClient> streams;
  for (int i = 0; i < kBefore; ++i) {
    streams.emplace_back(gw.url);
    EXPECT_TRUE(streams.back().send(
        raw_post("/v1/chat/completions", chat_body("first" + std::to_string(i), 400, true))));
  }
  int on_b = 0;
  for (RawClient& s : streams) {
    EXPECT_TRUE(s.read_until("\"content\":\"", std::chrono::seconds(20)));
    on_b += response_header(s.received(), "x-kvgate-endpoint") == b.url;
  }
  EXPECT_EQ(on_b, kLost) << "round-robin put " << on_b << " of " << kBefore << " streams on b";
  b.proc->signal(SIGKILL);
  for (RawClient& s : streams) {
    ++o.requests;
    EXPECT_TRUE(s.read_until("data: [DONE]", std::chrono::seconds(30)));
    const std::string body = response_body(s.received());
    const bool failed = body.find("\"error\"") != std::string::npos;
    o.lost += failed;
    o.completed += !failed && body.find("data: [DONE]") != std::string::npos;
  }

  // 2. Six more, one after the other.
  for (int i = 0; i < kAfter; ++i) {
    ++o.requests;
    auto r = gw.post("/v1/chat/completions", chat_body("second" + std::to_string(i), 4, true));
    const bool ok = r.status == 200 && r.body.find("\"error\"") == std::string::npos &&
                    r.body.find("data: [DONE]") != std::string::npos;
    o.completed += ok;
    o.lost += !ok;
    const std::string* endpoint = r.header("x-kvgate-endpoint");
    o.served_by_dead += endpoint != nullptr && *endpoint == b.url;
  }
  o.retried = static_cast<int>(gw.metric("kvgate_upstream_retries_total", {{"pool", "main"}}));
  o.breaker_openings = static_cast<int>(
      gw.metric("kvgate_circuit_breaker_open", {{"pool", "main"}, {"endpoint", b.url}}));
  o.migrated = static_cast<int>(
      gw.metric("kvgate_stream_migrations_total", {{"pool", "main"}, {"outcome", "resumed"}}));
  EXPECT_EQ(gw.proc->stop(), 0) << gw.proc->errors();
  return o;
}

TEST(FailoverLiveVsSim, AFailStopIsAccountedForTheSameWayLiveAndSimulated) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("kvgate-failover-live-vs-sim-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const Outcome sim = simulated(dir);
  ASSERT_FALSE(HasFailure());
  const Outcome real = live();
  ASSERT_FALSE(HasFatalFailure());
  std::printf(
      "[ failover ] lost / completed / retried / breaker openings / migrated / served by the "
      "dead engine: sim %d / %d / %d / %d / %d / %d, live %d / %d / %d / %d / %d / %d\n",
      sim.lost, sim.completed, sim.retried, sim.breaker_openings, sim.migrated, sim.served_by_dead,
      real.lost, real.completed, real.retried, real.breaker_openings, real.migrated,
      real.served_by_dead);
  for (const Outcome* o : {&sim, &real}) {
    const char* world = o == &sim ? "simulated" : "live";
    EXPECT_EQ(o->requests, kBefore + kAfter) << world;
    EXPECT_EQ(o->lost, kLost) << world;  // the streams on the dead engine, no more
    EXPECT_EQ(o->completed, kBefore + kAfter - kLost) << world;
    EXPECT_EQ(o->retried, 1) << world;  // the one refused before its breaker opened
    EXPECT_EQ(o->breaker_openings, 1) << world;
    EXPECT_EQ(o->migrated, 0) << world;
    EXPECT_EQ(o->served_by_dead, 0) << world;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace failover_live_vs_sim_test
}  // namespace kvgate::testing
