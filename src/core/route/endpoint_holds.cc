#include "core/route/endpoint_holds.h"

#include "core/scale/standby.h"

namespace kvgate::route {

namespace {

constexpr uint8_t bit(Hold h) { return static_cast<uint8_t>(h); }

}  // namespace

Health health_of(uint8_t mask) {
  if (mask & bit(Hold::kDrain)) return Health::kDraining;
  if (mask & (bit(Hold::kWarmup) | bit(Hold::kBreaker))) return Health::kUnhealthy;
  if (mask & bit(Hold::kStandby)) return Health::kStandby;
  return Health::kHealthy;
}

void EndpointHolds::reset(EndpointId id) {
  if (id < masks_.size()) masks_[id] = 0;
}

std::optional<Health> EndpointHolds::set(EndpointId id, Hold hold, bool on) {
  if (masks_.size() <= id) masks_.resize(static_cast<size_t>(id) + 1, 0);
  const uint8_t before = masks_[id];
  const uint8_t after =
      on ? static_cast<uint8_t>(before | bit(hold)) : static_cast<uint8_t>(before & ~bit(hold));
  masks_[id] = after;
  const Health was = health_of(before);
  const Health now = health_of(after);
  if (was == now) return std::nullopt;
  return now;
}

bool EndpointHolds::has(EndpointId id, Hold hold) const { return (mask(id) & bit(hold)) != 0; }

Health EndpointHolds::health(EndpointId id) const { return health_of(mask(id)); }

bool EndpointHolds::standby_candidate(EndpointId id) const {
  return (mask(id) & ~bit(Hold::kStandby)) == 0;
}

StandbyPlan plan_standby(EndpointHolds& holds, std::span<const EndpointId> ids,
                         std::span<const Nanos> ready_at, int32_t count) {
  std::vector<EndpointId> candidates;
  std::vector<Nanos> candidate_ready_at;
  StandbyPlan plan;
  for (size_t i = 0; i < ids.size() && i < ready_at.size(); ++i) {
    if (holds.standby_candidate(ids[i])) {
      candidates.push_back(ids[i]);
      candidate_ready_at.push_back(ready_at[i]);
    } else if (holds.has(ids[i], Hold::kStandby)) {
      // Held for something else too (its breaker opened while in standby): no longer
      // standby, so that it returns to routing when that hold ends.
      if (auto h = holds.set(ids[i], Hold::kStandby, false)) {
        plan.changes.push_back({.id = ids[i], .health = *h});
      }
    }
  }
  const std::vector<bool> standby = scale::pick_standby(candidate_ready_at, count);
  for (size_t k = 0; k < candidates.size(); ++k) {
    if (auto h = holds.set(candidates[k], Hold::kStandby, standby[k])) {
      plan.changes.push_back({.id = candidates[k], .health = *h});
    }
    plan.in_standby += standby[k] ? 1 : 0;
  }
  return plan;
}

}  // namespace kvgate::route
