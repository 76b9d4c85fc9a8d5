// Fleet fairness: service reports round-trip through their wire form and reject bad
// input; a replica's queue orders tenants by its own plus its peers' service, never
// counts its own twice, keeps what dead peers added, and falls back to its own service
// when the sync is lost.
#include "core/cluster/fleet_fairness.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kvgate::cluster {
namespace fleet_fairness_test {

using route::Criticality;
using route::FlowQueue;
using route::FlowQueueConfig;

FlowQueueConfig queue_config() {
  FlowQueueConfig c;
  c.enabled = true;
  c.max_wait.fill(0);
  c.input_weight = 1;
  c.output_weight = 1;
  return c;
}

// Queues `n` requests of `tenant` (100 prompt + 100 output tokens: cost 200 each).
void push(FlowQueue& q, std::string_view tenant, int n, route::RequestId& next) {
  std::vector<FlowQueue::Removed> evicted;
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(q.enqueue({.id = next++,
                         .tenant = tenant,
                         .band = Criticality::kStandard,
                         .prompt_tokens = 100,
                         .expected_output_tokens = 100},
                        0, evicted),
              route::FlowRefusal::kNone);
  }
}

const route::FlowTenantStats* stats_of(const std::vector<route::FlowTenantStats>& all,
                                       std::string_view tenant) {
  for (const auto& t : all) {
    if (t.name == tenant) return &t;
  }
  return nullptr;
}

double counter_of(const FlowQueue& q, std::string_view tenant) {
  const auto all = q.tenants();
  const route::FlowTenantStats* t = stats_of(all, tenant);
  return t ? t->counter : -1;
}

double peer_service_of(const FlowQueue& q, std::string_view tenant) {
  const auto all = q.tenants();
  const route::FlowTenantStats* t = stats_of(all, tenant);
  return t ? t->peer_service : -1;
}

TEST(ServiceReport, RoundTripsThroughItsWireForm) {
  ServiceReport r{.replica = "gw-1", .pool = "chat", .seq = 300};
  r.tenants.push_back({"acme", 1234.5});
  r.tenants.push_back({"", -12.25});  // a downward correction; anonymous traffic
  const std::string wire = encode(r);
  EXPECT_LT(wire.size(), 64u);
  Result<ServiceReport> back = decode_service_report(wire);
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(*back, r);
  ServiceReport empty{.replica = "gw-2", .pool = "chat", .seq = 1};
  Result<ServiceReport> e = decode_service_report(encode(empty));
  ASSERT_TRUE(e) << e.error();
  EXPECT_EQ(*e, empty);
}

TEST(ServiceReport, DecodeRejectsEveryTruncationAndBadInput) {
  ServiceReport r{.replica = "gw-1", .pool = "chat", .seq = 2};
  r.tenants.push_back({"a", 200});
  r.tenants.push_back({"b", 400});
  const std::string wire = encode(r);
  for (size_t n = 0; n < wire.size(); ++n) {
    EXPECT_FALSE(decode_service_report(std::string_view(wire).substr(0, n))) << n;
  }
  EXPECT_FALSE(decode_service_report(wire + "x"));  // trailing bytes
  std::string bad_version = wire;
  bad_version[0] = 9;
  EXPECT_FALSE(decode_service_report(bad_version));
  ServiceReport nan = r;
  nan.tenants[1].service = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(decode_service_report(encode(nan)));
  ServiceReport inf = r;
  inf.tenants[0].service = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(decode_service_report(encode(inf)));
}

TEST(FleetFairness, ReportsTheServiceGivenHereSinceTheLastReport) {
  FlowQueue q(queue_config());
  route::RequestId next = 1;
  FleetFairness fair(q, "gw-1", "chat", {});
  EXPECT_FALSE(fair.take().has_value());  // nothing served yet
  push(q, "a", 2, next);
  push(q, "b", 1, next);
  ASSERT_TRUE(q.pop(0));
  ASSERT_TRUE(q.pop(0));
  q.charge("c", 2, 50, 50, 0);  // served at once, weight 2: 50
  std::optional<ServiceReport> r = fair.take();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->replica, "gw-1");
  EXPECT_EQ(r->pool, "chat");
  EXPECT_EQ(r->seq, 1u);
  std::map<std::string, double> got;
  for (const TenantService& t : r->tenants) got[t.tenant] += t.service;
  EXPECT_EQ(got, (std::map<std::string, double>{{"a", 200}, {"b", 200}, {"c", 50}}));
  EXPECT_FALSE(fair.take().has_value());  // reported once
  // The actual output was 40 where 100 were charged: -60 reported.
  q.correct_output("a", 100, 40);
  r = fair.take();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->seq, 2u);
  ASSERT_EQ(r->tenants.size(), 1u);
  EXPECT_EQ(r->tenants[0], (TenantService{"a", -60}));
  // A heartbeat is an empty report.
  r = fair.take(/*heartbeat=*/true);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->tenants.empty());
  EXPECT_EQ(r->seq, 3u);
  EXPECT_EQ(fair.stats().reports_published, 3u);
}

