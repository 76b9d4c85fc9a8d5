// Routing events between replicas: the wire form round-trips and rejects bad input; a
// peer's decisions and load deltas, applied through PeerSync, weigh on this replica's
// router exactly as its own would; dead peers' load expires; the flush rule batches a
// low rate's requests and keeps every event within max_wait.
#include "core/cluster/peer_sync.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <vector>

#include "keys.h"

namespace kvgate::cluster {
namespace {

// Found by the cluster_wire fuzz target: a duration of 2^56 microseconds overflowed the
// conversion to nanoseconds; more than 2^40 us is now malformed.
TEST(RoutingEvent, AnAbsurdDurationIsMalformedNotAnOverflow) {
  EventBatch b{.replica = "gw-1", .pool = "main", .seq = 1, .age = 0};
  b.events.push_back(RoutingEvent::routed(42, "http://10.0.0.7:8000", block_keys(1, 1), 16, 16));
  b.events.back().predicted_prefill = (Nanos{1} << 40) * 1000;
  EXPECT_TRUE(decode(encode(b)));
  b.events.back().predicted_prefill = (Nanos{1} << 40) * 1000 + 1000;
  EXPECT_FALSE(decode(encode(b)));
  b.events.back().predicted_prefill = 0;
  b.age = (Nanos{1} << 41) * 1000;
  EXPECT_FALSE(decode(encode(b)));
}

TEST(RoutingEvent, BatchRoundTripsThroughItsWireForm) {
  EventBatch b{.replica = "gw-1", .pool = "main", .seq = 300, .age = 7 * kMillisecond};
  b.events.push_back(RoutingEvent::routed(42, "http://10.0.0.7:8000", block_keys(5, 1), 85, 128));
  b.events.back().prefill_endpoint = "http://10.0.0.8:8000";
  b.events.back().prefill_tokens = 85;
  b.events.back().predicted_prefill = 12 * kMillisecond;
  b.events.push_back(RoutingEvent::load(EventKind::kPrefillDone, 42));
  b.events.push_back(RoutingEvent::load(EventKind::kFinished, 42, 97));
  b.events.push_back(RoutingEvent::load(EventKind::kFailed, 1ull << 40));
  const std::string wire = encode(b);
  // Compact: the five keys are 40 of its bytes.
  EXPECT_LT(wire.size(), 40u + 100u);
  Result<EventBatch> back = decode(wire);
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(*back, b);
  EXPECT_EQ(to_string(back->events[1].kind), "prefill_done");
  EXPECT_EQ(batch_replica(wire), std::optional<std::string_view>("gw-1"));
  EXPECT_EQ(batch_replica(wire.substr(0, 3)), std::nullopt);
  EXPECT_EQ(batch_replica(""), std::nullopt);
}

TEST(RoutingEvent, DecodeRejectsEveryTruncationAndBadInput) {
  EventBatch b{.replica = "gw-1", .pool = "main", .seq = 1};
  b.events.push_back(RoutingEvent::routed(1, "http://a", block_keys(3, 2), 48, 10));
  b.events.push_back(RoutingEvent::load(EventKind::kFinished, 1));
  const std::string wire = encode(b);
  for (size_t n = 0; n < wire.size(); ++n) {
    EXPECT_FALSE(decode(std::string_view(wire).substr(0, n))) << n;
  }
  EXPECT_FALSE(decode(wire + "x"));  // trailing bytes
  std::string bad_version = wire;
  bad_version[0] = 9;
  EXPECT_NE(decode(bad_version).error().find("version"), std::string::npos);
  // A key count far beyond the input is refused before anything is allocated for it.
  std::string huge = encode(EventBatch{.replica = "r", .pool = "p", .seq = 1});
  huge.back() = 1;  // one event
  huge += std::string("\x01\x01\x00\x00\x00\x00\x00\x00\xff\xff\x03", 11);
  EXPECT_FALSE(decode(huge));
}

class PeerSyncTest : public ::testing::Test {
 protected:
  struct Replica {
    kv::ApproxIndex approx{{}};
    std::unique_ptr<route::Router> router;
    std::vector<route::EndpointId> ids;
  };
  void make_replica(Replica& r, bool reverse_order) {
    route::RouterConfig c;
    c.block_size = kBs;
    c.policy = {"kv-cost", {}};
    c.overlap_source = route::OverlapSource::kApprox;
    c.filters.clear();
    auto router = route::Router::create(c, {.approx = &r.approx});
    ASSERT_TRUE(router) << router.error();
    r.router = std::move(*router);
    // Each replica numbers the endpoints in its own order: events name them by URL.
    for (int i = 0; i < 3; ++i) {
      const int n = reverse_order ? 2 - i : i;
      auto id = r.router->add_endpoint({.url = "http://e" + std::to_string(n)}, 0);
      ASSERT_TRUE(id);
    }
    for (int i = 0; i < 3; ++i) r.ids.push_back(*r.router->pool().find(endpoint_url(i)));
  }
  static std::string endpoint_url(int n) { return "http://e" + std::to_string(n); }
  void SetUp() override {
    make_replica(a_, false);
    make_replica(b_, true);
  }
  Replica a_, b_;
  Rng rng_{7};
};

TEST_F(PeerSyncTest, APeersDecisionLandsInTheIndexAndTheLoadAsOnesOwn) {
  Outbox out("gw-a", "main");
  PeerSync sync(*b_.router, "gw-b", {});
  const std::vector<kv::BlockKey> keys = block_keys(8, 3);
  route::RouteRequest req{
      .id = 1, .keys = keys, .prompt_tokens = 8 * kBs, .expected_output_tokens = 32};
  const route::Decision d = a_.router->route(req, 0, rng_);
  ASSERT_TRUE(d.accepted());
  const std::string url = a_.router->pool().get(d.endpoint)->spec.url;
  out.routed(req, d, url, "", 0);
  auto batch = out.take(kMillisecond);
  ASSERT_TRUE(batch);
  Result<EventBatch> wire = decode(encode(*batch));
  ASSERT_TRUE(wire);
  sync.apply(*wire, 2 * kMillisecond);
  EXPECT_EQ(sync.stats().routed, 1u);

  // On B the same endpoint (another id there) now holds the prefix and the request.
  const route::EndpointId there = *b_.router->pool().find(url);
  std::vector<kv::EndpointMatch> m;
  b_.approx.match(keys, 3 * kMillisecond, m);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].endpoint, there);
  EXPECT_EQ(m[0].total_blocks, 8u);
  EXPECT_EQ(b_.router->pool().get(there)->load.in_flight, 1u);
  EXPECT_GT(b_.router->pool().get(there)->load.active_prefill_tokens, 0u);
  // The prefill is done (first token): B's own follow-up with the same prefix goes there
  // too (kv-cost on the approximate index), the peer's request sharing its blocks.
  out.load(EventKind::kPrefillDone, 1, 4 * kMillisecond);
  sync.apply(*decode(encode(*out.take(4 * kMillisecond))), 4 * kMillisecond);
  EXPECT_EQ(b_.router->pool().get(there)->load.active_prefill_tokens, 0u);
  route::RouteRequest follow{.id = 2, .keys = keys, .prompt_tokens = 8 * kBs};
  EXPECT_EQ(b_.router->route(follow, 5 * kMillisecond, rng_).endpoint, there);
  ASSERT_TRUE(b_.router->pool().on_finished(2, 5 * kMillisecond));

