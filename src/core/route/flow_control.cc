#include "core/route/flow_control.h"

#include <algorithm>

#include "core/route/load.h"

namespace kvgate::route {

FlowController::FlowController(Router& router, FlowQueueConfig config)
    : router_(router), queue_(config) {}

bool FlowController::endpoint_has_room(const Endpoint& e, Nanos now, Room room) const {
  const SaturationConfig& sat = router_.config().saturation;
  if (e.health != Health::kHealthy || !can_decode(e.spec.role)) return false;
  const EffectiveLoad load = effective_load(e, now, sat);
  if (load.stale) return false;
  // The engine's queue as the scrape showed it, plus the requests routed since that have
  // not started (no first token), less one per request finished since (it made room for
  // one that waited).
  const double routed_since =
      static_cast<double>(e.load.in_flight) - static_cast<double>(e.in_flight_at_scrape);
  const double waiting =
      std::max(0.0, (e.metrics ? e.metrics->waiting : 0) +
                        std::min(routed_since, static_cast<double>(e.unstarted_since_scrape)));
  double kv = e.metrics ? e.metrics->kv_usage : 0;
  if (e.spec.kv_capacity_blocks > 0) {
    kv += (static_cast<double>(e.load.active_decode_blocks) -
           static_cast<double>(e.decode_blocks_at_scrape)) /
          e.spec.kv_capacity_blocks;
  }
  if (room.requests == 0) {
    return std::max(waiting / sat.queue_threshold, kv / sat.kv_threshold) < 1.0;
  }
  // The reserve: the request must fit in what is left of the KV cache, else it would
  // wait inside the engine, where it can no longer be re-placed.
  const double need = e.spec.kv_capacity_blocks > 0
                          ? static_cast<double>(room.blocks) / e.spec.kv_capacity_blocks
                          : 0;
  return waiting < sat.queue_threshold + room.requests &&
         kv + need <= std::max(1.0, sat.kv_threshold);
}

bool FlowController::has_room(Nanos now, Room room) const {
  const EndpointPool& pool = router_.pool();
  for (EndpointId id : pool.ids()) {
    if (endpoint_has_room(*pool.get(id), now, room)) return true;
  }
  return false;
}

Decision FlowController::route_with_capacity(const RouteRequest& request, Nanos now, Rng& rng,
                                             Room room, bool dequeued) {
  // late_binding room: the router picks among the endpoints that have room by this
  // measure (its own saturation filter may find others unsaturated): the rest are
  // excluded for the one decision, beside what the request excludes itself (a retry's
  // failed endpoints). Nothing about the endpoints changes, so no other reader sees them
  // flip. late_binding any: the router's own choice.
  const EndpointPool& pool = router_.pool();
  excluded_.assign(request.excluded.begin(), request.excluded.end());
  if (queue_.config().late_binding == LateBinding::kRoom) {
    for (EndpointId id : pool.ids()) {
      const Endpoint& e = *pool.get(id);
      if (e.health == Health::kHealthy && can_decode(e.spec.role) &&
          !endpoint_has_room(e, now, room)) {
        excluded_.push_back(id);
      }
    }
  }
  RouteRequest r = request;
  r.excluded = excluded_;
  // Flow control decided that it goes: the saturation filter must not shed it again
  // (its measure of saturation differs from the queue's).
  if (r.criticality == Criticality::kSheddable) r.criticality = Criticality::kStandard;
  r.dequeued = dequeued;
  return router_.route(r, now, rng);
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
  if (queue_.config().enabled) {
    o.charged_output_tokens = queue_.output_tokens_charged(rr.expected_output_tokens);
    queue_.charge(request.tenant, request.weight, rr.prompt_tokens, o.charged_output_tokens, now);
  }
  return o;
}

FlowOutcome FlowController::admit(const FlowRequest& request, Nanos now, Rng& rng,
                                  std::vector<FlowOutcome>& out) {
  const RouteRequest& rr = *request.request;
  if (!queue_.config().enabled || (queue_.empty() && has_capacity(now))) {
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
  const uint32_t sparse_reserve = queue_.config().sparse_reserve;
  while (!queue_.empty()) {
    Room room{};
    if (!has_capacity(now)) {
      // Full: only a sparse request may go, into the reserve.
      if (sparse_reserve == 0) break;
      const auto next = queue_.peek(now);
      if (!next || !next->sparse || next->request == nullptr) break;
      const RouteRequest& rr = *next->request;
      room = {.requests = sparse_reserve,
              .blocks = router_.pool().request_blocks(rr.prompt_tokens, rr.expected_output_tokens,
                                                      rr.keys.size())};
      if (!has_room(now, room)) break;
    }
    auto r = queue_.pop(now);
    if (!r) break;
    ++n;
    FlowOutcome o = from_removed(*r, now);
    o.decision = route_with_capacity(*r->request, now, rng, room, /*dequeued=*/true);
    if (!o.decision.accepted()) o.kind = FlowOutcome::Kind::kRefused;
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