TEST(FleetFairness, LiftsAreNotServiceAndNotReported) {
  FlowQueue q(queue_config());
  route::RequestId next = 1;
  FleetFairness fair(q, "gw-1", "chat", {});
  push(q, "a", 3, next);
  ASSERT_TRUE(q.pop(0));
  ASSERT_TRUE(q.pop(0));
  (void)fair.take();
  // b comes back from idle: lifted to a's counter (400), which is no service.
  push(q, "b", 1, next);
  EXPECT_EQ(counter_of(q, "b"), 400);
  EXPECT_FALSE(fair.take().has_value());
}

TEST(FleetFairness, APeersServiceOrdersThisReplicasQueue) {
  // Replica 1 served `spread` three times; replica 2 hears of it. On replica 2, `quiet`
  // is backlogged first, `spread` comes after: by its own counters alone replica 2 would
  // alternate them; by the fleet's, quiet goes first until it has caught up.
  FlowQueue q1(queue_config()), q2(queue_config());
  route::RequestId next = 1;
  FleetFairness f1(q1, "gw-1", "chat", {}), f2(q2, "gw-2", "chat", {});
  push(q1, "spread", 3, next);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(q1.pop(0));
  std::optional<ServiceReport> r = f1.take();
  ASSERT_TRUE(r);
  f2.apply(*r, kSecond);
  EXPECT_EQ(peer_service_of(q2, "spread"), 600);
  EXPECT_EQ(f2.peer_service("gw-1", "spread"), 600);
  EXPECT_TRUE(f2.fleet(kSecond));
  push(q2, "quiet", 3, next);
  push(q2, "spread", 3, next);
  std::vector<std::string> order;
  while (auto x = q2.pop(0)) order.emplace_back(x->tenant);
  EXPECT_EQ(order,
            (std::vector<std::string>{"quiet", "quiet", "quiet", "spread", "spread", "spread"}));
}

TEST(FleetFairness, OwnReportsAreNotCountedTwice) {
  FlowQueue q(queue_config());
  route::RequestId next = 1;
  FleetFairness fair(q, "gw-1", "chat", {});
  push(q, "a", 1, next);
  ASSERT_TRUE(q.pop(0));
  const double before = counter_of(q, "a");
  std::optional<ServiceReport> r = fair.take();
  ASSERT_TRUE(r);
  fair.apply(*r, 0);  // read back from the shared stream
  EXPECT_EQ(counter_of(q, "a"), before);
  EXPECT_EQ(peer_service_of(q, "a"), 0);
  EXPECT_EQ(fair.stats().reports_applied, 0u);
  EXPECT_EQ(fair.live_peers(0), 0u);
  // And what peers added is never reported on.
  ServiceReport peer{.replica = "gw-2", .pool = "chat", .seq = 1};
  peer.tenants.push_back({"a", 500});
  fair.apply(peer, 0);
  EXPECT_EQ(counter_of(q, "a"), before + 500);
  EXPECT_FALSE(fair.take().has_value());
}

