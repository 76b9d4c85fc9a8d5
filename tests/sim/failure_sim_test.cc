// Injected endpoint failures in the simulator, through the gateway's own rules: the
// core's circuit breakers and the retry and migration rule of route/failover.h. Every
// simulated request is a stream: the answer has begun once an engine accepted it.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "env/file.h"
#include "sim/cluster_sim.h"
#include "workload/report.h"
#include "workload/scenario.h"

namespace kvgate::sim {
// Named after the file, not anonymous: tests compile in unity batches (docs/development.md).
namespace failure_sim_test {

using workload::parse_scenario;
using workload::RequestRecord;
using workload::Scenario;

// Four small engines, random routing (so requests keep landing on a failed engine until
// its breaker takes it out), 10 s of traffic at 40 requests/s.
constexpr const char* kBase = R"(
name: failures
seed: 3
cluster:
  engines: 4
  profile: h100-qwen2.5-7b
  num_gpu_blocks: 512
gateway:
  model: m
  hop_delay_ms: 1
  scrape_interval_ms: 50
  kv_event_delay_ms: 5
  circuit_breaker: {failures: 3, open_ms: 100000}
policies:
  - {name: random, policy: random, overlap: none}
workload:
  kind: shared_prefix
  shared_prefix: {groups: 12, prompts_per_group: 3, system_prompt_tokens: 1024,
                  question_tokens: 64, output_tokens: 200}
  arrivals:
    stages: [{qps: 40, duration_s: 10}]
)";

// kBase with `failures` appended and `gateway` lines (e.g. migration) added.
Scenario scenario(const std::string& failures, const std::string& gateway = "") {
  std::string base(kBase);
  const std::string anchor = "  circuit_breaker: {failures: 3, open_ms: 100000}\n";
  base.insert(base.find(anchor) + anchor.size(), gateway);
  auto s = parse_scenario(base + failures, "", env::read_file, "f.yaml");
  EXPECT_TRUE(s.ok()) << s.error();
  return s.ok() ? *s : Scenario{};
}

workload::PolicyRun run(const Scenario& s) {
  auto r = run_policy(s, s.policies.front(), s.seed);
  EXPECT_TRUE(r.ok()) << r.error();
  return r.ok() ? std::move(*r) : workload::PolicyRun{};
}

workload::Summary summary(const Scenario& s, const workload::PolicyRun& r) {
  auto w = workload::make_workload(s.workload, s.seed, env::read_file);
  EXPECT_TRUE(w.ok()) << w.error();
  return workload::summarize(r, w.ok() ? (*w)->stages() : std::vector<workload::StageInfo>{});
}

// What a fail_stop of engine-1 from 3 s to 7 s did to the run's requests.
struct FailStopOutcome {
  uint64_t lost = 0, retried = 0, migrated = 0, done = 0;
};

FailStopOutcome fail_stop_outcome(const workload::PolicyRun& r) {
  FailStopOutcome o;
  for (const RequestRecord& q : r.requests) {
    o.retried += q.retries > 0;
    o.migrated += q.migrated;
    o.done += q.failed || q.rejected || q.finish >= 0;
    if (q.failed) {
      ++o.lost;
      // Only streams engine-1 had accepted before it died: their answer had begun, so
      // they are not retried (a request it refused is).
      EXPECT_EQ(q.endpoint, 1u);
      EXPECT_LT(q.arrival, 3 * kSecond);
    }
    if (q.migrated) {
      EXPECT_LT(q.arrival, 3 * kSecond);  // it was on engine-1 when it died
      EXPECT_NE(q.endpoint, 1u);          // the continuation went elsewhere
      EXPECT_GE(q.finish, 0);
    }
    // Nothing is served by the dead engine while it is down.
    if (q.finish >= 0 && q.endpoint == 1) {
      EXPECT_FALSE(q.first_token > 3 * kSecond + 10 * kMillisecond && q.finish < 7 * kSecond)
          << "served by engine-1 while it was down";
    }
  }
  return o;
}

TEST(FailureSim, FailStopLosesTheStreamsItHeldAndItsBreakerOpens) {
  const Scenario s = scenario("failures: [{endpoint: 1, at: 3, kind: fail_stop, duration: 4}]\n");
  const workload::PolicyRun r = run(s);
  ASSERT_GT(r.requests.size(), 300u);
  EXPECT_TRUE(r.failures_injected);
  EXPECT_GE(r.breaker_openings, 1u);  // 3 failures in a row took engine-1 out
  const FailStopOutcome o = fail_stop_outcome(r);
  EXPECT_GT(o.lost, 0u);  // migration off: the streams it held end with an error event
  EXPECT_EQ(o.migrated, 0u);
  EXPECT_EQ(o.done, r.requests.size());  // none left hanging
  const workload::Summary sum = summary(s, r);
  EXPECT_EQ(sum.failed, o.lost);
  EXPECT_EQ(sum.retried, o.retried);
  EXPECT_NE(workload::summary_csv({sum}).find("failed,retried,migrated,breaker_openings"),
            std::string::npos);
}

TEST(FailureSim, WithMigrationTheStreamsAFailStopHeldContinueElsewhereNoneLost) {
  const Scenario s = scenario("failures: [{endpoint: 1, at: 3, kind: fail_stop, duration: 4}]\n",
                              "  migration: {max_migrations: 2}\n");
  ASSERT_EQ(s.gateway.max_migrations, 2);
  const workload::PolicyRun r = run(s);
  ASSERT_GT(r.requests.size(), 300u);
  const FailStopOutcome o = fail_stop_outcome(r);
  EXPECT_EQ(o.lost, 0u);
  EXPECT_GT(o.migrated, 0u);
  EXPECT_EQ(o.done, r.requests.size());
  EXPECT_EQ(summary(s, r).migrated, o.migrated);
}

TEST(FailureSim, ErroringWithRateOneOpensTheBreakerAfterFailuresConsecutiveErrors) {
  const Scenario s = scenario("failures: [{endpoint: engine-2, at: 0, kind: erroring}]\n");
  ASSERT_EQ(s.failures.size(), 1u);
  EXPECT_EQ(s.failures[0].error_rate, 1.0);  // the default
  const workload::PolicyRun r = run(s);
  // Open after circuit_breaker.failures (3) consecutive 503s, and it stays open (100 s).
  EXPECT_EQ(r.breaker_openings, 1u);
  uint64_t retries = 0;
  for (const RequestRecord& q : r.requests) {
    retries += q.retries;
    EXPECT_FALSE(q.failed);  // each 503 was retried on another engine, which answered
    if (q.finish >= 0) {
      EXPECT_NE(q.endpoint, 2u);
    }
  }
  // The three that opened it, and the few already on their way then.
  EXPECT_GE(retries, 3u);
  EXPECT_LE(retries, 5u);
}

TEST(FailureSim, NoFailureInTheRunLeavesTheTotalsAsBefore) {
  const Scenario plain = scenario("");
  // A failure after the last request: it never happens, the run must not change.
  const Scenario late = scenario("failures: [{endpoint: 0, at: 1000, kind: fail_stop}]\n");
  const workload::PolicyRun a = run(plain);
  const workload::PolicyRun b = run(late);
  EXPECT_FALSE(a.failures_injected);
  EXPECT_EQ(a.end_time, b.end_time);
  ASSERT_EQ(a.requests.size(), b.requests.size());
  for (size_t i = 0; i < a.requests.size(); ++i) {
    EXPECT_EQ(a.requests[i].endpoint, b.requests[i].endpoint) << i;
    EXPECT_EQ(a.requests[i].first_token, b.requests[i].first_token) << i;
    EXPECT_EQ(a.requests[i].finish, b.requests[i].finish) << i;
    EXPECT_EQ(a.requests[i].cached_tokens, b.requests[i].cached_tokens) << i;
  }
  const workload::Summary sa = summary(plain, a);
  const workload::Summary sb = summary(late, b);
  EXPECT_EQ(sa.completed, sb.completed);
  EXPECT_EQ(sb.failed, 0u);
  EXPECT_EQ(sb.retried, 0u);
  EXPECT_EQ(b.breaker_openings, 0u);
  // Without failures the report has no failure columns (its bytes are as before).
  EXPECT_EQ(workload::summary_csv({sa}).find("failed"), std::string::npos);
  EXPECT_EQ(workload::report_json("x", 1, {sa}).find("breaker_openings"), std::string::npos);
}

TEST(FailureSim, ConfigErrorsNameFileLineAndField) {
  const std::string base(kBase);
  const auto line = std::to_string(std::count(base.begin(), base.end(), '\n') + 2);
  auto error_of = [&](const std::string& entry) {
    auto s = parse_scenario(base + "failures:\n  - " + entry + "\n", "", env::read_file, "f.yaml");
    EXPECT_FALSE(s.ok());
    return s.ok() ? std::string() : s.error();
  };
  const std::string bad_engine = error_of("{endpoint: 9, at: 1, kind: fail_stop}");
  EXPECT_EQ(bad_engine.find("f.yaml:" + line + ":"), 0u) << bad_engine;
  EXPECT_NE(bad_engine.find("failures[0].endpoint: expected an engine index below 4"),
            std::string::npos)
      << bad_engine;
  const std::string bad_kind = error_of("{endpoint: 0, at: 1, kind: melt}");
  EXPECT_EQ(bad_kind.find("f.yaml:" + line + ":"), 0u) << bad_kind;
  EXPECT_NE(bad_kind.find("failures[0].kind: expected fail_stop, slow or erroring"),
            std::string::npos)
      << bad_kind;
  EXPECT_NE(error_of("{endpoint: 0, at: 1, kind: slow}").find("failures[0].factor: required"),
            std::string::npos);
  EXPECT_NE(error_of("{endpoint: 0, at: 1, kind: erroring, error_rate: 2}")
                .find("failures[0].error_rate: must be 0..1"),
            std::string::npos);
  EXPECT_NE(error_of("{endpoint: 0, at: 1, kind: fail_stop, factor: 2}")
                .find("failures[0].factor: only for kind slow"),
            std::string::npos);
  EXPECT_NE(error_of("{endpoint: 0, kind: fail_stop}").find("failures[0].at: required"),
            std::string::npos);
  EXPECT_NE(error_of("{endpoint: 0, at: 1, kind: fail_stop, duraton: 2}")
                .find("failures[0].duraton: unknown field"),
            std::string::npos);
}

}  // namespace failure_sim_test
}  // namespace kvgate::sim