  // Finished: the load goes back to zero.
  out.load(EventKind::kFinished, 1, 7 * kMillisecond, 32);
  sync.apply(*decode(encode(*out.take(8 * kMillisecond))), 9 * kMillisecond);
  EXPECT_EQ(b_.router->pool().get(there)->load.in_flight, 0u);
  EXPECT_EQ(b_.router->pool().get(there)->load.active_decode_blocks, 0u);
  EXPECT_EQ(sync.stats().released, 1u);
  EXPECT_EQ(sync.stats().prefill_done, 1u);
  EXPECT_EQ(sync.peer_requests(), 0u);
}

TEST_F(PeerSyncTest, OwnBatchesAreSkippedUnknownsCountedGapsSeen) {
  PeerSync sync(*b_.router, "gw-b", {});
  EventBatch own{.replica = "gw-b", .pool = "main", .seq = 1};
  own.events.push_back(RoutingEvent::routed(1, endpoint_url(0), block_keys(2, 1), 32, 0));
  sync.apply(own, 0);
  EXPECT_EQ(sync.stats().batches, 0u);
  EXPECT_EQ(b_.router->pool().requests_in_flight(), 0u);

  EventBatch peer{.replica = "gw-a", .pool = "main", .seq = 1};
  peer.events.push_back(RoutingEvent::routed(1, "http://elsewhere", block_keys(2, 1), 32, 0));
  peer.events.push_back(RoutingEvent::load(EventKind::kFinished, 99));
  sync.apply(peer, 0);
  EXPECT_EQ(sync.stats().unknown_endpoint, 1u);
  EXPECT_EQ(sync.stats().unknown_request, 1u);
  peer.events.clear();
  peer.seq = 5;  // 2, 3 and 4 were lost
  sync.apply(peer, kMillisecond);
  EXPECT_EQ(sync.stats().gaps, 3u);
}

