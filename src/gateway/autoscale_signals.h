// The autoscaler's signals from the running gateway: what each endpoint of the pool
// reported in its last scrape (waiting, running, KV usage), what the router holds on it,
// and the token rates and latencies the gateway measured over the window.
//
// Two steps, so that the router is read on its strand and nothing else is:
//   on the strand:         std::vector<EndpointView> v = view_endpoints(router);
//   on the autoscaler's:   PoolSignals s = build_signals(v, usage.rates(), now, max_age);
//                          s.replicas = actuator replicas (or replicas_from_endpoints(v));
//
// Times: EndpointView carries router time (monotonic_now()); `clock_offset` turns it into
// the autoscaler's clock (see pool_autoscaler.h).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/common/time.h"
#include "core/route/endpoint.h"
#include "core/route/router.h"
#include "core/scale/signals.h"
#include "core/scale/usage_window.h"

namespace kvgate::gateway {

struct EndpointView {
  route::EndpointId id = 0;
  std::string url;
  route::Health health = route::Health::kHealthy;
  std::optional<route::ScrapedMetrics> metrics;  // the last good scrape
  uint32_t in_flight = 0;                        // requests the router has routed there
  Nanos added_at = 0;
};

// Every endpoint of the router's pool, by id. REQUIRES: on the router's strand.
std::vector<EndpointView> view_endpoints(const route::Router& router);

// The pool's signals, replicas left empty. Sums and means are over the endpoints that
// are not draining and whose last scrape is at most `max_age` old at `now` (router time):
// a replica that stopped answering does not keep its last queue forever. Token rates,
// mean lengths, TTFT and ITL come from `usage`.
scale::PoolSignals build_signals(std::span<const EndpointView> endpoints,
                                 const scale::UsageRates& usage, Nanos now, Nanos max_age);

// For a pool whose endpoints are its replicas and nobody launches them (actuator none):
// a healthy endpoint is a ready replica, a draining one draining, an unhealthy one
// starting since it was added (it turns "stuck" if it stays down). Ids are the URLs;
// in_flight is the router's.
std::vector<scale::ReplicaSignal> replicas_from_endpoints(std::span<const EndpointView> endpoints,
                                                          Nanos clock_offset);

}  // namespace kvgate::gateway
