// Session affinity: the bounded table (binding, rebinding, LRU eviction, idle TTL), the
// load bound, the router's rule (a session stays on its endpoint while that is a
// candidate within the bound; else the policy decides and the session is rebound), and
// the bindings' trip between replicas (their own wire form beside the routing batch,
// applied by PeerSync).
#include "core/route/session_affinity.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/cluster/peer_sync.h"
#include "core/cluster/routing_event.h"
#include "core/route/router.h"

namespace kvgate::route {
// Named after the file (unity batches, docs/development.md).
namespace session_affinity_test {

TEST(SessionKey, IsStableNonzeroAndPerModel) {
  EXPECT_EQ(session_key("conv-1", "m"), session_key("conv-1", "m"));
  EXPECT_NE(session_key("conv-1", "m"), session_key("conv-2", "m"));
  EXPECT_NE(session_key("conv-1", "m"), session_key("conv-1", "n"));
  EXPECT_NE(session_key("ab", "c"), session_key("b", "ca"));
  EXPECT_NE(session_key("", ""), 0u);
  EXPECT_NE(session_key(uint64_t{0}), 0u);
  EXPECT_NE(session_key(uint64_t{1}), session_key(uint64_t{2}));
}

TEST(KeepsSession, LeavesOnlyWhenBothBoundsAreExceeded) {
  SessionAffinityConfig c;  // 8 requests more and 1.5 times the least
  EXPECT_TRUE(keeps_session(0, 0, c));
  EXPECT_TRUE(keeps_session(8, 0, c));    // not more than 8 above
  EXPECT_FALSE(keeps_session(9, 0, c));   // 9 above, and 9 > 0 x 1.5
  EXPECT_TRUE(keeps_session(30, 20, c));  // 10 above, but only 1.5 x
  EXPECT_FALSE(keeps_session(31, 20, c));
  c.max_extra_requests = 1e9;  // never leaves for load
  EXPECT_TRUE(keeps_session(1000, 0, c));
}

TEST(SessionAffinity, BindsFindsAndRebinds) {
  SessionAffinity t(16, 0);
  EXPECT_EQ(t.find(7, 0), std::nullopt);
  t.bind(7, 3, 1);
  EXPECT_EQ(t.find(7, 2), std::optional<EndpointId>(3));
  t.bind(7, 3, 3);  // the same binding refreshed
  t.bind(7, 5, 4);  // moved
  EXPECT_EQ(t.find(7, 5), std::optional<EndpointId>(5));
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(t.stats().bound, 1u);
  EXPECT_EQ(t.stats().rebound, 1u);
}

TEST(SessionAffinity, TheLeastRecentlyUsedGoesWhenFull) {
  SessionAffinity t(2, 0);
  t.bind(1, 1, 0);
  t.bind(2, 2, 1);
  t.bind(1, 1, 2);  // 1 used again: 2 is now the least recently used
  t.bind(3, 3, 3);
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(t.find(2, 4), std::nullopt);
  EXPECT_EQ(t.find(1, 4), std::optional<EndpointId>(1));
  EXPECT_EQ(t.find(3, 4), std::optional<EndpointId>(3));
  EXPECT_EQ(t.stats().evicted, 1u);
  // Slots are reused: many sessions through a small table stay within its capacity.
  for (uint64_t s = 10; s < 1000; ++s) t.bind(s, 0, static_cast<Nanos>(s));
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(t.find(999, 1000), std::optional<EndpointId>(0));
  EXPECT_EQ(t.find(998, 1000), std::optional<EndpointId>(0));
}

TEST(SessionAffinity, AnIdleBindingExpires) {
  SessionAffinity t(16, 10 * kSecond);
  t.bind(1, 4, 0);
  t.bind(2, 5, 5 * kSecond);
  EXPECT_EQ(t.find(1, 10 * kSecond), std::optional<EndpointId>(4));  // exactly the TTL
  EXPECT_EQ(t.find(1, 10 * kSecond + 1), std::nullopt);
  EXPECT_EQ(t.stats().expired, 0u);  // find changes nothing
  EXPECT_EQ(t.find(2, 10 * kSecond + 1), std::optional<EndpointId>(5));
  // A use refreshes it; find alone does not.
  t.bind(2, 5, 14 * kSecond);
  EXPECT_EQ(t.find(2, 24 * kSecond), std::optional<EndpointId>(5));
  EXPECT_EQ(t.find(2, 24 * kSecond + 1), std::nullopt);
  // Idle bindings at the cold end are dropped as new ones come.
  t.bind(3, 1, 0);
  t.bind(4, 1, 100 * kSecond);
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(t.stats().expired, 3u);
}

TEST(SessionAffinity, ForgettingAnEndpointDropsItsSessions) {
  SessionAffinity t(16, 0);
  for (uint64_t s = 1; s <= 6; ++s) t.bind(s, static_cast<EndpointId>(s % 2), 0);
  t.forget_endpoint(1);
  EXPECT_EQ(t.size(), 3u);
  for (uint64_t s = 1; s <= 6; ++s) {
    if (s % 2 == 1) {
      EXPECT_EQ(t.find(s, 0), std::nullopt) << s;
    } else {
      EXPECT_EQ(t.find(s, 0), std::optional<EndpointId>(0)) << s;
    }
  }
}

TEST(SessionAffinity, IsDeterministic) {
  auto run = [] {
    SessionAffinity t(64, 50);
    std::vector<int64_t> out;
    uint64_t x = 12345;
    for (int i = 0; i < 2000; ++i) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      const uint64_t s = (x >> 33) % 200;
      const Nanos now = i;
      if ((x >> 20) % 3 == 0) {
        const auto e = t.find(s, now);
        out.push_back(e ? static_cast<int64_t>(*e) : -1);
      } else {
        t.bind(s, static_cast<EndpointId>((x >> 40) % 8), now);
      }
    }
    out.push_back(static_cast<int64_t>(t.size()));
    return out;
  };
  EXPECT_EQ(run(), run());
}

constexpr uint32_t kBs = 16;

// A router of two endpoints with session affinity on (least-request: the policy alone
// would follow the load). Nothing is scraped, so an endpoint's load, for the policy and
// for the session rule alike, is the router's count of requests in flight there.
class RouterSessionTest : public ::testing::Test {
 protected:
  kv::ApproxIndex approx_{{}};
  RouterConfig config_;
  std::unique_ptr<Router> router_;
  Rng rng_{3};
  RequestId next_id_ = 1;
  RequestId next_load_id_ = 1'000'000;
  std::map<EndpointId, std::vector<RequestId>> load_;
  EndpointId a_ = 0, b_ = 0;