TEST_F(PeerSyncTest, ADeadPeersLoadExpiresAndARestartReleasesIt) {
  PeerSync sync(*b_.router, "gw-b", {.peer_timeout = kSecond, .max_request_age = 60 * kSecond});
  EventBatch a{.replica = "gw-a", .pool = "main", .seq = 1};
  for (uint64_t i = 1; i <= 3; ++i) {
    a.events.push_back(
        RoutingEvent::routed(i, endpoint_url(0), block_keys(2, static_cast<uint32_t>(i)), 32, 0));
  }
  sync.apply(a, 0);
  EventBatch c{.replica = "gw-c", .pool = "main", .seq = 1};
  c.events.push_back(RoutingEvent::routed(1, endpoint_url(1), block_keys(2, 9), 32, 0));
  sync.apply(c, 0);
  EXPECT_EQ(b_.router->pool().requests_in_flight(), 4u);
  // gw-c keeps sending heartbeats (empty batches); gw-a falls silent.
  for (int t = 1; t <= 4; ++t) {
    c.events.clear();
    c.seq++;
    sync.apply(c, t * 300 * kMillisecond);
    sync.expire(t * 300 * kMillisecond);
  }
  EXPECT_EQ(sync.stats().dead_replicas, 1u);
  EXPECT_EQ(sync.live_peers(1200 * kMillisecond), 1u);
  EXPECT_EQ(b_.router->pool().get(b_.ids[0])->load.in_flight, 0u);
  EXPECT_EQ(b_.router->pool().get(b_.ids[1])->load.in_flight, 1u);
  // gw-c restarts: its sequence starts over, its old request is gone.
  c.seq = 1;
  sync.apply(c, 1300 * kMillisecond);
  EXPECT_EQ(b_.router->pool().requests_in_flight(), 0u);
  EXPECT_EQ(sync.stats().expired_requests, 4u);
}

TEST_F(PeerSyncTest, ARequestWhoseEndNeverCameIsReleasedByAge) {
  PeerSync sync(*b_.router, "gw-b", {.peer_timeout = 60 * kSecond, .max_request_age = kSecond});
  EventBatch a{.replica = "gw-a", .pool = "main", .seq = 1};
  a.events.push_back(RoutingEvent::routed(1, endpoint_url(2), block_keys(2, 1), 32, 0));
  sync.apply(a, 0);
  a.events.clear();
  a.seq = 2;
  sync.apply(a, 2 * kSecond);  // alive
  sync.expire(2 * kSecond);
  EXPECT_EQ(sync.stats().dead_replicas, 0u);
  EXPECT_EQ(sync.stats().expired_requests, 1u);
  EXPECT_EQ(b_.router->pool().requests_in_flight(), 0u);
}

