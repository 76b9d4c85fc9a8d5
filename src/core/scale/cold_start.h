// Cold starts: a new replica takes minutes to become useful (vLLM: 68 s to 430 s on
// H100s, depending on model size and whether compile caches survived), and the
// autoscaler must act accordingly.
//
//   - StartupTracker learns the pool's time to ready (median of the last 32 replicas
//     that became ready, launched_at -> ready_at), starting from a configured prior.
//   - account_capacity: a starting replica counts as capacity arriving at its expected
//     ready time, launched_at + median startup. Replicas that will be up by the horizon
//     count, so the autoscaler does not keep adding replicas while earlier ones boot.
//     One that has been starting for more than stuck_factor x the median is presumed
//     stuck: it does not count, and it is the first to go on scale-down.
//   - select_victims: which replicas to drain on scale-down. Stuck replicas first; then
//     ready replicas past their youth (young_age since ready), fewest requests in flight
//     first (they drain fastest); then young ready replicas, so a pool that just paid for
//     a cold start does not throw it away on the next dip; starting replicas last.
//
// Thread-safety: none.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/common/time.h"
#include "core/scale/signals.h"

namespace kvgate::scale {

class StartupTracker {
 public:
  explicit StartupTracker(Nanos prior) : prior_(prior) {}

  // Learns from replicas that became ready since the last call (by id).
  void observe(const std::vector<ReplicaSignal>& replicas);
  // Median observed startup time, or the prior before any observation.
  Nanos expected() const;
  size_t observations() const { return samples_.size(); }

 private:
  static constexpr size_t kKeep = 32;
  Nanos prior_;
  std::deque<Nanos> samples_;
  std::unordered_set<std::string> seen_ready_;
};

struct Capacity {
  int32_t ready = 0;
  int32_t arriving = 0;  // starting, expected ready by the horizon
  int32_t late = 0;      // starting, expected after the horizon
  int32_t stuck = 0;     // starting for more than stuck_factor x expected startup
  int32_t total() const { return ready + arriving + late + stuck; }
  // Counted as capacity at the horizon.
  int32_t at_horizon() const { return ready + arriving; }
};

Capacity account_capacity(const std::vector<ReplicaSignal>& replicas, Nanos now, Nanos horizon,
                          Nanos expected_startup, double stuck_factor);

struct VictimPolicy {
  Nanos young_age = 300 * kSecond;  // ready for less than this: protected
  Nanos expected_startup = 0;
  double stuck_factor = 3.0;
};

// Ids of `count` non-draining replicas to drain, in the order above; ties broken by id
// so the choice is deterministic. Returns fewer when there are not that many.
std::vector<std::string> select_victims(const std::vector<ReplicaSignal>& replicas, int32_t count,
                                        Nanos now, const VictimPolicy& policy);

}  // namespace kvgate::scale
