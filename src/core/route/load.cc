#include "core/route/load.h"

#include <algorithm>
#include <limits>

namespace kvgate::route {

EffectiveLoad effective_load(const Endpoint& e, Nanos now, const SaturationConfig& config) {
  EffectiveLoad out;
  const Nanos seen_at = e.metrics ? e.metrics->scraped_at : e.added_at;
  out.stale = config.metrics_max_age > 0 && now - seen_at > config.metrics_max_age;

  // What the router added since the scrape (or since the endpoint joined, when never
  // scraped). Had the engine room then (nothing waiting, KV below the threshold), the
  // new requests most likely started running; else they queue behind the others.
  const double routed_since =
      e.load.in_flight > e.in_flight_at_scrape ? e.load.in_flight - e.in_flight_at_scrape : 0;
  const double waiting = e.metrics ? e.metrics->waiting : 0;
  const bool had_room = waiting == 0 && (!e.metrics || e.metrics->kv_usage < config.kv_threshold);
  out.waiting = waiting + (had_room ? 0 : routed_since);
  out.running = (e.metrics ? e.metrics->running : 0) + (had_room ? routed_since : 0);
  double kv = e.metrics ? e.metrics->kv_usage : 0;
  if (e.spec.kv_capacity_blocks > 0 && e.load.active_decode_blocks > e.decode_blocks_at_scrape) {
    kv += static_cast<double>(e.load.active_decode_blocks - e.decode_blocks_at_scrape) /
          e.spec.kv_capacity_blocks;
  }
  out.kv_usage = std::clamp(kv, 0.0, 1.0);
  out.saturation = out.stale ? std::numeric_limits<double>::infinity()
                             : std::max(out.waiting / config.queue_threshold,
                                        out.kv_usage / config.kv_threshold);
  return out;
}

}  // namespace kvgate::route
