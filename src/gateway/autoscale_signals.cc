#include "gateway/autoscale_signals.h"

namespace kvgate::gateway {

std::vector<EndpointView> view_endpoints(const route::Router& router) {
  std::vector<EndpointView> out;
  const route::EndpointPool& pool = router.pool();
  out.reserve(pool.size());
  for (route::EndpointId id : pool.ids()) {
    const route::Endpoint* e = pool.get(id);
    if (e == nullptr) continue;
    out.push_back({.id = id,
                   .url = e->spec.url,
                   .health = e->health,
                   .metrics = e->metrics,
                   .in_flight = e->load.in_flight,
                   .added_at = e->added_at});
  }
  return out;
}

scale::PoolSignals build_signals(std::span<const EndpointView> endpoints,
                                 const scale::UsageRates& usage, Nanos now, Nanos max_age) {
  scale::PoolSignals s;
  double kv_sum = 0;
  int kv_count = 0;
  for (const EndpointView& e : endpoints) {
    if (e.health == route::Health::kDraining || !e.metrics) continue;
    if (now - e.metrics->scraped_at > max_age) continue;
    s.waiting += e.metrics->waiting;
    s.running += e.metrics->running;
    kv_sum += e.metrics->kv_usage;
    ++kv_count;
  }
  s.kv_usage = kv_count > 0 ? kv_sum / kv_count : 0;
  s.prompt_tokens_per_s = usage.prompt_tokens_per_s;
  s.generation_tokens_per_s = usage.generation_tokens_per_s;
  s.mean_prompt_tokens = usage.mean_prompt_tokens;
  s.mean_generation_tokens = usage.mean_generation_tokens;
  s.finished_per_s = usage.requests_per_s;
  s.ttft = usage.ttft;
  s.itl = usage.itl;
  return s;
}

std::vector<scale::ReplicaSignal> replicas_from_endpoints(std::span<const EndpointView> endpoints,
                                                          Nanos clock_offset) {
  std::vector<scale::ReplicaSignal> out;
  out.reserve(endpoints.size());
  for (const EndpointView& e : endpoints) {
    scale::ReplicaSignal r;
    r.id = e.url;
    r.launched_at = e.added_at + clock_offset;
    // Ready "before launch": nobody launched it, so it teaches the startup tracker no
    // startup time (StartupTracker skips such replicas).
    const Nanos never_launched = r.launched_at - 1;
    r.in_flight = e.in_flight;
    switch (e.health) {
      case route::Health::kHealthy:
      case route::Health::kStandby:  // ready, kept out of routing by the autoscaler
        r.phase = scale::ReplicaPhase::kReady;
        r.ready_at = never_launched;
        break;
      case route::Health::kDraining:
        r.phase = scale::ReplicaPhase::kDraining;
        r.ready_at = never_launched;
        break;
      case route::Health::kUnhealthy:
        r.phase = scale::ReplicaPhase::kStarting;
        break;
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace kvgate::gateway