  void SetUp() override {
    config_.block_size = kBs;
    config_.policy = {"least-request", {}};
    config_.session_affinity.enabled = true;
    build();
  }
  void build() {
    auto r = Router::create(config_, {.approx = &approx_});
    ASSERT_TRUE(r.ok()) << r.error();
    router_ = std::move(*r);
    auto a = router_->add_endpoint({.url = "A"}, 0);
    auto b = router_->add_endpoint({.url = "B"}, 0);
    ASSERT_TRUE(a.ok() && b.ok());
    a_ = *a;
    b_ = *b;
    load_.clear();
  }
  RouteRequest request(uint64_t session) {
    RouteRequest r;
    r.id = next_id_++;
    r.prompt_tokens = 4 * kBs;
    r.session = session;
    return r;
  }
  // `n` more requests in flight on `ep` (other clients').
  void add_load(EndpointId ep, int n) {
    for (int i = 0; i < n; ++i) {
      const RequestId id = next_load_id_++;
      ASSERT_TRUE(router_->pool().on_routed(id, {.endpoint = ep, .prompt_tokens = kBs}, 0).ok());
      load_[ep].push_back(id);
    }
  }
  void clear_load(EndpointId ep) {
    for (RequestId id : load_[ep]) (void)router_->pool().on_finished(id, 0);
    load_[ep].clear();
  }
  Decision route(uint64_t session, Nanos now = 0) {
    const RouteRequest r = request(session);
    Decision d = router_->route(r, now, rng_);
    EXPECT_TRUE(d.accepted()) << to_string(d.reason);
    return d;
  }
  EndpointId other(EndpointId e) const { return e == a_ ? b_ : a_; }
};

TEST_F(RouterSessionTest, ASessionStaysOnItsEndpointWithinTheLoadBound) {
  const uint64_t s = session_key("conv", "m");
  const Decision first = route(s);
  EXPECT_FALSE(first.session_kept());  // nothing bound yet: the policy chose
  EXPECT_EQ(first.session, SessionOutcome::kNew);
  const EndpointId home = first.endpoint;
  // Busier than the other endpoint (5, 6, 7 requests against none), within 8 more: the
  // session stays where least-request would not go.
  add_load(home, 4);
  for (int i = 0; i < 3; ++i) {
    const Decision d = route(s);
    EXPECT_EQ(d.endpoint, home);
    EXPECT_TRUE(d.session_kept());
  }
  // A request without a session follows the policy (least loaded).
  const RouteRequest plain = request(0);
  const Decision d = router_->decide(plain, 0, rng_);
  EXPECT_EQ(d.endpoint, other(home));
  EXPECT_FALSE(d.session_kept());
  EXPECT_EQ(d.session, SessionOutcome::kNone);
  ASSERT_NE(router_->sessions(), nullptr);
  EXPECT_EQ(router_->sessions()->size(), 1u);
}

TEST_F(RouterSessionTest, BeyondTheLoadBoundThePolicyDecidesAndTheSessionMoves) {
  const uint64_t s = session_key("conv", "m");
  const EndpointId home = route(s).endpoint;
  add_load(home, 20);  // 21 against none: more than 8 above and more than 1.5 x
  const Decision moved = route(s);
  EXPECT_EQ(moved.endpoint, other(home));
  EXPECT_FALSE(moved.session_kept());
  EXPECT_EQ(moved.session, SessionOutcome::kMovedLoad);
  // Rebound: it stays on the new endpoint, also once that is the busier one.
  clear_load(home);
  add_load(other(home), 3);
  const Decision next = route(s);
  EXPECT_EQ(next.endpoint, other(home));
  EXPECT_TRUE(next.session_kept());
  EXPECT_EQ(router_->sessions()->stats().rebound, 1u);
}

TEST_F(RouterSessionTest, AnUnhealthyEndpointLosesItsSessions) {
  const uint64_t s = session_key("conv", "m");
  const EndpointId home = route(s).endpoint;
  router_->pool().set_health(home, Health::kUnhealthy);
  const Decision away = route(s);
  EXPECT_EQ(away.endpoint, other(home));
  EXPECT_EQ(away.session, SessionOutcome::kMovedUnavailable);
  router_->pool().set_health(home, Health::kHealthy);
  add_load(other(home), 2);
  EXPECT_EQ(route(s).endpoint, other(home));  // rebound, and stays
  // An excluded endpoint (a retry) is passed over the same way, and the session follows.
  RouteRequest retry = request(s);
  const std::vector<EndpointId> excluded = {other(home)};
  retry.excluded = excluded;
  EXPECT_EQ(router_->route(retry, 0, rng_).endpoint, home);
  add_load(home, 3);
  EXPECT_EQ(route(s).endpoint, home);
}

TEST_F(RouterSessionTest, ARemovedEndpointsSessionsAreForgotten) {
  const uint64_t s = session_key("conv", "m");
  const EndpointId home = route(s).endpoint;
  const EndpointId away = other(home);
  ASSERT_TRUE(router_->remove_endpoint(home));
  EXPECT_EQ(router_->sessions()->size(), 0u);
  EXPECT_EQ(route(s).endpoint, away);
}

TEST_F(RouterSessionTest, OffTheSessionIsIgnoredAndNothingIsKept) {
  config_.session_affinity.enabled = false;
  build();
  EXPECT_EQ(router_->sessions(), nullptr);
  const uint64_t s = session_key("conv", "m");
  const EndpointId first = route(s).endpoint;
  add_load(first, 4);
  EXPECT_EQ(route(s).endpoint, other(first));  // least-request, as without a session
  // Turned on at run time: a table appears; a change that keeps its capacity keeps the
  // bindings.
  config_.session_affinity.enabled = true;
  ASSERT_TRUE(router_->reconfigure(config_).ok());
  ASSERT_NE(router_->sessions(), nullptr);
  route(s);
  config_.session_affinity.idle_ttl = kSecond;
  ASSERT_TRUE(router_->reconfigure(config_).ok());
  EXPECT_EQ(router_->sessions()->size(), 1u);
}

TEST_F(RouterSessionTest, APreferredEndpointComesBeforeTheSession) {
  const uint64_t s = session_key("conv", "m");
  const EndpointId home = route(s).endpoint;
  RouteRequest r = request(s);
  r.preferred = other(home);
  EXPECT_EQ(router_->route(r, 0, rng_).endpoint, other(home));
}

TEST_F(RouterSessionTest, TheSameCallsGiveTheSameDecisions) {
  auto run = [this] {
    build();
    std::vector<EndpointId> out;
    for (int i = 0; i < 200; ++i) {
      const uint64_t s = session_key(static_cast<uint64_t>(i % 17));
      const Decision d = route(s, i * kMillisecond);
      out.push_back(d.endpoint);
      if (i % 5 == 0) (void)router_->pool().on_finished(static_cast<RequestId>(next_id_ - 3), i);
    }
    return out;
  };
  next_id_ = 1;
  const std::vector<EndpointId> first = run();
  next_id_ = 1;
  rng_ = Rng{3};
  EXPECT_EQ(run(), first);
}

TEST(SessionConfig, ValidateNamesTheField) {
  RouterConfig c;
  c.session_affinity.capacity = 0;
  EXPECT_NE(c.validate().error().find("session_affinity.capacity"), std::string::npos);
  c = RouterConfig{};
  c.session_affinity.max_load_ratio = 0.5;
  EXPECT_NE(c.validate().error().find("session_affinity.max_load_ratio"), std::string::npos);
  c = RouterConfig{};
  c.session_affinity.header = "x session";
  EXPECT_NE(c.validate().error().find("session_affinity.header"), std::string::npos);
  c = RouterConfig{};
  EXPECT_TRUE(c.validate().ok());
}

// The bindings' own wire form: beside the batch, which stays byte for byte what replicas
// without session affinity read.
TEST(SessionWire, BindingsRoundTripBesideAnUnchangedBatch) {
  cluster::EventBatch b{.replica = "gw-1", .pool = "main", .seq = 9};
  b.events.push_back(cluster::RoutingEvent::routed(1, "http://a", {}, 16, 8));
  b.events.push_back(cluster::RoutingEvent::load(cluster::EventKind::kFinished, 1));
  b.events.push_back(cluster::RoutingEvent::routed(2, "http://b", {}, 16, 8));
  cluster::EventBatch plain = b;
  std::string none;
  cluster::encode_sessions(b, none);
  EXPECT_TRUE(none.empty());  // no session: no field
  b.events[2].session = 0xfedcba9876543210ULL;
  EXPECT_EQ(cluster::encode(b), cluster::encode(plain));
  std::string wire;
  cluster::encode_sessions(b, wire);
  ASSERT_FALSE(wire.empty());
  Result<cluster::EventBatch> back = cluster::decode(cluster::encode(b));
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->events[2].session, 0u);
  ASSERT_TRUE(cluster::decode_sessions(wire, *back).ok());
  EXPECT_EQ(*back, b);
}

