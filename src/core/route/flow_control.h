// FlowController: flow control in front of one pool's Router. What the gateway and the
// simulator call instead of Router::route when the pool has a queue.
//
// A request is routed at once while the queue is empty and some endpoint has capacity
// (has_capacity); otherwise it waits in the FlowQueue, unless it is sheddable and
// shed_sheddable is set (refused `saturated`, the router's behaviour without a queue) or
// early rejection would refuse it now (refused `decode_full` before it waited). A request
// with latency targets no endpoint is predicted to meet, when the router's
// latency_targets.action is queue, waits too, as if there were no capacity; dispatched, it
// goes where predicted fastest (RouteRequest::dequeued). A request's TTFT target is handed to
// the queue whether or not latency_targets is on: with FlowQueueConfig::targets_first the
// targeted requests leave first. Routing is decided when a request leaves
// the queue (late binding), on the index and load as they are then. The shell calls dispatch()
// whenever capacity may have appeared (a scrape, a request finished, an endpoint added, a prefill
// done) and expire() at queue().next_expiry().
//
// Late binding routes among the endpoints that have capacity by this measure: the router
// policy picks the best of them (late_binding room). late_binding cache adds, for a
// request of a backlogged tenant leaving the queue, the endpoints without room whose
// queue is within the cache reserve (FlowQueueConfig::cache_reserve): the router decides
// once among those with room and once among those and the reserve, and the request goes
// to a reserve endpoint only when that holds more of its prompt and its prefill is
// predicted to end sooner there (Decision::prefill_tokens, predicted_prefill: the queued
// prefill ahead of it plus its own uncached tokens, kv-cost's prefill term). A tenant
// within its share (one request queued at most) still goes where there is room.
//
// The sparse reserve (FlowQueueConfig::sparse_reserve): when no endpoint has capacity
// and the queue's next request is sparse (its tenant has nothing else queued while
// others' requests wait), it may go to an endpoint with up to sparse_reserve requests
// beyond the limit and KV usage up to 1 (the headroom kv_threshold keeps), so that a
// light tenant's request does not wait behind a heavy tenant's backlog for a place to
// free. The reserve is bounded per endpoint and the queue's order is kept: only the
// request that would leave next anyway takes it.
//
// Capacity, for the queue, is judged more strictly than the router's saturation filter:
// between two scrapes the router cannot know whether an engine found room for what it
// sent, so every request routed since the scrape counts as waiting there, less those
// that have left the engine's queue since: as many as finished (each made room for one
// that waited) or, if more, as many as got their first token (RouterLoad::not_started:
// one that has its first token runs). KV blocks likewise. An endpoint thus takes
// queue_threshold requests beyond what its last scrape showed, plus one per request that
// finished or started since: the queue releases work as fast as the engines take it,
// and no faster.
//
//   FlowController flow(router, config);
//   std::vector<FlowOutcome> out;
//   FlowOutcome a = flow.admit({.request = &rr, .tenant = "acme"}, now, rng, out);
//   // a.kind: kDispatched (a.decision), kQueued, or kRefused; `out` holds what else
//   // happened meanwhile (evictions, other dispatches).
//   ... on a scrape: flow.dispatch(now, rng, out); for (auto& o : out) deliver(o);
//
// Behind several gateway replicas (each with a controller of its own over its own router,
// sharing routing events through the replica sync), each replica releases only its share
// of the pool's room (FlowQueueConfig::room_share, room_share.h): the shell tells it who
// its peers are and what waits in their queues (set_room_fleet); with no peer it takes the
// whole room, call for call as a single gateway.
//
// Deterministic; thread-safety: none (the router's strand).
#pragma once

#include <array>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/rng.h"
#include "core/common/time.h"
#include "core/route/flow_queue.h"
#include "core/route/router.h"

namespace kvgate::route {

struct FlowRequest {
  const RouteRequest* request = nullptr;  // borrowed until its outcome is delivered
  std::string_view tenant;                // "" for anonymous traffic
  double weight = 1;                      // the tenant's weight (keys file)
  std::optional<Nanos> deadline;          // absolute: dispatch by then or refuse
};

struct FlowOutcome {
  enum class Kind : uint8_t { kDispatched, kQueued, kRefused };
  Kind kind = Kind::kRefused;
  RequestId id = 0;
  const RouteRequest* request = nullptr;
  std::string_view tenant;  // valid as long as the controller
  Criticality band = Criticality::kStandard;
  // kDispatched: the accepted decision. kRefused by the router: its rejection (reason
  // != kNone, refusal kNone). kRefused by the queue: refusal != kNone.
  Decision decision;
  FlowRefusal refusal = FlowRefusal::kNone;
  Nanos waited = 0;                    // in the queue
  uint32_t charged_output_tokens = 0;  // kDispatched: pass to finished()
};

class FlowController {
 public:
  // Borrows `router` for its lifetime. REQUIRES: config.validate() ok.
  FlowController(Router& router, FlowQueueConfig config);

  // Dispatched at once, queued, or refused. Other requests' outcomes caused by this call
  // (evicted to make room, dispatched because capacity was there) go to `out`.
  FlowOutcome admit(const FlowRequest& request, Nanos now, Rng& rng, std::vector<FlowOutcome>& out);
  // Capacity may have appeared: routes queued requests in order while some endpoint has
  // capacity, appending their outcomes (a dispatch the router then refuses, e.g.
  // decode_full, is a kRefused outcome). Returns how many left the queue.
  size_t dispatch(Nanos now, Rng& rng, std::vector<FlowOutcome>& out);
  // Timeouts and missed deadlines up to `now`, appended as kRefused.
  void expire(Nanos now, std::vector<FlowOutcome>& out);
  // The client went away while queued: removed at once. False when not queued.
  bool cancel(RequestId id) { return queue_.remove(id); }
  // A dispatched request ended with `output_tokens`: corrects its tenant's counter.
  void finished(std::string_view tenant, uint32_t charged_output_tokens, uint32_t output_tokens) {
    queue_.correct_output(tenant, charged_output_tokens, output_tokens);
  }

