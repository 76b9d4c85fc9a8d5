#include "core/scale/cold_start.h"

#include <algorithm>
#include <tuple>

namespace kvgate::scale {

void StartupTracker::observe(const std::vector<ReplicaSignal>& replicas) {
  std::unordered_set<std::string> now_ready;
  for (const ReplicaSignal& r : replicas) {
    if (r.phase == ReplicaPhase::kStarting) continue;
    now_ready.insert(r.id);
    if (seen_ready_.contains(r.id) || r.ready_at < r.launched_at) continue;
    samples_.push_back(r.ready_at - r.launched_at);
    if (samples_.size() > kKeep) samples_.pop_front();
  }
  seen_ready_ = std::move(now_ready);
}

Nanos StartupTracker::expected() const {
  if (samples_.empty()) return prior_;
  std::vector<Nanos> v(samples_.begin(), samples_.end());
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  if (v.size() % 2 == 1) return v[mid];
  const Nanos upper = v[mid];
  const Nanos lower = *std::max_element(v.begin(), v.begin() + mid);
  return lower + (upper - lower) / 2;
}

namespace {

bool is_stuck(const ReplicaSignal& r, Nanos now, Nanos expected, double stuck_factor) {
  return r.phase == ReplicaPhase::kStarting && expected > 0 &&
         static_cast<double>(now - r.launched_at) > stuck_factor * static_cast<double>(expected);
}

}  // namespace

Capacity account_capacity(const std::vector<ReplicaSignal>& replicas, Nanos now, Nanos horizon,
                          Nanos expected_startup, double stuck_factor) {
  Capacity c;
  for (const ReplicaSignal& r : replicas) {
    switch (r.phase) {
      case ReplicaPhase::kReady:
        ++c.ready;
        break;
      case ReplicaPhase::kDraining:
        break;
      case ReplicaPhase::kStarting:
        if (is_stuck(r, now, expected_startup, stuck_factor)) {
          ++c.stuck;
        } else if (std::max(r.launched_at + expected_startup, now) <= now + horizon) {
          ++c.arriving;
        } else {
          ++c.late;
        }
        break;
    }
  }
  return c;
}

std::vector<std::string> select_victims(const std::vector<ReplicaSignal>& replicas, int32_t count,
                                        Nanos now, const VictimPolicy& policy) {
  // (class, key1, key2, id): lower goes first.
  using Rank = std::tuple<int, int64_t, int64_t, const std::string*>;
  std::vector<Rank> ranked;
  for (const ReplicaSignal& r : replicas) {
    switch (r.phase) {
      case ReplicaPhase::kDraining:
        continue;
      case ReplicaPhase::kStarting:
        if (is_stuck(r, now, policy.expected_startup, policy.stuck_factor)) {
          ranked.emplace_back(0, r.launched_at, 0, &r.id);  // longest stuck first
        } else {
          ranked.emplace_back(3, -r.launched_at, 0, &r.id);  // least boot time sunk first
        }
        break;
      case ReplicaPhase::kReady: {
        const bool young = now - r.ready_at < policy.young_age;
        // Fewest in flight first; among equals the one ready longest (warm, but its
        // youth protection long gone; and it keeps the choice stable over time).
        ranked.emplace_back(young ? 2 : 1, r.in_flight, r.ready_at, &r.id);
        break;
      }
    }
  }
  std::sort(ranked.begin(), ranked.end(), [](const Rank& a, const Rank& b) {
    if (std::get<0>(a) != std::get<0>(b)) return std::get<0>(a) < std::get<0>(b);
    if (std::get<1>(a) != std::get<1>(b)) return std::get<1>(a) < std::get<1>(b);
    if (std::get<2>(a) != std::get<2>(b)) return std::get<2>(a) < std::get<2>(b);
    return *std::get<3>(a) < *std::get<3>(b);
  });
  std::vector<std::string> out;
  for (const Rank& r : ranked) {
    if (static_cast<int32_t>(out.size()) >= count) break;
    out.push_back(*std::get<3>(r));
  }
  return out;
}

}  // namespace kvgate::scale
