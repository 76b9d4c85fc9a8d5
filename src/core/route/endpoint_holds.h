// EndpointHolds: why each endpoint of a pool is kept out of routing, and the one Health
// the router gets from that. One rule set for both shells: `kvgate serve`
// (gateway/data/pool_routing.h, set from gateway/data/pool_runtime.cc and
// gateway/control/warmup.cc) and `kvgate sim` (sim/cluster_sim.cc) keep an EndpointHolds
// beside their router and set an endpoint's health only from it, so the warm-up hold, the
// autoscaler's standby, draining and the circuit breaker combine the same way in both.
//
// An endpoint may be held for several reasons at once; releasing one leaves the others.
// Its health is that of the first hold it has, in this order:
//
//   kDrain    leaving the pool (removal, scale-down) or discovery's     -> Health::kDraining
//             grace: requests in flight finish, no new ones
//   kWarmup   warming up before traffic (core/kv/warmup_run.h)         -> Health::kUnhealthy
//   kBreaker  its circuit breaker is open (circuit_breaker.h)          -> Health::kUnhealthy
//   kStandby  the autoscaler's standby (core/scale/standby.h)          -> Health::kStandby
//   none                                                               -> Health::kHealthy
//
// So a breaker that half-opens does not end a warm-up or a standby, a warm-up that ends
// does not put a draining endpoint back, and the standby is taken from and given back to
// endpoints held for nothing else (standby_candidate): plan_standby picks the youngest
// of them (scale::pick_standby), in the caller's order.
//
// A drain is over when the endpoint's requests in flight are, or at its deadline
// (drain_over; the simulator's drains have none: kNoDrainDeadline).
//
//   EndpointHolds holds;
//   holds.reset(id);                                          // joined: no hold
//   if (auto h = holds.set(id, Hold::kWarmup, true)) pool.set_health(id, *h);
//   ...
//   if (auto h = holds.set(id, Hold::kWarmup, false)) pool.set_health(id, *h);  // admitted
//
// Pure and deterministic; not thread-safe (the gateway's pool strand owns its copy).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/common/time.h"
#include "core/route/endpoint.h"

namespace kvgate::route {

// Bit flags; the order of the list above is the precedence.
enum class Hold : uint8_t {
  kDrain = 1,
  kWarmup = 2,
  kBreaker = 4,
  kStandby = 8,
};

// The health of an endpoint with the holds `mask` (an OR of Hold values).
Health health_of(uint8_t mask);

class EndpointHolds {
 public:
  // A new endpoint, a reused id or a removed one: no hold (Health::kHealthy).
  void reset(EndpointId id);
  // Sets (`on`) or releases one hold of `id`. Returns the endpoint's new health when it
  // changed (the caller gives it to the router), else nullopt.
  std::optional<Health> set(EndpointId id, Hold hold, bool on);
  bool has(EndpointId id, Hold hold) const;
  Health health(EndpointId id) const;
  // Held for nothing but the standby, if at all: the standby may take it or give it back.
  bool standby_candidate(EndpointId id) const;

 private:
  uint8_t mask(EndpointId id) const { return id < masks_.size() ? masks_[id] : 0; }
  std::vector<uint8_t> masks_;  // by EndpointId
};

// The autoscaler's standby (the horizon policy's `standby` replicas): among `ids` (the
// caller's ready endpoints, in its order; `ready_at[i]` when ids[i] became ready), the
// standby candidates, `count` of them the youngest, are held in standby and the other
// candidates released; an endpoint of `ids` held for something else loses its standby
// hold (so that it returns to routing when that hold ends). Returns the health changes
// for the router, in `ids` order, and how many candidates are now in standby.
// REQUIRES: ids.size() == ready_at.size().
struct StandbyPlan {
  struct Change {
    EndpointId id = 0;
    Health health = Health::kHealthy;
  };
  std::vector<Change> changes;
  uint32_t in_standby = 0;
};
StandbyPlan plan_standby(EndpointHolds& holds, std::span<const EndpointId> ids,
                         std::span<const Nanos> ready_at, int32_t count);

// A drain without a deadline (the simulator's).
inline constexpr Nanos kNoDrainDeadline = INT64_MAX;

// A drain is over: no request in flight is left, or `deadline` has passed.
inline bool drain_over(uint32_t in_flight, Nanos now, Nanos deadline) {
  return in_flight == 0 || now >= deadline;
}

}  // namespace kvgate::route
