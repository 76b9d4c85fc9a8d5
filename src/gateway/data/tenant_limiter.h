// TenantLimiter: the rate limits of `kvgate serve`, shared by its I/O threads.
//
// Owns the counter store the config names (in-process memory, or Redis so several
// gateways share one budget) and a limit::RateLimiter over it, and turns a tenant's
// keys-file limits into rules: tokens_per_minute -> a total_tokens rule named
// "tokens_per_minute", requests_per_minute -> a requests rule "requests_per_minute".
// check_async() before routing, charge_async() once the response's usage is known
// (docs/rate-limits.md).
//
// Nothing waits on Redis: with the Redis store a check suspends the request's coroutine
// until the MGET answers (pipelined with every other request's, on one connection run on
// `executor`), and a charge is sent and forgotten (coalesced with the charges of other
// requests while one is in flight). A request of a tenant without limits never touches
// the store. The store's failures are reported through `on_store_failure` (a metric).
//
// Thread-safe: the memory store is guarded by a mutex; the Redis store is used on
// `executor` only (the gateway passes a strand when it runs several threads).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/clock.h"
#include "core/limit/rate_limiter.h"
#include "gateway/common/config.h"
#include "gateway/data/keys.h"

namespace kvgate::io {
class RedisCounterStore;
}

namespace kvgate::gateway {

class TenantLimiter {
 public:
  // With the in-process store only (config.store memory).
  explicit TenantLimiter(const RateLimitConfig& config);
  // Either store; Redis is driven on `executor`, its timeouts read on `clock` (borrowed:
  // it must outlive the limiter).
  TenantLimiter(const RateLimitConfig& config, boost::asio::any_io_executor executor,
                std::function<void()> on_store_failure, const Clock& clock);
  ~TenantLimiter();

  struct Checked {
    limit::LimitDecision decision;
    bool store_failed = false;  // the store could not answer (count it as a metric)
  };
  // Admits or refuses a request of `tenant` for `model` at wall-clock `now` (Clock::wall_now:
  // gateways sharing Redis must agree on window boundaries, so the limiter runs on
  // wall-clock time).
  // REQUIRES (check, charge): the in-process store.
  Checked check(const Tenant& tenant, std::string_view model, Nanos now);
  // Charges a finished request's tokens. False when the store failed.
  bool charge(const Tenant& tenant, std::string_view model, const limit::Usage& usage, Nanos now);

  // The same for either store, without blocking the calling thread. `tenant` and `model`
  // must outlive the call (the gateway's keys and config do).
  boost::asio::awaitable<Checked> check_async(const Tenant& tenant, std::string_view model,
                                              Nanos now);
  // Never waits; a failure is reported through on_store_failure.
  void charge_async(const Tenant& tenant, std::string_view model, const limit::Usage& usage,
                    Nanos now);

  // Where each tenant stands against its budgets (the admin API's tenants view): every
  // rule with its limit and its sliding-window estimate at wall-clock `now`, read from
  // the store (one read for all of them: an MGET with Redis), charging nothing. The
  // tenants must outlive the call. `store_failed`: the store could not answer (the
  // estimates are then 0).
  struct RuleUsage {
    std::string rule;  // "tokens_per_minute", "requests_per_minute:qwen3", ...
    limit::Measure measure = limit::Measure::kTotalTokens;
    std::string model;  // empty: every model
    double limit = 0;
    double used = 0;
    Nanos window = 0;
  };
  struct TenantUsage {
    std::string tenant;
    std::vector<RuleUsage> rules;  // empty: no limits
  };
  struct Usage {
    std::vector<TenantUsage> tenants;
    bool store_failed = false;
  };
  boost::asio::awaitable<Usage> usage_async(std::vector<const Tenant*> tenants, Nanos now);
  bool shared_store() const { return redis_ != nullptr; }

  // Whether `tenant` has any limit at all (no store round trip otherwise).
  static bool limited(const Tenant& tenant);
  static std::vector<limit::Rule> rules_for(const TenantLimits& limits);

 private:
  // Reads `keys` from Redis, resuming the caller on its own executor.
  boost::asio::awaitable<Result<std::vector<int64_t>>> read(std::vector<std::string> keys);
  void add(std::vector<limit::Increment> increments);

  // Constant after construction.
  boost::asio::any_io_executor executor_;  // Redis: the store's executor
  std::function<void()> on_store_failure_;
  std::unique_ptr<io::RedisCounterStore> redis_;  // used on executor_ only
  // The in-process store (when redis_ is null) and the limiter, guarded by mu_ (the
  // limiter's halves used with Redis are const).
  std::unique_ptr<limit::MemoryCounterStore> memory_;
  std::mutex mu_;
  limit::RateLimiter limiter_;
};

}  // namespace kvgate::gateway
