#include "core/route/flow_control.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/route/load.h"

namespace kvgate::route {

FlowController::FlowController(Router& router, FlowQueueConfig config)
    : router_(router), queue_(config) {}

FlowController::Fill FlowController::fill(const Endpoint& e, Nanos now) const {
  const SaturationConfig& sat = router_.config().saturation;
  Fill f;
  if (e.health != Health::kHealthy || !can_decode(e.spec.role)) return f;
  const EffectiveLoad load = effective_load(e, now, sat);
  if (load.stale) return f;
  f.usable = true;
  // The engine's queue as the scrape showed it, plus the requests routed since that have
  // not started (no first token), less one per request finished since (it made room for
  // one that waited).
  const double routed_since =
      static_cast<double>(e.load.in_flight) - static_cast<double>(e.in_flight_at_scrape);
  f.waiting =
      std::max(0.0, (e.metrics ? e.metrics->waiting : 0) +
                        std::min(routed_since, static_cast<double>(e.unstarted_since_scrape)));
  f.prefill = e.load.active_prefill_tokens;
  f.kv = e.metrics ? e.metrics->kv_usage : 0;
  if (e.spec.kv_capacity_blocks > 0) {
    f.kv += (static_cast<double>(e.load.active_decode_blocks) -
             static_cast<double>(e.decode_blocks_at_scrape)) /
            e.spec.kv_capacity_blocks;
  }
  return f;
}

bool FlowController::endpoint_has_room(const Endpoint& e, Nanos now, Room room) const {
  const SaturationConfig& sat = router_.config().saturation;
  const Fill f = fill(e, now);
  if (!f.usable) return false;
  if (room.requests == 0) {
    const uint64_t prefill_threshold = queue_.config().prefill_threshold;
    return std::max(f.waiting / sat.queue_threshold, f.kv / sat.kv_threshold) < 1.0 &&
           (prefill_threshold == 0 || f.prefill < prefill_threshold);
  }
  // The reserve: the request must fit in what is left of the KV cache, else it would
  // wait inside the engine, where it can no longer be re-placed.
  const double need = e.spec.kv_capacity_blocks > 0
                          ? static_cast<double>(room.blocks) / e.spec.kv_capacity_blocks
                          : 0;
  return f.waiting < sat.queue_threshold + room.requests &&
         f.kv + need <= std::max(1.0, sat.kv_threshold);
}

bool FlowController::in_cache_reserve(const Endpoint& e, Nanos now) const {
  const SaturationConfig& sat = router_.config().saturation;
  const Fill f = fill(e, now);
  return f.usable &&
         f.waiting < sat.queue_threshold + static_cast<double>(queue_.config().cache_reserve);
}

bool FlowController::has_room(Nanos now, Room room) const {
  const EndpointPool& pool = router_.pool();
  for (EndpointId id : pool.ids()) {
    if (endpoint_has_room(*pool.get(id), now, room)) return true;
  }
  return false;
}

uint32_t FlowController::room_slots(Nanos now) const {
  const SaturationConfig& sat = router_.config().saturation;
  const EndpointPool& pool = router_.pool();
  uint32_t slots = 0;
  for (EndpointId id : pool.ids()) {
    const Endpoint& e = *pool.get(id);
    if (!endpoint_has_room(e, now, Room{})) continue;
    // Requests it takes before waiting / queue_threshold reaches 1: waiting 0 and a
    // threshold of 1 take one, a threshold of 2.5 three (waiting 0, 1 and 2).
    const double left = std::ceil(sat.queue_threshold - fill(e, now).waiting);
    slots += left >= 1 ? static_cast<uint32_t>(std::min(left, 1e6)) : 1;
  }
  return slots;
}

void FlowController::set_room_fleet(RoomFleet fleet) {
  fleet_ = std::move(fleet);
  std::sort(fleet_.peers.begin(), fleet_.peers.end(),
            [](const RoomPeer& a, const RoomPeer& b) { return a.replica < b.replica; });
  // A peer under this replica's own id (its own report read back) is not a peer.
  std::erase_if(fleet_.peers, [&](const RoomPeer& p) { return p.replica == fleet_.self; });
  self_index_ = static_cast<size_t>(
      std::lower_bound(fleet_.peers.begin(), fleet_.peers.end(), fleet_.self,
                       [](const RoomPeer& p, const std::string& id) { return p.replica < id; }) -
      fleet_.peers.begin());
  if (!sharing()) released_.clear();
}

bool FlowController::may_release(Nanos now, std::optional<Criticality> arriving) {
  if (!sharing()) return true;
  const Nanos window = std::max<Nanos>(fleet_.window, 1);
  while (!released_.empty() && now - released_.front() >= window) released_.pop_front();
  const auto unseen = static_cast<uint32_t>(released_.size());
  // This replica's demand, by band: its queue, the request arriving, and what it released
  // within the window (the room counts those slots too).
  std::array<uint32_t, kBands> own{};
  for (size_t b = 0; b < kBands; ++b) {
    own[b] = static_cast<uint32_t>(queue_.band_size(static_cast<Criticality>(b)));
  }
  if (arriving) ++own[static_cast<size_t>(*arriving)];
  // Strict bands: the fleet's highest band that has demand is what the room is shared
  // for (a replica with only lower bands waiting gets none of it). Weighted: all bands.
  const bool strict = queue_.config().band_order == BandOrder::kStrict;
  size_t top = kBands;
  if (strict) {
    for (size_t b = 0; b < kBands && top == kBands; ++b) {
      bool any = own[b] > 0;
      for (const RoomPeer& p : fleet_.peers) any = any || p.queued[b] > 0;
      if (any) top = b;
    }
  }
  auto demand_of = [&](const std::array<uint32_t, kBands>& q) {
    if (strict) return top < kBands ? q[top] : 0u;
    uint32_t sum = 0;
    for (uint32_t x : q) sum += x;
    return sum;
  };
  const size_t n = fleet_.peers.size() + 1;
  demand_.assign(n, 0);
  shares_.assign(n, 0);
  for (size_t i = 0, p = 0; i < n; ++i) {
    demand_[i] = i == self_index_ ? demand_of(own) + unseen : demand_of(fleet_.peers[p++].queued);
  }
  const uint32_t room = room_slots(now) + unseen;
  room_shares(queue_.config().room_share, room, demand_, shares_);
  const uint32_t mine =
      room_allotment(shares_, self_index_, room_offset(now + fleet_.epoch_offset, window));
  if (unseen < mine) return true;
  ++room_holds_;
  // The share may grow when the window turns (a new offset) or when the oldest own
  // release leaves it.
  const Nanos t = now + fleet_.epoch_offset;
  Nanos retry = t >= 0 ? (t / window + 1) * window - fleet_.epoch_offset : now + window;
  if (!released_.empty()) retry = std::min(retry, released_.front() + window);
  room_retry_at_ = std::max(retry, now + 1);
  return false;
}

void FlowController::note_release(Nanos now) {
  if (sharing()) released_.push_back(now);
}

Decision FlowController::commit(const RouteRequest& request, const Decision& decision, Nanos now) {
  if (!decision.accepted()) return decision;
  if (Status s = router_.commit(request, decision, now); !s) {
    Decision rejected;
    rejected.reason = RejectReason::kDuplicateRequest;
    rejected.prompt_blocks = decision.prompt_blocks;
    return rejected;
  }
  return decision;
}

Decision FlowController::route_with_capacity(const RouteRequest& request, Nanos now, Rng& rng,
                                             Room room, bool dequeued, bool follow_cache) {
  // late_binding room (and cache): the router picks among the endpoints that have room by
  // this measure (its own saturation filter may find others unsaturated): the rest are
  // excluded for the one decision, beside what the request excludes itself (a retry's
  // failed endpoints). Nothing about the endpoints changes, so no other reader sees them
  // flip. late_binding any: the router's own choice.
  const EndpointPool& pool = router_.pool();
  const LateBinding binding = queue_.config().late_binding;
  excluded_.assign(request.excluded.begin(), request.excluded.end());
  reserve_.clear();
  // The cache reserve is for requests leaving into the room, not the sparse reserve.
  follow_cache = follow_cache && binding == LateBinding::kCache && room.requests == 0;
  if (follow_cache) wide_excluded_.assign(request.excluded.begin(), request.excluded.end());
  if (binding != LateBinding::kAny) {
    for (EndpointId id : pool.ids()) {
      const Endpoint& e = *pool.get(id);
      if (e.health != Health::kHealthy || !can_decode(e.spec.role) ||
          endpoint_has_room(e, now, room)) {
        continue;
      }
      excluded_.push_back(id);
      if (!follow_cache) continue;
      if (in_cache_reserve(e, now) && std::find(request.excluded.begin(), request.excluded.end(),
                                                id) == request.excluded.end()) {
        reserve_.push_back(id);
      } else {
        wide_excluded_.push_back(id);
      }
    }
  }
  RouteRequest r = request;
  r.excluded = excluded_;
  // Flow control decided that it goes: the saturation filter must not shed it again
  // (its measure of saturation differs from the queue's).
  if (r.criticality == Criticality::kSheddable) r.criticality = Criticality::kStandard;
  r.dequeued = dequeued;
  if (reserve_.empty()) return router_.route(r, now, rng);

  // late_binding cache: where it would go by room alone, and where the router would send
  // it among the endpoints with room and the cache reserve. The reserve was chosen by the
  // queue's bound, so the saturation filter must not drop it by its own measure: that
  // decision is taken as for a critical request (which keeps every endpoint with a short
  // queue). A reserve endpoint wins only for its cache: it holds more of the prompt, and
  // the prefill queued there plus the request's own ends sooner than where there is room.
  const Decision by_room = router_.decide(r, now, rng);
  RouteRequest wide_request = r;
  wide_request.excluded = wide_excluded_;
  wide_request.criticality = Criticality::kCritical;
  const Decision wide = router_.decide(wide_request, now, rng);
  const bool to_reserve = wide.accepted() && std::find(reserve_.begin(), reserve_.end(),
                                                       wide.endpoint) != reserve_.end();
  const bool follows_cache = by_room.accepted() && to_reserve && !wide.prefill_endpoint &&
                             !by_room.prefill_endpoint &&
                             wide.prefill_tokens < by_room.prefill_tokens &&
                             wide.predicted_prefill < by_room.predicted_prefill;
  return commit(r, follows_cache ? wide : by_room, now);
}

namespace {

FlowOutcome from_removed(const FlowQueue::Removed& r, Nanos now) {
  FlowOutcome o;
  o.kind = r.refusal == FlowRefusal::kNone ? FlowOutcome::Kind::kDispatched
                                           : FlowOutcome::Kind::kRefused;
  o.id = r.id;
  o.request = r.request;
  o.tenant = r.tenant;
  o.band = r.band;
  o.refusal = r.refusal;
  o.waited = now - r.enqueued_at;
  o.charged_output_tokens = r.charged_output_tokens;
  return o;
}

}  // namespace

FlowOutcome FlowController::route_now(const FlowRequest& request, Nanos now, Rng& rng) {
  const RouteRequest& rr = *request.request;
  FlowOutcome o;
  o.id = rr.id;
  o.request = &rr;
  o.tenant = request.tenant;
  o.band = rr.criticality;
  o.decision = queue_.config().enabled ? route_with_capacity(rr, now, rng, Room{})
                                       : router_.route(rr, now, rng);
  if (!o.decision.accepted()) {
    o.kind = FlowOutcome::Kind::kRefused;
    return o;
  }
  o.kind = FlowOutcome::Kind::kDispatched;
  note_release(now);
  if (queue_.config().enabled) {
    o.charged_output_tokens = queue_.output_tokens_charged(rr.expected_output_tokens);
    queue_.charge(request.tenant, request.weight, rr.prompt_tokens, o.charged_output_tokens, now);
  }
  return o;
}

FlowOutcome FlowController::admit(const FlowRequest& request, Nanos now, Rng& rng,
                                  std::vector<FlowOutcome>& out) {
  const RouteRequest& rr = *request.request;
  room_retry_at_.reset();
  if (!queue_.config().enabled ||
      (queue_.empty() && has_capacity(now) && may_release(now, rr.criticality))) {
    FlowOutcome now_out = route_now(request, now, rng);
    // Latency targets no endpoint is predicted to meet, action queue: the router refused
    // it `saturated`; it waits in the queue like a request that found no capacity.
    const LatencyTargetsConfig& t = router_.config().latency_targets;
    const bool waits = queue_.config().enabled && t.enabled && t.action == SloAction::kQueue &&
                       rr.has_targets() && now_out.kind == FlowOutcome::Kind::kRefused &&
                       now_out.decision.reason == RejectReason::kSaturated;
    if (!waits) return now_out;
  }
  FlowOutcome o;
  o.id = rr.id;
  o.request = &rr;
  o.band = rr.criticality;
  o.kind = FlowOutcome::Kind::kRefused;
  if (rr.criticality == Criticality::kSheddable && queue_.config().shed_sheddable) {
    o.decision.reason = RejectReason::kSaturated;
    o.tenant = request.tenant;
    return o;
  }
  if (router_.config().early_reject.enabled && router_.pool().size() > 0) {
    // Refused before it waits, not after: early rejection's verdict now.
    Decision d = router_.decide(rr, now, rng);
    if (d.reason == RejectReason::kDecodeFull) {
      o.decision = d;
      o.tenant = request.tenant;
      return o;
    }
  }
  removed_.clear();
  o.refusal = queue_.enqueue({.id = rr.id,
                              .tenant = request.tenant,
                              .weight = request.weight,
                              .band = rr.criticality,
                              .prompt_tokens = rr.prompt_tokens,
                              .expected_output_tokens = rr.expected_output_tokens,
                              .deadline = request.deadline,
                              .ttft_target = rr.ttft_target,
                              .request = &rr},
                             now, removed_);
  for (const FlowQueue::Removed& r : removed_) out.push_back(from_removed(r, now));
  o.tenant = request.tenant;
  if (o.refusal != FlowRefusal::kNone) return o;
  o.kind = FlowOutcome::Kind::kQueued;
  // Capacity may be there already (it appeared without a dispatch call): the queue's
  // order decides whether this request is the one to go.
  const size_t first = out.size();
  dispatch(now, rng, out);
  auto self = std::find_if(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(),
                           [&](const FlowOutcome& x) { return x.id == rr.id; });
  if (self != out.end()) {
    o = *self;
    out.erase(self);
  }
  return o;
}

size_t FlowController::dispatch(Nanos now, Rng& rng, std::vector<FlowOutcome>& out) {
  size_t n = 0;
  room_retry_at_.reset();
  const uint32_t sparse_reserve = queue_.config().sparse_reserve;
  const bool cache = queue_.config().late_binding == LateBinding::kCache;
  while (!queue_.empty()) {
    Room room{};
    bool follow_cache = false;
    if (!has_capacity(now)) {
      // Full: only a sparse request may go, into the reserve (with late_binding cache,
      // above the cache reserve, which backlogged tenants' requests may fill).
      if (sparse_reserve == 0) break;
      const auto next = queue_.peek(now);
      if (!next || !next->sparse || next->request == nullptr) break;
      const RouteRequest& rr = *next->request;
      room = {.requests = sparse_reserve + (cache ? queue_.config().cache_reserve : 0),
              .blocks = router_.pool().request_blocks(rr.prompt_tokens, rr.expected_output_tokens,
                                                      rr.keys.size())};
      if (!has_room(now, room)) break;
    } else {
      if (!may_release(now, std::nullopt)) {
        break;  // this replica's share of the room is used (room sharing)
      }
      if (cache) {
        // Only a backlogged tenant's request follows its cache into an engine's queue; a
        // tenant within its share goes where there is room.
        const auto next = queue_.peek(now);
        follow_cache = next && next->backlogged;
      }
    }
    auto r = queue_.pop(now);
    if (!r) break;
    ++n;
    FlowOutcome o = from_removed(*r, now);
    o.decision = route_with_capacity(*r->request, now, rng, room, /*dequeued=*/true, follow_cache);
    if (!o.decision.accepted()) {
      o.kind = FlowOutcome::Kind::kRefused;
    } else if (room.requests == 0) {
      note_release(now);
    }
    out.push_back(o);
  }
  return n;
}

void FlowController::expire(Nanos now, std::vector<FlowOutcome>& out) {
  removed_.clear();
  queue_.expire(now, removed_);
  for (const FlowQueue::Removed& r : removed_) out.push_back(from_removed(r, now));
}

}  // namespace kvgate::route