TEST(SessionWire, DecodeRejectsBadInputAndChangesNothing) {
  cluster::EventBatch b{.replica = "gw-1", .pool = "main", .seq = 9};
  b.events.push_back(cluster::RoutingEvent::routed(1, "http://a", {}, 16, 8));
  b.events.push_back(cluster::RoutingEvent::load(cluster::EventKind::kFinished, 1));
  b.events[0].session = 77;
  std::string wire;
  cluster::encode_sessions(b, wire);
  cluster::EventBatch target = b;
  target.events[0].session = 0;
  for (size_t n = 0; n < wire.size(); ++n) {
    EXPECT_FALSE(cluster::decode_sessions(std::string_view(wire).substr(0, n), target).ok()) << n;
  }
  EXPECT_FALSE(cluster::decode_sessions(wire + "x", target).ok());  // trailing bytes
  cluster::EventBatch other_seq = target;
  other_seq.seq = 10;
  EXPECT_FALSE(cluster::decode_sessions(wire, other_seq).ok());  // another batch's
  // An index naming a load event.
  cluster::EventBatch shifted = b;
  shifted.events[0].session = 0;
  shifted.events.insert(shifted.events.begin(),
                        cluster::RoutingEvent::load(cluster::EventKind::kFinished, 5));
  shifted.events[1].session = 0;
  EXPECT_FALSE(cluster::decode_sessions(wire, shifted).ok());
  EXPECT_EQ(target.events[0].session, 0u);
  ASSERT_TRUE(cluster::decode_sessions(wire, target).ok());
  EXPECT_EQ(target.events[0].session, 77u);
}

