// The autoscaler's view of a pool from its router: what each endpoint reported in its
// last scrape (waiting, running, KV usage), what the router holds on it, and how the
// pool's signals are summed from them. `kvgate serve` and `kvgate sim` both build their
// scale::PoolSignals here, so the autoscaler decides on the same figures in both.
//
// Two steps, so that the router is read where it lives and nothing else is:
//   on the router's strand:  std::vector<EndpointView> v = view_endpoints(router.pool());
//   anywhere:                PoolSignals s = build_pool_signals(v, {.usage = ..., ...}, now);
//                            s.replicas = the actuator's replicas (or replicas_from_endpoints(v));
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/common/time.h"
#include "core/route/endpoint.h"
#include "core/route/endpoint_pool.h"
#include "core/scale/signals.h"
#include "core/scale/usage_window.h"

namespace kvgate::route {

// One endpoint as the router holds it, copied out of the pool.
struct EndpointView {
  EndpointId id = 0;
  std::string url;
  Health health = Health::kHealthy;
  std::optional<ScrapedMetrics> metrics;  // the last good scrape
  uint32_t in_flight = 0;                 // requests the router has routed there
  Nanos added_at = 0;
};

// Every endpoint of the pool, by id. REQUIRES: where the pool may be read (its strand).
std::vector<EndpointView> view_endpoints(const EndpointPool& pool);

// The age after which an endpoint's last scrape no longer counts as its load: a replica
// that stopped answering must not keep its last queue forever. Five scrape intervals, at
// least 2 s.
Nanos scrape_max_age(Nanos scrape_interval);

// What the pool's signals are built from besides its endpoints.
struct PoolInputs {
  scale::UsageRates usage;  // token rates, lengths, TTFT and ITL over the window
  // Requests waiting in the gateway's own queue for the pool (flow control): with no
  // replica they are all there is to see (scale from zero).
  uint32_t queued = 0;
  // Requests that arrived for the pool per second over the last control interval, when
  // the caller counts them (both shells do); nullopt leaves the horizon policy to
  // estimate it.
  std::optional<double> arrival_rate;
  Nanos max_age = 0;  // scrape_max_age(scrape interval)
};

// The pool's signals, replicas left empty. Waiting and running are summed, KV usage
// averaged, over the endpoints that are not draining and whose last scrape is at most
// `max_age` old at `now` (router time); `queued` is added to waiting. Token rates, mean
// lengths and their spread, TTFT and ITL come from `usage`.
scale::PoolSignals build_pool_signals(std::span<const EndpointView> endpoints,
                                      const PoolInputs& inputs, Nanos now);

// For a pool whose endpoints are its replicas and nobody launches them (actuator none):
// a healthy endpoint is a ready replica, a draining one draining, an unhealthy one
// starting since it was added (it turns "stuck" if it stays down). Ids are the URLs;
// in_flight is the router's. `clock_offset` turns router time into the autoscaler's.
std::vector<scale::ReplicaSignal> replicas_from_endpoints(std::span<const EndpointView> endpoints,
                                                          Nanos clock_offset);

}  // namespace kvgate::route
