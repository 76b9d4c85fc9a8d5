// Effective load: one endpoint's load as the router should believe it right now.
//
// The last scrape plus what the router itself sent since (requests in flight now minus
// in flight at the scrape; KV blocks likewise), so that between two scrapes a burst is
// spread rather than all sent to the endpoint that looked idlest. Metrics older than
// SaturationConfig::metrics_max_age make the endpoint count as saturated.
#pragma once

#include "core/common/time.h"
#include "core/route/config.h"
#include "core/route/endpoint.h"

namespace kvgate::route {

struct EffectiveLoad {
  double waiting = 0;     // scraped waiting + requests routed since the scrape
  double running = 0;     // scraped running
  double kv_usage = 0;    // scraped usage + blocks added since / capacity, clamped to 0..1
  bool stale = false;     // metrics too old (or never came): counts as saturated
  double saturation = 0;  // max(waiting / queue_threshold, kv_usage / kv_threshold);
                          // +infinity when stale
  bool saturated() const { return saturation >= 1.0; }
};

EffectiveLoad effective_load(const Endpoint& endpoint, Nanos now, const SaturationConfig& config);

}  // namespace kvgate::route
