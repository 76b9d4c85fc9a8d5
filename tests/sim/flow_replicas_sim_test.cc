// Flow control behind several gateway replicas in the simulator: every request is served
// or refused whatever the replicas, their sync and their room sharing, one replica is the
// single gateway of before call for call (room sharing or not), sharing needs the sync,
// and the runs are deterministic.
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <tuple>
#include <vector>

#include "env/file.h"
#include "sim/cluster_sim.h"
#include "workload/scenario.h"

namespace kvgate::sim {
namespace flow_replicas_sim_test {

using workload::PolicyRun;
using workload::PolicySpec;
using workload::RequestRecord;
using workload::Scenario;

// Tenant A at 10x B into two small engines that A alone saturates; the queue on in every
// run (policy(), below), in front of one gateway or of four.
constexpr const char* kNoisyCluster = R"(
name: flow replicas
seed: 5
cluster:
  engines: 2
  profile: h100-qwen2.5-7b
  num_gpu_blocks: 1024
gateway: {model: m, hop_delay_ms: 1, scrape_interval_ms: 50}
max_time_s: 120
policies:
)";
constexpr const char* kNoisyWorkload = R"(workload:
  kind: tenants
  tenants:
    - name: A
      workload:
        kind: shared_prefix
        shared_prefix: {groups: 4, prompts_per_group: 8, system_prompt_tokens: 1024,
                        question_tokens: 512, output_tokens: 128, order: random}
        arrivals: {kind: poisson, stages: [{qps: 40, duration_s: 4}]}
    - name: B
      workload:
        kind: shared_prefix
        shared_prefix: {groups: 2, prompts_per_group: 8, system_prompt_tokens: 1024,
                        question_tokens: 512, output_tokens: 128, order: random}
        arrivals: {kind: poisson, stages: [{qps: 4, duration_s: 4}]}
)";

// One of the scenario's policies: load balancing with the queue on; `replicas`, its
// gateway_replicas (empty: none, the single gateway); `flow`, more flow_control keys.
std::string policy(const std::string& name, const std::string& replicas = "",
                   const std::string& flow = "") {
  std::string p = "  - name: " + name +
                  "\n"
                  "    policy: load\n"
                  "    overlap: none\n"
                  "    saturation: {queue_threshold: 1, kv_threshold: 0.9}\n"
                  "    flow_control: {enabled: true, max_wait: 30" +
                  flow + "}\n";
  if (!replicas.empty()) p += "    gateway_replicas: " + replicas + "\n";
  return p;
}

Scenario noisy() {
  const std::string text =
      kNoisyCluster + policy("single") + policy("one replica", "{count: 1}") +
      policy("four sync off", "{count: 4, sync: off}") +
      policy("four own counters", "{count: 4, sync: on, lag_ms: 10, fleet_fairness: off}") +
      policy("four fleet", "{count: 4, sync: on, lag_ms: 10}") +
      policy("four fleet no lag", "{count: 4, sync: on}") +
      policy("four fleet no share", "{count: 4, sync: on, lag_ms: 10}", ", room_share: none") +
      policy("four fleet demand", "{count: 4, sync: on, lag_ms: 10}", ", room_share: demand") +
      policy("one replica demand", "{count: 1}", ", room_share: demand") +
      policy("four sync off no share", "{count: 4, sync: off}", ", room_share: none") +
      kNoisyWorkload;
  auto s = workload::parse_scenario(text, "", env::read_file);
  EXPECT_TRUE(s.ok()) << s.error();
  return *s;
}

const PolicySpec& policy_named(const Scenario& s, const std::string& name) {
  const PolicySpec* p = s.policy(name);
  if (!p) ADD_FAILURE() << "no policy " << name;
  return p ? *p : s.policies.front();
}

PolicyRun run_named(const Scenario& s, const std::string& name) {
  auto r = run_policy(s, policy_named(s, name), s.seed);
  EXPECT_TRUE(r.ok()) << r.error();
  return r.ok() ? std::move(*r) : PolicyRun{};
}

// Each request's fate: (first token, finish, rejected, queue wait, endpoint).
std::vector<std::tuple<Nanos, Nanos, bool, Nanos, uint32_t>> fates(const PolicyRun& r) {
  std::vector<std::tuple<Nanos, Nanos, bool, Nanos, uint32_t>> out;
  for (const RequestRecord& q : r.requests) {
    out.emplace_back(q.first_token, q.finish, q.rejected, q.queue_wait, q.endpoint);
  }
  return out;
}

TEST(FlowReplicasSim, EveryRequestIsServedOrRefusedBehindFourReplicas) {
  const Scenario s = noisy();
  for (const char* name : {"four sync off", "four own counters", "four fleet", "four fleet no lag",
                           "four fleet no share", "four fleet demand"}) {
    const PolicyRun r = run_named(s, name);
    ASSERT_GT(r.requests.size(), 100u) << name;
    size_t served = 0, queued = 0;
    std::array<size_t, 2> served_by_tenant{};
    for (const RequestRecord& q : r.requests) {
      // Nothing is left hanging: each request finished or was refused.
      EXPECT_TRUE(q.rejected || q.finish >= 0) << name;
      if (q.finish >= 0) {
        ++served;
        if (q.tenant < 2) ++served_by_tenant[q.tenant];
      }
      if (q.queue_wait >= 0) ++queued;
    }
    EXPECT_GT(served, r.requests.size() / 2) << name;
    EXPECT_GT(served_by_tenant[1], 0u) << name;  // B is served
    EXPECT_GT(queued, 0u) << name;               // the queues were used
  }
}

TEST(FlowReplicasSim, OneReplicaIsTheSingleGatewayCallForCall) {
  const Scenario s = noisy();
  EXPECT_EQ(fates(run_named(s, "single")), fates(run_named(s, "one replica")));
}

TEST(FlowReplicasSim, RoomSharingChangesNothingForOneReplicaOrWithoutSync) {
  const Scenario s = noisy();
  EXPECT_EQ(fates(run_named(s, "single")), fates(run_named(s, "one replica demand")));
  EXPECT_EQ(fates(run_named(s, "four sync off")), fates(run_named(s, "four sync off no share")));
}

TEST(FlowReplicasSim, SharingTheRoomKeepsTheEnginesQueuesShort) {
  // With the room shared, the replicas release about what the engines take, so a request
  // that left a gateway queue waits less in an engine's queue than when each replica
  // takes the whole room it sees. Measured as the mean time from leaving the queue to the
  // first token, over the requests that queued.
  const Scenario s = noisy();
  auto engine_side = [&](const char* name) {
    double sum = 0;
    size_t n = 0;
    for (const RequestRecord& q : run_named(s, name).requests) {
      if (q.rejected || q.first_token < 0 || q.queue_wait < 0) continue;
      sum += to_seconds(q.first_token - q.arrival - q.queue_wait);
      ++n;
    }
    return n > 0 ? sum / static_cast<double>(n) : 0.0;
  };
  const double shared = engine_side("four fleet"), whole = engine_side("four fleet no share");
  EXPECT_GT(whole, 0);
  EXPECT_LE(shared, whole) << "room shared " << shared << " s, whole room " << whole << " s";
}

TEST(FlowReplicasSim, SameSeedSameRun) {
  const Scenario s = noisy();
  for (const char* name : {"four sync off", "four fleet", "four fleet demand"}) {
    EXPECT_EQ(fates(run_named(s, name)), fates(run_named(s, name))) << name;
  }
}

}  // namespace flow_replicas_sim_test
}  // namespace kvgate::sim
