#include "gateway/tenant_limiter.h"

#include <chrono>

#include "io/redis_counter_store.h"

namespace kvgate::gateway {
namespace {

std::unique_ptr<limit::CounterStore> make_store(const RateLimitConfig& c) {
  if (c.store == RateLimitConfig::Store::kRedis) {
    io::RedisCounterStore::Options o;
    o.host = c.redis.host;
    o.port = c.redis.port;
    o.password = c.redis.password;
    return std::make_unique<io::RedisCounterStore>(std::move(o));
  }
  return std::make_unique<limit::MemoryCounterStore>();
}

}  // namespace

TenantLimiter::TenantLimiter(const RateLimitConfig& config)
    : store_(make_store(config)),
      limiter_(*store_,
               config.fail_closed ? limit::FailurePolicy::kClosed : limit::FailurePolicy::kOpen) {}

TenantLimiter::~TenantLimiter() = default;

bool TenantLimiter::limited(const Tenant& tenant) {
  return tenant.limits.tokens_per_minute > 0 || tenant.limits.requests_per_minute > 0;
}

std::vector<limit::Rule> TenantLimiter::rules_for(const TenantLimits& limits) {
  std::vector<limit::Rule> rules;
  if (limits.tokens_per_minute > 0) {
    rules.push_back({.name = "tokens_per_minute",
                     .measure = limit::Measure::kTotalTokens,
                     .limit = static_cast<double>(limits.tokens_per_minute),
                     .window = 60 * kSecond});
  }
  if (limits.requests_per_minute > 0) {
    rules.push_back({.name = "requests_per_minute",
                     .measure = limit::Measure::kRequests,
                     .limit = static_cast<double>(limits.requests_per_minute),
                     .window = 60 * kSecond});
  }
  return rules;
}

TenantLimiter::Checked TenantLimiter::check(const Tenant& tenant, std::string_view model,
                                            Nanos now) {
  Checked out;
  if (!limited(tenant)) return out;
  std::vector<limit::Rule> rules = rules_for(tenant.limits);
  std::lock_guard lock(mu_);
  const uint64_t failures = limiter_.store_failures();
  out.decision = limiter_.check(tenant.name, model, rules, now);
  out.store_failed = limiter_.store_failures() != failures;
  return out;
}

bool TenantLimiter::charge(const Tenant& tenant, std::string_view model, const limit::Usage& usage,
                           Nanos now) {
  if (tenant.limits.tokens_per_minute == 0) return true;
  std::vector<limit::Rule> rules = rules_for(tenant.limits);
  std::lock_guard lock(mu_);
  return static_cast<bool>(limiter_.charge(tenant.name, model, rules, usage, now));
}

Nanos wall_now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace kvgate::gateway
