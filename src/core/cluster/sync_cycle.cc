#include "core/cluster/sync_cycle.h"

#include <algorithm>

namespace kvgate::cluster {

SyncCycle::SyncCycle(Options options) : options_(options), wait_(options.tick) {
  options_.tick = std::max<Nanos>(options_.tick, 1);
  options_.min_gap = std::clamp<Nanos>(options_.min_gap, 0, options_.tick);
  options_.idle_max = std::max(options_.idle_max, options_.tick);
  wait_ = options_.tick;
}

void SyncCycle::started(Nanos now) {
  last_start_ = now;
  in_flight_ = true;
}

void SyncCycle::snap() {
  if (wait_ > options_.tick) ++snaps_;
  wait_ = options_.tick;
}

Nanos SyncCycle::done(Nanos now, bool moved, bool more) {
  in_flight_ = false;
  if (moved || wake_at_) {
    snap();
  } else {
    // Doubling, capped: `idle_max` is reached after log2(idle_max / tick) idle cycles.
    wait_ = std::min(options_.idle_max, 2 * wait_);
  }
  Nanos next = last_start_ + wait_;
  if (wake_at_) next = std::min(next, *wake_at_);
  wake_at_.reset();
  if (more) next = now;
  return std::max(next, now);
}

std::optional<Nanos> SyncCycle::woken(Nanos now, bool full) {
  snap();
  const Nanos at = std::max(now, last_start_ + (full ? options_.min_gap : options_.tick));
  if (in_flight_) {
    wake_at_ = wake_at_ ? std::min(*wake_at_, at) : at;
    return std::nullopt;
  }
  return at;
}

}  // namespace kvgate::cluster
