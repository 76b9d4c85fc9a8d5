// Outbox and PeerSync: the two ends of routing-state sharing between gateway replicas.
//
// Outbox collects what this replica's router did (routing decisions, then the load
// deltas of each request) and hands them out in batches (the shell publishes them off the
// data path; the simulator delivers them after a lag). PeerSync applies the batches of
// the other replicas to this replica's router through the very calls the router makes
// for its own requests: Router::commit for a routing decision (the pool tracks the
// request's load, the approximate index records its prefix, the session table binds the
// request's session), EndpointPool::on_first_token
// and on_finished for the deltas. So a peer's request weighs on an endpoint exactly as
// one's own does, and its prefix is found exactly where one's own would be.
//
// Peers' requests get ids of this replica's pool from a range of their own (from
// kPeerIdBase up), so the caller's own ids must stay below it. A replica that falls
// silent (no batch, not even an empty heartbeat, for `peer_timeout`) is taken for dead
// and the load of its requests in flight released; a request whose end never came is
// released after `max_request_age`. Gaps in a peer's sequence are counted (the events
// are lost; the index heals as new decisions come, and the load through the age limit).
//
// When to publish is the caller's, with a FlushRule: at each check (every `period`) the
// outbox goes out when it holds `batch` requests or its oldest event has waited about
// `max_wait` (Outbox::due), so at low rates one publish carries several requests.
//
//   Outbox out("gw-1", "main");
//   out.routed(request, decision, endpoint_url, prefill_url);  // after Router::commit
//   out.load(EventKind::kFinished, request.id);                 // after on_finished
//   if (out.due(now, rule)) publish(encode(*out.take(now)));    // every rule.period
//
//   PeerSync sync(router, "gw-2", {});
//   sync.apply(decode(wire).value(), now);
//   sync.expire(now);  // now and then
//
// Deterministic; thread-safety: none (both live on the router's strand).
#pragma once

#include <optional>
#include <string>
#include <unordered_map>

#include "core/cluster/routing_event.h"
#include "core/route/router.h"

namespace kvgate::cluster {

// When a replica publishes its own events (docs/replicas.md, "Publishing: the flush
// rule"). The caller checks every `period`; a check publishes when the outbox holds
// `batch` requests' events (counted by their routed events) or when its oldest event
// would have waited `max_wait` or more by the next check. So no event waits more than
// `max_wait` (checks on time), and at rates of `batch` requests per `max_wait` or more
// each publish carries every request of a `period` (at least `batch` of them, or all of
// the last `max_wait`): fewer publishes, each waking every peer once. `max_wait` equal to
// `period` publishes at every check whatever is there: the rule before batching.
struct FlushRule {
  Nanos period = 5 * kMillisecond;
  size_t batch = 8;
  Nanos max_wait = 25 * kMillisecond;

  // Whether something waiting since `since` would have waited `max_wait` or more by the
  // check after the one at `now`: then the check at `now` sends it.
  bool waited(Nanos since, Nanos now) const { return now - since + period >= max_wait; }
};

class Outbox {
 public:
  Outbox(std::string replica, std::string pool);

  // A committed decision (`request` as routed, `decision` accepted), with the URLs of the
  // endpoints it names. At most `max_keys` leading block keys travel (the deepest blocks
  // are the least shared, and each costs 8 bytes).
  void routed(const route::RouteRequest& request, const route::Decision& decision,
              std::string_view endpoint_url, std::string_view prefill_url, Nanos now);
  // A load delta of a request routed() before.
  void load(EventKind kind, uint64_t request, Nanos now, uint32_t output_tokens = 0);

  bool empty() const { return batch_.events.empty(); }
  size_t size() const { return batch_.events.size(); }
  // Requests routed since the last take() (routed events in the batch).
  size_t requests() const { return requests_; }
  // Whether a check at `now` publishes under `rule`: events are waiting, and they are
  // `rule.batch` requests or more, or the oldest has waited (FlushRule::waited). Leaves
  // the outbox as it is (take() empties it).
  bool due(Nanos now, const FlushRule& rule) const;
  // The earliest check at which due() holds without another event: the oldest event's
  // time when the batch is full, else the check after which it would wait `max_wait`
  // (oldest + max_wait - period); nullopt when empty. A shell that checks at this time
  // (and again whenever an event makes it earlier) publishes as one that checks every
  // `period`, and wakes only when something is due.
  std::optional<Nanos> due_at(const FlushRule& rule) const;
  // The events so far as one batch (sequence number assigned), or nullopt when there are
  // none; `heartbeat` returns an empty batch instead, so that peers know this replica
  // lives.
  std::optional<EventBatch> take(Nanos now, bool heartbeat = false);

  size_t max_keys = 256;

 private:
  EventBatch batch_;
  uint64_t next_seq_ = 1;
  Nanos oldest_ = 0;     // time of the batch's first event
  size_t requests_ = 0;  // routed events in the batch
};

class PeerSync {
 public:
  static constexpr route::RequestId kPeerIdBase = route::RequestId{1} << 62;

  struct Options {
    Nanos peer_timeout = 15 * kSecond;      // silent this long: dead, its load released
    Nanos max_request_age = 600 * kSecond;  // a request never heard to end is released
  };
  struct Stats {
    uint64_t batches = 0;
    uint64_t routed = 0;    // decisions applied
    uint64_t released = 0;  // requests ended (prefill done counts apart)
    uint64_t prefill_done = 0;
    uint64_t unknown_endpoint = 0;  // decisions for an endpoint this replica lacks
    uint64_t unknown_request = 0;   // deltas for a request never seen (a gap, or late)
    uint64_t gaps = 0;              // batches missed (sequence numbers skipped)
    uint64_t expired_requests = 0;  // released by expire()
    uint64_t dead_replicas = 0;     // replicas taken for dead by expire()
  };

  // `self` is this replica's id: its own batches (read back from a shared stream) are
  // skipped. The router must outlive this object.
  PeerSync(route::Router& router, std::string self, Options options);

  // Applies a peer's batch at `now`. The pool name is the caller's to check.
  void apply(const EventBatch& batch, Nanos now);
  // Releases the requests of peers silent for peer_timeout and those older than
  // max_request_age. The caller may call it often (the gateway does at every flush, every
  // few milliseconds): the peers are checked at each call, the ages of their requests (a
  // walk over every peer request in flight) at most once per kAgeScan, so a request whose
  // end never came is released within kAgeScan after max_request_age.
  void expire(Nanos now);
  static constexpr Nanos kAgeScan = kSecond;

  const Stats& stats() const { return stats_; }
  // Peers' requests in flight here, in all.
  size_t peer_requests() const;
  // Peers heard from within peer_timeout of `now`.
  size_t live_peers(Nanos now) const;

 private:
  struct Tracked {
    route::RequestId local = 0;
    Nanos routed_at = 0;
  };
  struct Peer {
    Nanos last_heard = 0;
    uint64_t last_seq = 0;
    std::unordered_map<uint64_t, Tracked> requests;  // by the peer's request id
  };
  void apply_one(Peer& peer, const RoutingEvent& e, Nanos age, Nanos now);
  void release_all(Peer& peer, Nanos now);

  route::Router& router_;
  std::string self_;
  Options options_;
  std::unordered_map<std::string, Peer> peers_;
  route::RequestId next_id_ = kPeerIdBase;
  Nanos next_age_scan_ = 0;  // expire() walks the requests' ages from then on
  Stats stats_;
};

}  // namespace kvgate::cluster