// expire() runs at every flush (every few milliseconds); the walk over the peers' requests
// for their ages runs at most once per kAgeScan.
TEST_F(PeerSyncTest, AgesAreCheckedOncePerScanPeriodNotAtEveryCall) {
  PeerSync sync(*b_.router, "gw-b", {.peer_timeout = 60 * kSecond, .max_request_age = kSecond});
  ASSERT_EQ(PeerSync::kAgeScan, kSecond);
  EventBatch a{.replica = "gw-a", .pool = "main", .seq = 1};
  a.events.push_back(RoutingEvent::routed(1, endpoint_url(2), block_keys(2, 1), 32, 0));
  sync.apply(a, 0);
  sync.expire(500 * kMillisecond);  // ages checked: young; next check at 1.5 s
  EXPECT_EQ(sync.stats().expired_requests, 0u);
  sync.expire(1200 * kMillisecond);  // past its age, not checked yet
  EXPECT_EQ(sync.stats().expired_requests, 0u);
  EXPECT_EQ(b_.router->pool().requests_in_flight(), 1u);
  sync.expire(1500 * kMillisecond);
  EXPECT_EQ(sync.stats().expired_requests, 1u);
  EXPECT_EQ(b_.router->pool().requests_in_flight(), 0u);
  EXPECT_EQ(sync.stats().dead_replicas, 0u);
}

TEST(Outbox, BatchesCarrySequenceAgeAndAtMostMaxKeys) {
  Outbox out("gw-a", "main");
  out.max_keys = 4;
  EXPECT_FALSE(out.take(0));
  auto hb = out.take(0, /*heartbeat=*/true);
  ASSERT_TRUE(hb);
  EXPECT_TRUE(hb->events.empty());
  EXPECT_EQ(hb->seq, 1u);
  const std::vector<kv::BlockKey> keys = block_keys(10, 1);
  route::RouteRequest r{.id = 5, .keys = keys, .prompt_tokens = 160};
  route::Decision d;
  out.routed(r, d, "http://e0", "", 10 * kMillisecond);
  out.load(EventKind::kFinished, 5, 12 * kMillisecond);
  auto b = out.take(15 * kMillisecond);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->seq, 2u);
  EXPECT_EQ(b->age, 5 * kMillisecond);
  ASSERT_EQ(b->events.size(), 2u);
  EXPECT_EQ(b->events[0].keys.size(), 4u);
  EXPECT_EQ(b->events[0].keys[3], keys[3]);
  EXPECT_TRUE(out.empty());
}

// The flush rule (FlushRule, Outbox::due): a lone request waits for more until the check
// before it would pass max_wait, then goes.
TEST(OutboxFlushRule, ALoneRequestGoesAtTheLastCheckWithinMaxWait) {
  const FlushRule rule{.period = 5 * kMillisecond, .batch = 8, .max_wait = 25 * kMillisecond};
  Outbox out("gw-a", "main");
  EXPECT_FALSE(out.due(0, rule));  // nothing waiting
  const route::RouteRequest r{.id = 1, .prompt_tokens = 16};
  out.routed(r, route::Decision{}, "http://e0", "", 3 * kMillisecond);
  EXPECT_EQ(out.requests(), 1u);
  // At 20 ms the event has waited 17 ms and the next check comes at 25 (22 ms): it waits.
  for (Nanos t = 5 * kMillisecond; t <= 20 * kMillisecond; t += 5 * kMillisecond) {
    EXPECT_FALSE(out.due(t, rule)) << t;
  }
  // At 25 ms it has waited 22 ms; at the next check it would have waited 27: it goes.
  EXPECT_TRUE(out.due(25 * kMillisecond, rule));
  std::optional<EventBatch> b = out.take(25 * kMillisecond);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->age, 22 * kMillisecond);
  EXPECT_LE(b->age, rule.max_wait);
  EXPECT_EQ(out.requests(), 0u);
  EXPECT_FALSE(out.due(30 * kMillisecond, rule));
}