TEST(FleetFairness, ATenantThatSpreadsOverTwoReplicasGetsOneShareNotTwo) {
  // `spread` is backlogged on both replicas, `single` on replica 1 only. Each round both
  // replicas dispatch one request, then exchange their reports (no lag).
  for (const bool shared : {false, true}) {
    FlowQueue q1(queue_config()), q2(queue_config());
    route::RequestId next = 1;
    FleetFairness f1(q1, "gw-1", "chat", {}), f2(q2, "gw-2", "chat", {});
    constexpr int kRounds = 100;
    push(q1, "spread", kRounds, next);
    push(q1, "single", kRounds, next);
    push(q2, "spread", kRounds, next);
    int single = 0;
    for (int i = 0; i < kRounds; ++i) {
      std::optional<FlowQueue::Removed> a = q1.pop(0);
      ASSERT_TRUE(a);
      single += a->tenant == "single";
      ASSERT_TRUE(q2.pop(0));
      std::optional<ServiceReport> r1 = f1.take(), r2 = f2.take();
      if (!shared) continue;
      if (r2) f1.apply(*r2, 0);
      if (r1) f2.apply(*r1, 0);
    }
    if (shared) {
      // spread gets replica 2's dispatches, and replica 1 gives nearly all of its own to
      // single: the fleet's service is about even (max-min fair).
      EXPECT_GE(single, kRounds - 2);
    } else {
      // Each replica fair on its own: spread gets three quarters of the fleet's service.
      EXPECT_GE(single, kRounds / 2 - 1);
      EXPECT_LE(single, kRounds / 2 + 1);
    }
  }
}

TEST(FleetFairness, GapsAreCountedAndSilentPeersForgottenWithTheirServiceKept) {
  FlowQueue q(queue_config());
  FleetFairness fair(q, "gw-1", "chat", {.peer_timeout = 10 * kSecond});
  ServiceReport r{.replica = "gw-2", .pool = "chat", .seq = 1};
  r.tenants.push_back({"a", 100});
  fair.apply(r, 0);
  r.seq = 4;  // 2 and 3 were lost
  fair.apply(r, kSecond);
  EXPECT_EQ(fair.stats().gaps, 2u);
  EXPECT_EQ(fair.stats().reports_applied, 2u);
  EXPECT_EQ(fair.stats().tenants_applied, 2u);
  EXPECT_EQ(fair.live_peers(kSecond), 1u);
  EXPECT_TRUE(fair.fleet(kSecond));
  EXPECT_EQ(peer_service_of(q, "a"), 200);
  fair.expire(5 * kSecond);
  EXPECT_EQ(fair.live_peers(5 * kSecond), 1u);
  fair.expire(11 * kSecond);
  EXPECT_EQ(fair.stats().dead_peers, 1u);
  EXPECT_EQ(fair.live_peers(11 * kSecond), 0u);
  EXPECT_FALSE(fair.fleet(11 * kSecond));
  EXPECT_EQ(fair.peer_service("gw-2", "a"), 0);
  // The service it gave stays in the counter.
  EXPECT_EQ(peer_service_of(q, "a"), 200);
  // A peer that restarts (its sequence starts over) counts as before.
  r.seq = 1;
  fair.apply(r, 12 * kSecond);
  EXPECT_EQ(peer_service_of(q, "a"), 300);
}

TEST(FleetFairness, LosingTheSyncFallsBackToOwnServiceCountedOnce) {
  FlowQueue q(queue_config());
  route::RequestId next = 1;
  FleetFairness fair(q, "gw-1", "chat", {});
  ServiceReport r{.replica = "gw-2", .pool = "chat", .seq = 1};
  r.tenants.push_back({"a", 100});
  fair.apply(r, 0);
  EXPECT_TRUE(fair.fleet(0));
  fair.fall_back();
  fair.fall_back();  // still the same outage
  EXPECT_TRUE(fair.fallen_back());
  EXPECT_FALSE(fair.fleet(0));
  EXPECT_EQ(fair.stats().fallbacks, 1u);
  // Meanwhile the order goes on with this replica's own service.
  push(q, "a", 1, next);
  ASSERT_TRUE(q.pop(0));
  EXPECT_EQ(counter_of(q, "a"), 300);
  // The sync is back: the next report ends the fallback.
  r.seq = 2;
  fair.apply(r, kSecond);
  EXPECT_FALSE(fair.fallen_back());
  EXPECT_TRUE(fair.fleet(kSecond));
  EXPECT_EQ(counter_of(q, "a"), 400);
  fair.fall_back();
  EXPECT_EQ(fair.stats().fallbacks, 2u);
}

TEST(FleetFairness, WithoutTrackingAQueueNotesNoService) {
  // One replica (no FleetFairness): the queue keeps nothing for reports.
  FlowQueue q(queue_config());
  route::RequestId next = 1;
  push(q, "a", 1, next);
  ASSERT_TRUE(q.pop(0));
  std::vector<std::pair<std::string_view, double>> out;
  q.take_service(out);
  EXPECT_TRUE(out.empty());
}

}  // namespace fleet_fairness_test
}  // namespace kvgate::cluster