// A session routed through one replica is bound on its peer, to the endpoint of the same
// URL (ids differ between replicas).
TEST(SessionSync, APeersBindingIsAppliedThroughCommit) {
  RouterConfig c;
  c.block_size = kBs;
  c.policy = {"least-request", {}};
  c.session_affinity.enabled = true;
  kv::ApproxIndex approx1{{}}, approx2{{}};
  auto r1 = Router::create(c, {.approx = &approx1});
  auto r2 = Router::create(c, {.approx = &approx2});
  ASSERT_TRUE(r1.ok() && r2.ok());
  ASSERT_TRUE((*r1)->add_endpoint({.url = "http://a"}, 0).ok());
  ASSERT_TRUE((*r1)->add_endpoint({.url = "http://b"}, 0).ok());
  // The peer numbers them the other way round.
  ASSERT_TRUE((*r2)->add_endpoint({.url = "http://b"}, 0).ok());
  ASSERT_TRUE((*r2)->add_endpoint({.url = "http://a"}, 0).ok());
  Rng rng{1};
  RouteRequest r;
  r.id = 1;
  r.prompt_tokens = 32;
  r.session = session_key("conv", "m");
  const Decision d = (*r1)->route(r, 0, rng);
  ASSERT_TRUE(d.accepted());
  const std::string url = (*r1)->pool().get(d.endpoint)->spec.url;
  cluster::Outbox out("gw-1", "main");
  out.routed(r, d, url, "", 0);
  std::optional<cluster::EventBatch> batch = out.take(0);
  ASSERT_TRUE(batch);
  // Through the wire, as the gateway sends it: batch and bindings apart.
  std::string sessions;
  cluster::encode_sessions(*batch, sessions);
  Result<cluster::EventBatch> back = cluster::decode(cluster::encode(*batch));
  ASSERT_TRUE(back);
  ASSERT_TRUE(cluster::decode_sessions(sessions, *back).ok());
  cluster::PeerSync sync(**r2, "gw-2", {});
  sync.apply(*back, kMillisecond);
  ASSERT_NE((*r2)->sessions(), nullptr);
  const std::optional<EndpointId> bound = (*r2)->sessions()->find(r.session, kMillisecond);
  ASSERT_TRUE(bound);
  EXPECT_EQ((*r2)->pool().get(*bound)->spec.url, url);
}

}  // namespace session_affinity_test
}  // namespace kvgate::route
