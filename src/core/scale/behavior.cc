#include "core/scale/behavior.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace kvgate::scale {

namespace {

constexpr double kHuge = 1e18;

// Limits are computed in double so that huge policy values cannot overflow.
int32_t to_count(double x) {
  return static_cast<int32_t>(std::clamp<double>(x, std::numeric_limits<int32_t>::min(),
                                                 std::numeric_limits<int32_t>::max()));
}

}  // namespace

ScalingRules default_scale_up_rules() {
  return ScalingRules{.stabilization_window = 0,
                      .select = SelectPolicy::kMax,
                      .policies = {{PolicyType::kPods, 4, 15 * kSecond},
                                   {PolicyType::kPercent, 100, 15 * kSecond}}};
}

ScalingRules default_scale_down_rules() {
  return ScalingRules{.stabilization_window = 300 * kSecond,
                      .select = SelectPolicy::kMax,
                      .policies = {{PolicyType::kPercent, 100, 15 * kSecond}}};
}

BehaviorState::BehaviorState(Behavior behavior) : behavior_(std::move(behavior)) {
  longest_period_ =
      std::max(behavior_.scale_up.stabilization_window, behavior_.scale_down.stabilization_window);
  for (const ScalingRules* r : {&behavior_.scale_up, &behavior_.scale_down}) {
    for (const ScalingPolicy& p : r->policies)
      longest_period_ = std::max(longest_period_, p.period);
  }
}

void BehaviorState::prune(Nanos now) {
  const Nanos cutoff = now - longest_period_;
  for (std::deque<Sample>* d : {&recommendations_, &up_events_, &down_events_}) {
    while (!d->empty() && d->front().at < cutoff) d->pop_front();
  }
}

int32_t BehaviorState::stabilize(int32_t desired, int32_t current, Nanos now, std::string& why) {
  // As the HPA controller does: the result is the current count pulled into the band
  // [min of recent scale-up window recommendations, max of scale-down window ones].
  int32_t up = desired;
  int32_t down = desired;
  const Nanos up_cutoff = now - behavior_.scale_up.stabilization_window;
  const Nanos down_cutoff = now - behavior_.scale_down.stabilization_window;
  for (const Sample& s : recommendations_) {
    if (s.at > up_cutoff) up = std::min(up, s.value);
    if (s.at > down_cutoff) down = std::max(down, s.value);
  }
  recommendations_.push_back({now, desired});
  int32_t result = current;
  if (result < up) result = up;
  if (result > down) result = down;
  if (result < desired) why = "scale-up stabilization";
  if (result > desired) why = "scale-down stabilization";
  return result;
}

int32_t BehaviorState::change_in_period(const std::deque<Sample>& events, Nanos period, Nanos now) {
  int32_t sum = 0;
  for (const Sample& e : events) {
    if (e.at > now - period) sum += e.value;
  }
  return sum;
}

int32_t BehaviorState::scale_up_limit(int32_t current, Nanos now) const {
  const ScalingRules& rules = behavior_.scale_up;
  if (rules.select == SelectPolicy::kDisabled) return current;
  const bool take_max = rules.select == SelectPolicy::kMax;
  double result = take_max ? -kHuge : kHuge;
  for (const ScalingPolicy& p : rules.policies) {
    const int32_t start = current - change_in_period(up_events_, p.period, now) +
                          change_in_period(down_events_, p.period, now);
    double proposed = start;
    if (p.type == PolicyType::kPods) {
      proposed = static_cast<double>(start) + p.value;
    } else {
      proposed = std::ceil(start * (1.0 + p.value / 100.0));
    }
    result = take_max ? std::max(result, proposed) : std::min(result, proposed);
  }
  return rules.policies.empty() ? std::numeric_limits<int32_t>::max() : to_count(result);
}

int32_t BehaviorState::scale_down_limit(int32_t current, Nanos now) const {
  const ScalingRules& rules = behavior_.scale_down;
  if (rules.select == SelectPolicy::kDisabled) return current;
  // kMax ("the policy allowing the most change") yields the lowest count.
  const bool most_change = rules.select == SelectPolicy::kMax;
  double result = most_change ? kHuge : -kHuge;
  for (const ScalingPolicy& p : rules.policies) {
    const int32_t start = current - change_in_period(up_events_, p.period, now) +
                          change_in_period(down_events_, p.period, now);
    double proposed = start;
    if (p.type == PolicyType::kPods) {
      proposed = static_cast<double>(start) - p.value;
    } else {
      proposed = std::trunc(start * (1.0 - p.value / 100.0));  // truncates, as HPA does
    }
    result = most_change ? std::min(result, proposed) : std::max(result, proposed);
  }
  return rules.policies.empty() ? std::numeric_limits<int32_t>::min() : to_count(result);
}

BehaviorState::Normalized BehaviorState::normalize(int32_t desired, int32_t current,
                                                   int32_t min_replicas, int32_t max_replicas,
                                                   Nanos now) {
  prune(now);
  Normalized out{desired, {}};
  out.replicas = stabilize(desired, current, now, out.limited_by);
  if (out.replicas > current) {
    const int32_t limit = std::max(scale_up_limit(current, now), current);
    if (out.replicas > limit) {
      out.replicas = limit;
      out.limited_by = "scale-up limit";
    }
  } else if (out.replicas < current) {
    const int32_t limit = std::min(scale_down_limit(current, now), current);
    if (out.replicas < limit) {
      out.replicas = limit;
      out.limited_by = "scale-down limit";
    }
  }
  if (out.replicas > max_replicas) {
    out.replicas = max_replicas;
    out.limited_by = "max replicas";
  }
  if (out.replicas < min_replicas) {
    out.replicas = min_replicas;
    out.limited_by = "min replicas";
  }
  return out;
}

void BehaviorState::record_scale(int32_t from, int32_t to, Nanos now) {
  if (to > from) up_events_.push_back({now, to - from});
  if (to < from) down_events_.push_back({now, from - to});
}

}  // namespace kvgate::scale
