// TenantLimiter: the rate limits of `kvgate serve`, shared by its I/O threads.
//
// Owns the counter store the config names (in-process memory, or Redis so several
// gateways share one budget) and a limit::RateLimiter over it, and turns a tenant's
// keys-file limits into rules: tokens_per_minute -> a total_tokens rule named
// "tokens_per_minute", requests_per_minute -> a requests rule "requests_per_minute".
// check() before routing, charge() once the response's usage is known
// (docs/rate-limits.md).
//
// Thread-safe: one mutex around the limiter and the store. With Redis the store already
// serializes its calls on one connection, so this costs nothing more; those calls block
// the calling I/O thread for at most the store's timeouts (50 ms).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "core/limit/rate_limiter.h"
#include "gateway/config.h"
#include "gateway/keys.h"

namespace kvgate::gateway {

class TenantLimiter {
 public:
  explicit TenantLimiter(const RateLimitConfig& config);
  ~TenantLimiter();

  struct Checked {
    limit::LimitDecision decision;
    bool store_failed = false;  // the store could not answer (count it as a metric)
  };
  // Admits or refuses a request of `tenant` for `model` at wall-clock `now`.
  Checked check(const Tenant& tenant, std::string_view model, Nanos now);
  // Charges a finished request's tokens. False when the store failed.
  bool charge(const Tenant& tenant, std::string_view model, const limit::Usage& usage, Nanos now);

  // Whether `tenant` has any limit at all (no store round trip otherwise).
  static bool limited(const Tenant& tenant);
  static std::vector<limit::Rule> rules_for(const TenantLimits& limits);

 private:
  std::unique_ptr<limit::CounterStore> store_;
  std::mutex mu_;
  limit::RateLimiter limiter_;  // guarded by mu_
};

// Nanoseconds since the Unix epoch (system clock): gateways sharing Redis must agree on
// window boundaries, so the limiter runs on wall-clock time.
Nanos wall_now();

}  // namespace kvgate::gateway
