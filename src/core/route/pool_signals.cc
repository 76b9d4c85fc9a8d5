#include "core/route/pool_signals.h"

#include <algorithm>

namespace kvgate::route {

std::vector<EndpointView> view_endpoints(const EndpointPool& pool) {
  std::vector<EndpointView> out;
  out.reserve(pool.size());
  for (EndpointId id : pool.ids()) {
    const Endpoint* e = pool.get(id);
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

Nanos scrape_max_age(Nanos scrape_interval) {
  return std::max<Nanos>(2 * kSecond, 5 * scrape_interval);
}

scale::PoolSignals build_pool_signals(std::span<const EndpointView> endpoints,
                                      const PoolInputs& inputs, Nanos now) {
  scale::PoolSignals s;
  double kv_sum = 0;
  int kv_count = 0;
  for (const EndpointView& e : endpoints) {
    if (e.health == Health::kDraining || !e.metrics) continue;
    if (now - e.metrics->scraped_at > inputs.max_age) continue;
    s.waiting += e.metrics->waiting;
    s.running += e.metrics->running;
    kv_sum += e.metrics->kv_usage;
    ++kv_count;
  }
  s.waiting += inputs.queued;
  s.kv_usage = kv_count > 0 ? kv_sum / kv_count : 0;
  const scale::UsageRates& u = inputs.usage;
  s.prompt_tokens_per_s = u.prompt_tokens_per_s;
  s.generation_tokens_per_s = u.generation_tokens_per_s;
  s.mean_prompt_tokens = u.mean_prompt_tokens;
  s.mean_generation_tokens = u.mean_generation_tokens;
  s.generation_tokens_sd = u.generation_tokens_sd;
  s.finished_per_s = u.requests_per_s;
  s.arrival_rate = inputs.arrival_rate;
  s.ttft = u.ttft;
  s.itl = u.itl;
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
      case Health::kHealthy:
      case Health::kStandby:  // ready, kept out of routing by the autoscaler
        r.phase = scale::ReplicaPhase::kReady;
        r.ready_at = never_launched;
        break;
      case Health::kDraining:
        r.phase = scale::ReplicaPhase::kDraining;
        r.ready_at = never_launched;
        break;
      case Health::kUnhealthy:
        r.phase = scale::ReplicaPhase::kStarting;
        break;
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace kvgate::route
