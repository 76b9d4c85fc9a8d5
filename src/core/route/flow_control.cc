#include "core/route/flow_control.h"

#include <algorithm>

#include "core/route/load.h"

namespace kvgate::route {

FlowController::FlowController(Router& router, FlowQueueConfig config)
    : router_(router), queue_(config) {}

bool FlowController::has_capacity(Nanos now) const {
  const EndpointPool& pool = router_.pool();
  const SaturationConfig& sat = router_.config().saturation;
  for (EndpointId id : pool.ids()) {
    const Endpoint& e = *pool.get(id);
    if (e.health != Health::kHealthy || !can_decode(e.spec.role)) continue;
    const EffectiveLoad load = effective_load(e, now, sat);
    if (load.stale) continue;
    const double routed_since =
        e.load.in_flight > e.in_flight_at_scrape ? e.load.in_flight - e.in_flight_at_scrape : 0;
    const double waiting = (e.metrics ? e.metrics->waiting : 0) + routed_since;
    if (std::max(waiting / sat.queue_threshold, load.kv_usage / sat.kv_threshold) < 1.0) {
      return true;
    }
  }
  return false;
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
  o.decision = router_.route(rr, now, rng);
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
    return route_now(request, now, rng);
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
  while (!queue_.empty() && has_capacity(now)) {
    auto r = queue_.pop(now);
    if (!r) break;
    ++n;
    FlowOutcome o = from_removed(*r, now);
    o.decision = router_.route(*r->request, now, rng);
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