  // Some healthy endpoint that can decode is below saturation, counting every request
  // routed since its scrape as waiting there and every one finished since as room.
  bool has_capacity(Nanos now) const { return has_room(now, {}); }

  // --- Several gateway replicas: the pool's room shared between their queues. ---
  struct RoomPeer {
    std::string replica;                    // its replica id
    std::array<uint32_t, kBands> queued{};  // requests waiting in its queue, by band
  };
  struct RoomFleet {
    std::string self;             // this replica's id
    std::vector<RoomPeer> peers;  // the live peers, this replica left out; any order
    // How long a release here stays unseen by the peers (the sync's staleness bound):
    // releases within it count as this replica's part of the room they took.
    Nanos window = 0;
    // Added to `now` for the window's offset (room_offset), so that the replicas agree on
    // it: the gateway, its wall clock less the pool's clock; the simulator, 0.
    Nanos epoch_offset = 0;
  };
  // The peers this queue shares the room with (config().room_share not kNone). No peer:
  // the whole room, as a single gateway (the default).
  void set_room_fleet(RoomFleet fleet);
  // Peers the room is shared with now (0: the whole room is this replica's).
  size_t room_peers() const { return sharing() ? fleet_.peers.size() : 0; }
  // Times a release was held back because this replica's share of the room was used
  // while the pool had room left.
  uint64_t room_holds() const { return room_holds_; }
  // When the last admit() or dispatch() held a release back for the share: the time its
  // share may have grown (the next window, or the oldest own release leaving the
  // window), for the shell to dispatch again then even if nothing else happens; nullopt
  // when it held nothing back.
  std::optional<Nanos> room_retry_at() const { return room_retry_at_; }

  bool enabled() const { return queue_.config().enabled; }
  FlowQueue& queue() { return queue_; }
  const FlowQueue& queue() const { return queue_; }
  Router& router() { return router_; }

 private:
  FlowOutcome route_now(const FlowRequest& request, Nanos now, Rng& rng);
  // How far an endpoint may be filled: the saturation limit (requests == 0), or the
  // sparse reserve: `requests` beyond the waiting limit and KV usage up to full, less the
  // `blocks` the request itself needs.
  struct Room {  // Room{}: the saturation limit
    uint32_t requests;
    uint32_t blocks;
  };
  bool has_room(Nanos now, Room room) const;
  bool endpoint_has_room(const Endpoint& e, Nanos now, Room room) const;
  // late_binding cache: a full endpoint whose queue, by the queue's measure, is below
  // queue_threshold + cache_reserve.
  bool in_cache_reserve(const Endpoint& e, Nanos now) const;
  // An endpoint as the queue judges it: its engine's queue and KV usage counting what
  // was routed and what finished since the scrape; usable: healthy, decodes, not stale.
  struct Fill {
    bool usable = false;
    double waiting = 0;
    double kv = 0;
    uint64_t prefill = 0;  // prompt tokens routed there without a first token yet
  };
  Fill fill(const Endpoint& e, Nanos now) const;
  // Room sharing: true while there are peers to share with.
  bool sharing() const {
    return queue_.config().room_share != RoomShare::kNone && !fleet_.peers.empty();
  }
  // Free request slots of the pool in this view: per endpoint with room, the requests it
  // takes before its queue reaches queue_threshold (at least one).
  uint32_t room_slots(Nanos now) const;
  // May one more request leave now, within this replica's share of the room? Always
  // true without peers. `arriving`: the band of a request arriving at an empty queue.
  bool may_release(Nanos now, std::optional<Criticality> arriving);
  // A request left into the room (not the sparse reserve) at `now`.
  void note_release(Nanos now);
  // Router::route among the endpoints that have room (the others excluded); `dequeued`:
  // the request leaves the queue (RouteRequest::dequeued); `follow_cache` (late_binding
  // cache, a backlogged tenant's request): the cache reserve may take it too.
  Decision route_with_capacity(const RouteRequest& request, Nanos now, Rng& rng, Room room,
                               bool dequeued = false, bool follow_cache = false);
  // Router::commit of an accepted decision; a commit failure (duplicate id) turns into
  // kDuplicateRequest, as Router::route does.
  Decision commit(const RouteRequest& request, const Decision& decision, Nanos now);

  Router& router_;
  FlowQueue queue_;
  std::vector<FlowQueue::Removed> removed_;  // scratch
  std::vector<EndpointId> excluded_;         // scratch: the request's and the full ones
  std::vector<EndpointId> wide_excluded_;    // scratch: as excluded_, less the cache reserve
  std::vector<EndpointId> reserve_;          // scratch: the cache reserve
  // Room sharing: the fleet (peers sorted by replica id), this replica's place among
  // them, its releases within the window, scratch.
  RoomFleet fleet_;
  size_t self_index_ = 0;
  std::deque<Nanos> released_;
  std::vector<uint32_t> demand_;
  std::vector<double> shares_;
  uint64_t room_holds_ = 0;
  std::optional<Nanos> room_retry_at_;
};

}  // namespace kvgate::route
