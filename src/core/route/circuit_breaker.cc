#include "core/route/circuit_breaker.h"

#include <algorithm>

namespace kvgate::route {

void CircuitBreakers::reset(EndpointId id) {
  if (states_.size() <= id) states_.resize(id + 1);
  states_[id] = State{};
}

CircuitBreakers::Transition CircuitBreakers::on_result(EndpointId id, bool ok, Nanos now) {
  if (states_.size() <= id) states_.resize(id + 1);
  State& s = states_[id];
  if (s.open()) return Transition::kNone;
  if (ok) {
    const bool was_half_open = s.half_open;
    s.consecutive_failures = 0;
    s.half_open = false;
    return was_half_open ? Transition::kClosed : Transition::kNone;
  }
  ++s.consecutive_failures;
  if (!s.half_open && s.consecutive_failures < std::max<uint32_t>(config_.failures, 1)) {
    return Transition::kNone;
  }
  s.half_open = false;
  s.open_until = now + config_.open_for;
  if (next_expiry_ == 0 || s.open_until < next_expiry_) next_expiry_ = s.open_until;
  return Transition::kOpened;
}

std::vector<EndpointId> CircuitBreakers::expire(Nanos now) {
  std::vector<EndpointId> half_opened;
  // On every routing decision: nothing to scan until the earliest breaker is due.
  if (next_expiry_ == 0 || now < next_expiry_) return half_opened;
  next_expiry_ = 0;
  for (size_t id = 0; id < states_.size(); ++id) {
    State& s = states_[id];
    if (!s.open()) continue;
    if (now >= s.open_until) {
      s.open_until = 0;
      s.half_open = true;
      half_opened.push_back(static_cast<EndpointId>(id));
    } else if (next_expiry_ == 0 || s.open_until < next_expiry_) {
      next_expiry_ = s.open_until;
    }
  }
  return half_opened;
}

CircuitBreakers::State CircuitBreakers::state(EndpointId id) const {
  return id < states_.size() ? states_[id] : State{};
}

}  // namespace kvgate::route