TEST(OutboxFlushRule, ABatchOfRequestsGoesAtOnceLifecycleEventsDoNotCount) {
  const FlushRule rule{.period = 5 * kMillisecond, .batch = 3, .max_wait = 25 * kMillisecond};
  Outbox out("gw-a", "main");
  for (uint64_t id = 1; id <= 2; ++id) {
    const route::RouteRequest r{.id = id, .prompt_tokens = 16};
    out.routed(r, route::Decision{}, "http://e0", "", kMillisecond);
  }
  // Two requests and many lifecycle events: still fewer than three requests.
  for (int i = 0; i < 10; ++i) out.load(EventKind::kFinished, 1, 2 * kMillisecond);
  EXPECT_EQ(out.requests(), 2u);
  EXPECT_FALSE(out.due(5 * kMillisecond, rule));
  const route::RouteRequest third{.id = 3, .prompt_tokens = 16};
  out.routed(third, route::Decision{}, "http://e0", "", 6 * kMillisecond);
  EXPECT_TRUE(out.due(10 * kMillisecond, rule));
  std::optional<EventBatch> b = out.take(10 * kMillisecond);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->events.size(), 13u);
  EXPECT_EQ(out.requests(), 0u);
  // Lifecycle events alone wait for max_wait too.
  out.load(EventKind::kPrefillDone, 3, 11 * kMillisecond);
  EXPECT_FALSE(out.due(15 * kMillisecond, rule));
  EXPECT_TRUE(out.due(35 * kMillisecond, rule));
}

// due_at: the one check a shell needs, instead of one every period. A lone event is due at
// the first check after which it would wait max_wait; a full batch at once (its oldest
// event's time); due() agrees at that time and not a nanosecond before.
TEST(OutboxFlushRule, DueAtIsTheFirstTimeDueHolds) {
  const FlushRule rule{.period = 5 * kMillisecond, .batch = 3, .max_wait = 25 * kMillisecond};
  Outbox out("gw-a", "main");
  EXPECT_FALSE(out.due_at(rule).has_value());  // nothing waiting: no check needed
  out.load(EventKind::kFinished, 9, 3 * kMillisecond);
  ASSERT_TRUE(out.due_at(rule).has_value());
  EXPECT_EQ(*out.due_at(rule), 23 * kMillisecond);
  EXPECT_FALSE(out.due(*out.due_at(rule) - 1, rule));
  EXPECT_TRUE(out.due(*out.due_at(rule), rule));
  // Later events do not move it; a full batch brings it to the oldest event's time.
  for (uint64_t id = 1; id <= 2; ++id) {
    const route::RouteRequest r{.id = id, .prompt_tokens = 16};
    out.routed(r, route::Decision{}, "http://e0", "", 6 * kMillisecond);
  }
  EXPECT_EQ(*out.due_at(rule), 23 * kMillisecond);
  const route::RouteRequest third{.id = 3, .prompt_tokens = 16};
  out.routed(third, route::Decision{}, "http://e0", "", 7 * kMillisecond);
  EXPECT_EQ(*out.due_at(rule), 3 * kMillisecond);
  EXPECT_TRUE(out.due(7 * kMillisecond, rule));
  ASSERT_TRUE(out.take(7 * kMillisecond));
  EXPECT_FALSE(out.due_at(rule).has_value());
  // max_wait below the period: due at once.
  const FlushRule eager{.period = 5 * kMillisecond, .batch = 8, .max_wait = kMillisecond};
  out.load(EventKind::kFinished, 3, 9 * kMillisecond);
  EXPECT_EQ(*out.due_at(eager), 9 * kMillisecond);
  EXPECT_TRUE(out.due(9 * kMillisecond, eager));
}

