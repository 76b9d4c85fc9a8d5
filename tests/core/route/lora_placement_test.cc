// LoRA placement: each rule of a planning round (plan_lora), then the bookkeeping between
// rounds (LoraPlacement): loads in flight, results fed back, back-off, last uses.
#include "core/route/lora_placement.h"

#include <gtest/gtest.h>

#include <ostream>

namespace kvgate::route {

// Readable failures (found by argument-dependent lookup).
void PrintTo(const LoraAction& a, std::ostream* os) {
  *os << to_string(a.kind) << "{" << a.endpoint << ", " << a.adapter << "}";
}

// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace lora_placement_test {

using Held = LoraEndpointState::Held;
using Actions = std::vector<LoraAction>;
using Demand = std::vector<AdapterDemand>;

constexpr Nanos kNow = 1000 * kSecond;

LoraAction load(EndpointId e, std::string adapter) {
  return {.kind = LoraAction::Kind::kLoad, .endpoint = e, .adapter = std::move(adapter)};
}
LoraAction unload(EndpointId e, std::string adapter) {
  return {.kind = LoraAction::Kind::kUnload, .endpoint = e, .adapter = std::move(adapter)};
}

LoraEndpointState endpoint(EndpointId id, uint32_t slots, double load_now,
                           std::vector<Held> loaded = {}) {
  LoraEndpointState e;
  e.id = id;
  e.slots = slots;
  e.load = load_now;
  e.loaded = std::move(loaded);
  return e;
}

Held held(std::string adapter, Nanos ago, bool active = false) {
  return {.adapter = std::move(adapter), .last_used = kNow - ago, .active = active};
}

AdapterDemand demand(std::string name, double rate, uint32_t max_replicas = 1,
                     uint32_t waiting = 0) {
  return {.name = std::move(name), .rate = rate, .waiting = waiting, .max_replicas = max_replicas};
}

LoraPlacementConfig config() {
  LoraPlacementConfig c;
  c.enabled = true;
  c.interval = kSecond;
  c.idle_unload = 60 * kSecond;
  c.replica_demand = 4;
  c.load_backoff = 30 * kSecond;
  return c;
}

Actions plan(const std::vector<LoraEndpointState>& endpoints,
             const std::vector<AdapterDemand>& demand, const LoraPlacementConfig& c = config()) {
  return plan_lora(c, endpoints, demand, kNow);
}

TEST(LoraPlacementConfigTest, DefaultsAreValidAndBadValuesAreNamed) {
  EXPECT_TRUE(LoraPlacementConfig{}.validate().ok());
  LoraPlacementConfig c;
  c.replica_demand = 0;
  ASSERT_FALSE(c.validate().ok());
  EXPECT_NE(c.validate().error().find("replica_demand"), std::string::npos);
  c = {};
  c.interval = 0;
  EXPECT_FALSE(c.validate().ok());
}

// Rule 2: an adapter with demand that is loaded nowhere goes to the least loaded endpoint
// with a free slot; nothing happens for an adapter without demand.
TEST(LoraPlacementTest, AnAdapterLoadedNowhereGoesToTheLeastLoadedEndpointWithAFreeSlot) {
  const std::vector<LoraEndpointState> eps = {endpoint(0, 2, 5), endpoint(1, 2, 1),
                                              endpoint(2, 1, 0, {held("chat", 0)})};
  EXPECT_EQ(plan(eps, {demand("sql", 0.5)}), Actions{load(1, "sql")});  // 2 is full
  EXPECT_EQ(plan(eps, {demand("sql", 0)}), Actions{});
  // A request waiting for it is demand too.
  EXPECT_EQ(plan(eps, {demand("sql", 0, 1, /*waiting=*/1)}), Actions{load(1, "sql")});
  // Two adapters loaded nowhere: two endpoints, the most waited for first.
  EXPECT_EQ(plan(eps, {demand("a", 1), demand("b", 0.1, 1, 3)}),
            (Actions{load(1, "b"), load(0, "a")}));
}

// Rule 2, no free slot: the endpoint whose least recently used adapter is idle (the oldest
// such) unloads it first; the load follows once the slot is free.
TEST(LoraPlacementTest, WithoutAFreeSlotTheIdleLeastRecentlyUsedAdapterIsUnloadedFirst) {
  std::vector<LoraEndpointState> eps = {endpoint(0, 1, 0, {held("old", 100 * kSecond)}),
                                        endpoint(1, 1, 0, {held("recent", 10 * kSecond)}),
                                        endpoint(2, 1, 0, {held("busy", 500 * kSecond, true)})};
  LoraPlacementConfig c = config();
  c.idle_unload = 1000 * kSecond;  // rule 1 stays out of it
  EXPECT_EQ(plan(eps, {demand("sql", 1)}, c), Actions{unload(0, "old")});
  // The next round, once "old" is gone: the load.
  eps[0].loaded.clear();
  EXPECT_EQ(plan(eps, {demand("sql", 1)}, c), Actions{load(0, "sql")});
  // An adapter in use is never evicted, nor the last replica of one with demand.
  eps[0].loaded = {held("old", 100 * kSecond)};
  EXPECT_EQ(plan(eps, {demand("sql", 1), demand("old", 0.5)}, c), Actions{unload(1, "recent")});
  // Used within the last interval: not idle.
  eps[1].loaded = {held("recent", kSecond / 2)};
  EXPECT_EQ(plan(eps, {demand("sql", 1), demand("old", 0.5)}, c), Actions{});
}

// Rule 3: demand per replica above replica_demand adds one replica at a time, up to the
// adapter's max_replicas.
TEST(LoraPlacementTest, AHotAdapterGetsAnotherReplicaUpToMaxReplicas) {
  std::vector<LoraEndpointState> eps = {endpoint(0, 2, 9, {held("sql", 0)}), endpoint(1, 2, 3),
                                        endpoint(2, 2, 1)};
  EXPECT_EQ(plan(eps, {demand("sql", 3, 2)}), Actions{});                 // 3/s on one: enough
  EXPECT_EQ(plan(eps, {demand("sql", 10, 2)}), Actions{load(2, "sql")});  // 10/s > 4/s
  EXPECT_EQ(plan(eps, {demand("sql", 10, 1)}), Actions{});                // max_replicas 1
  eps[2].loaded = {held("sql", 0)};
  EXPECT_EQ(plan(eps, {demand("sql", 10, 2)}), Actions{});                // at max_replicas
  EXPECT_EQ(plan(eps, {demand("sql", 10, 3)}), Actions{load(1, "sql")});  // 5/s each > 4/s
  EXPECT_EQ(plan(eps, {demand("sql", 8, 3)}), Actions{});                 // 4/s each: not above
  // One at a time: none while a load of it is in flight.
  eps[2].loaded.clear();
  eps[2].busy = true;
  eps[2].loading = "sql";
  EXPECT_EQ(plan(eps, {demand("sql", 100, 3)}), Actions{});
}

// Rule 1: an adapter unused on an endpoint for idle_unload is unloaded there, unless it is
// in use or the last replica of an adapter that has demand.
TEST(LoraPlacementTest, AnAdapterIdleLongerThanIdleUnloadIsUnloaded) {
  std::vector<LoraEndpointState> eps = {
      endpoint(0, 2, 0, {held("sql", 61 * kSecond), held("chat", 10 * kSecond)})};
  EXPECT_EQ(plan(eps, {}), Actions{unload(0, "sql")});
  eps[0].loaded[0].active = true;  // requests of it running there
  EXPECT_EQ(plan(eps, {}), Actions{});
  eps[0].loaded[0].active = false;
  EXPECT_EQ(plan(eps, {demand("sql", 0.1)}), Actions{});  // its last replica
  eps.push_back(endpoint(1, 2, 0, {held("sql", 70 * kSecond)}));
  // Two idle replicas of an adapter with demand: one goes, one stays.
  EXPECT_EQ(plan(eps, {demand("sql", 0.1)}), Actions{unload(0, "sql")});
  EXPECT_EQ(plan(eps, {}), (Actions{unload(0, "sql"), unload(1, "sql")}));
}

// Rule 4: one action per endpoint (none where one is in flight), none on endpoints out of
// routing, and an endpoint backing off from an adapter is not chosen for it.
TEST(LoraPlacementTest, BusyUnroutableAndBackingOffEndpointsAreSkipped) {
  std::vector<LoraEndpointState> eps = {endpoint(0, 2, 0), endpoint(1, 2, 1), endpoint(2, 2, 2),
                                        endpoint(3, 2, 3)};
  eps[0].busy = true;
  eps[1].routable = false;
  eps[2].backoff = {"sql"};
  EXPECT_EQ(plan(eps, {demand("sql", 1)}), Actions{load(3, "sql")});
  EXPECT_EQ(plan(eps, {demand("chat", 1)}), Actions{load(2, "chat")});
  // Two adapters and one endpoint for both: one load there this round.
  eps[2].backoff = {"sql", "x"};
  EXPECT_EQ(plan(eps, {demand("sql", 1), demand("x", 1)}), Actions{load(3, "sql")});
}

// The bookkeeping: a load is in flight until its result (no second load of it, nothing
// else on that endpoint); success makes it loaded there, failure backs off from that
// endpoint and the adapter goes elsewhere; the back-off ends.
TEST(LoraPlacementTest, ResultsFeedBackLoadedOrBackOff) {
  LoraPlacement p(config());
  const std::vector<LoraEndpointView> eps = {{.id = 0, .load = 0, .activity = {.max_loras = 1}},
                                             {.id = 1, .load = 1, .activity = {.max_loras = 1}}};
  const std::vector<AdapterDemand> want = {demand("sql", 10, 2)};
  Nanos t = kNow;
  Actions first = p.plan(eps, want, t);
  ASSERT_EQ(first, Actions{load(0, "sql")});
  EXPECT_EQ(p.placed(0).loading, std::vector<std::string>{"sql"});
  EXPECT_FALSE(p.loaded_anywhere("sql"));
  EXPECT_EQ(p.in_flight(), 1u);
  EXPECT_EQ(p.plan(eps, want, t += kSecond), Actions{});  // one replica at a time
  p.on_done(first[0], /*ok=*/false, t);
  EXPECT_TRUE(p.placed(0).loading.empty());
  Actions second = p.plan(eps, want, t += kSecond);
  ASSERT_EQ(second, Actions{load(1, "sql")});  // 0 backs off
  p.on_done(second[0], /*ok=*/true, t);
  EXPECT_EQ(p.placed(1).loaded, std::vector<std::string>{"sql"});
  EXPECT_TRUE(p.loaded_anywhere("sql"));
  EXPECT_EQ(p.plan(eps, want, t += kSecond), Actions{});  // the hot adapter: 0 backs off
  t += 30 * kSecond;                                      // the back-off is over
  EXPECT_EQ(p.plan(eps, want, t), Actions{load(0, "sql")});
  // A result for an action not in flight is ignored.
  p.on_done(load(1, "other"), true, t);
  EXPECT_EQ(p.placed(1).loaded, std::vector<std::string>{"sql"});
}

// What the scrape shows in use is loaded there (whoever loaded it); an unload in flight
// takes the adapter out of the router's view at once; an endpoint that left is
// forgotten.
TEST(LoraPlacementTest, TheScrapeTheUnloadsAndEndpointsThatLeave) {
  LoraPlacement p(config());
  std::vector<LoraEndpointView> eps = {
      {.id = 0, .activity = {.max_loras = 1, .running = {"chat"}}}};
  Nanos t = kNow;
  EXPECT_EQ(p.plan(eps, Demand{demand("sql", 1)}, t), Actions{});  // chat is in use: no room
  EXPECT_EQ(p.placed(0).loaded, std::vector<std::string>{"chat"});
  eps[0].activity.running.clear();
  t += 2 * kSecond;  // chat idle for an interval: evicted for sql
  Actions a = p.plan(eps, Demand{demand("sql", 1)}, t);
  ASSERT_EQ(a, Actions{unload(0, "chat")});
  EXPECT_TRUE(p.placed(0).loaded.empty());
  p.on_done(a[0], true, t);
  EXPECT_EQ(p.plan(eps, Demand{demand("sql", 1)}, t), Actions{load(0, "sql")});
  EXPECT_EQ(p.plan({}, Demand{demand("sql", 1)}, t), Actions{});
  EXPECT_EQ(p.in_flight(), 0u);
  EXPECT_TRUE(p.placed(0).loaded.empty());
}

// A request routed to the adapter's endpoint is a use: it keeps the adapter from the idle
// unload.
TEST(LoraPlacementTest, RoutedRequestsKeepAnAdapterLoaded) {
  LoraPlacement p(config());
  const std::vector<LoraEndpointView> eps = {{.id = 0, .activity = {.max_loras = 2}}};
  Nanos t0 = kNow;
  Actions a = p.plan(eps, Demand{demand("sql", 1)}, t0);
  ASSERT_EQ(a, Actions{load(0, "sql")});
  p.on_done(a[0], true, t0);
  p.on_routed(0, "sql", t0 + 50 * kSecond);
  EXPECT_EQ(p.plan(eps, {}, t0 + 70 * kSecond), Actions{});
  EXPECT_EQ(p.plan(eps, {}, t0 + 111 * kSecond), Actions{unload(0, "sql")});
}

}  // namespace lora_placement_test
}  // namespace kvgate::route
