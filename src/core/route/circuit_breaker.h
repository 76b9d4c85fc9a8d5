// CircuitBreakers: one circuit breaker per endpoint of a pool, in virtual or real time.
//
// After `failures` consecutive failed exchanges an endpoint's breaker opens for
// `open_for`: the caller takes the endpoint out of routing (Health::kUnhealthy). When the
// period ends, expire() half-opens it: the caller puts it back, requests probe it, and
// the next failure opens it again at once; a success closes it (the count starts over).
// The gateway (gateway/data/pool_runtime.cc) feeds it every exchange's outcome with the
// monotonic clock, the tests with simulated time. Not thread-safe: the pool's strand
// owns it.
//
//   CircuitBreakers b({.failures = 3, .open_for = 5 * kSecond});
//   if (b.on_result(id, /*ok=*/false, now) == CircuitBreakers::Transition::kOpened) {
//     router.pool().set_health(id, Health::kUnhealthy);
//   }
//   for (EndpointId id : b.expire(now)) router.pool().set_health(id, Health::kHealthy);
#pragma once

#include <cstdint>
#include <vector>

#include "core/common/time.h"
#include "core/route/endpoint.h"

namespace kvgate::route {

struct BreakerConfig {
  uint32_t failures = 5;  // consecutive failures that open the breaker (>= 1)
  Nanos open_for = 5 * kSecond;
};

class CircuitBreakers {
 public:
  explicit CircuitBreakers(BreakerConfig config) : config_(config) {}

  enum class Transition : uint8_t {
    kNone,
    kOpened,  // this failure opened the breaker: take the endpoint out
    kClosed,  // this success closed a half-open breaker
  };

  struct State {
    uint32_t consecutive_failures = 0;
    Nanos open_until = 0;  // > 0 while open
    bool half_open = false;
    bool open() const { return open_until > 0; }
  };

  // A new endpoint (or a reused id): closed, no failures.
  void reset(EndpointId id);
  // The outcome of one exchange with `id`. Results while the breaker is open are
  // ignored (requests in flight when it opened).
  Transition on_result(EndpointId id, bool ok, Nanos now);
  // Half-opens every breaker whose open period has ended by `now`; returns their ids
  // (to be put back into routing).
  std::vector<EndpointId> expire(Nanos now);
  State state(EndpointId id) const;
  const BreakerConfig& config() const { return config_; }

 private:
  const BreakerConfig config_;
  std::vector<State> states_;  // by EndpointId
  Nanos next_expiry_ = 0;      // earliest open_until, 0 when none is open
};

}  // namespace kvgate::route