// max_wait equal to the period: every check sends whatever waits, the rule before batching.
TEST(OutboxFlushRule, MaxWaitOfOnePeriodSendsAtEveryCheck) {
  const FlushRule rule{.period = 5 * kMillisecond, .batch = 8, .max_wait = 5 * kMillisecond};
  Outbox out("gw-a", "main");
  EXPECT_FALSE(out.due(5 * kMillisecond, rule));
  out.load(EventKind::kFinished, 9, 5 * kMillisecond);  // just in time for the check at 5
  EXPECT_TRUE(out.due(5 * kMillisecond, rule));
  EXPECT_TRUE(rule.waited(5 * kMillisecond, 5 * kMillisecond));
}

// One second of one replica's traffic: a request routed every `spacing`, its first token
// 2 ms later and its end 4 ms later, checked every period. At 100 requests/s the rule sends
// several requests per publish and no event waits past max_wait; at 2,000 requests/s each
// check has a batch, and it publishes at every check, as the rule before batching did.
TEST(OutboxFlushRule, FewerPublishesAtLowRatesTheSameAtHighRates) {
  struct Run {
    int publishes = 0;
    Nanos max_age = 0;
    size_t events = 0;
  };
  auto run = [](Nanos spacing, const FlushRule& rule) {
    struct Event {
      Nanos at = 0;
      EventKind kind = EventKind::kRouted;
      uint64_t id = 0;
    };
    std::vector<Event> events;
    for (uint64_t i = 0; static_cast<Nanos>(i) * spacing < kSecond; ++i) {
      const Nanos routed = static_cast<Nanos>(i) * spacing + kMillisecond;
      events.push_back({routed, EventKind::kRouted, i + 1});
      events.push_back({routed + 2 * kMillisecond, EventKind::kPrefillDone, i + 1});
      events.push_back({routed + 4 * kMillisecond, EventKind::kFinished, i + 1});
    }
    std::stable_sort(events.begin(), events.end(),
                     [](const Event& a, const Event& b) { return a.at < b.at; });
    Outbox out("gw-a", "main");
    Run r;
    size_t next = 0;
    for (Nanos t = rule.period; t <= 2 * kSecond; t += rule.period) {
      for (; next < events.size() && events[next].at <= t; ++next) {
        const Event& e = events[next];
        if (e.kind == EventKind::kRouted) {
          const route::RouteRequest req{.id = e.id, .prompt_tokens = 16};
          out.routed(req, route::Decision{}, "http://e0", "", e.at);
        } else {
          out.load(e.kind, e.id, e.at);
        }
      }
      if (!out.due(t, rule)) continue;
      std::optional<EventBatch> b = out.take(t);
      ++r.publishes;
      r.max_age = std::max(r.max_age, b->age);
      r.events += b->events.size();
    }
    EXPECT_EQ(r.events, events.size());
    return r;
  };
  const FlushRule before{.period = 5 * kMillisecond, .batch = 8, .max_wait = 5 * kMillisecond};
  const FlushRule rule{.period = 5 * kMillisecond, .batch = 8, .max_wait = 25 * kMillisecond};

  const Run slow_before = run(10 * kMillisecond, before), slow = run(10 * kMillisecond, rule);
  EXPECT_EQ(slow_before.publishes, 100);  // one per request
  EXPECT_LE(slow.publishes * 2, slow_before.publishes) << slow.publishes;
  EXPECT_LT(slow.max_age, rule.max_wait);
  EXPECT_LT(slow_before.max_age, before.max_wait);

  const Run fast_before = run(kMillisecond / 2, before), fast = run(kMillisecond / 2, rule);
  EXPECT_EQ(fast.publishes, fast_before.publishes);
  EXPECT_LT(fast.max_age, rule.max_wait);  // the last requests' ends wait alone
}

}  // namespace
}  // namespace kvgate::cluster
