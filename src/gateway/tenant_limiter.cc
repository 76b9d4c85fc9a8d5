#include "gateway/tenant_limiter.h"

#include <algorithm>
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
  const TenantLimits& l = tenant.limits;
  return l.tokens_per_minute > 0 || l.requests_per_minute > 0 || !l.models.empty();
}

std::vector<limit::Rule> TenantLimiter::rules_for(const TenantLimits& limits) {
  std::vector<limit::Rule> rules;
  auto add = [&](uint64_t tokens, uint64_t requests, const std::string& model) {
    const std::string suffix = model.empty() ? "" : ":" + model;
    if (tokens > 0) {
      rules.push_back({.name = "tokens_per_minute" + suffix,
                       .measure = limit::Measure::kTotalTokens,
                       .limit = static_cast<double>(tokens),
                       .window = 60 * kSecond,
                       .prompt_weight = limits.prompt_weight,
                       .completion_weight = limits.completion_weight,
                       .model = model});
    }
    if (requests > 0) {
      rules.push_back({.name = "requests_per_minute" + suffix,
                       .measure = limit::Measure::kRequests,
                       .limit = static_cast<double>(requests),
                       .window = 60 * kSecond,
                       .model = model});
    }
  };
  add(limits.tokens_per_minute, limits.requests_per_minute, "");
  for (const ModelLimits& m : limits.models) {
    add(m.tokens_per_minute, m.requests_per_minute, m.model);
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
  std::vector<limit::Rule> rules = rules_for(tenant.limits);
  if (std::none_of(rules.begin(), rules.end(), [](const limit::Rule& r) {
        return r.measure == limit::Measure::kTotalTokens;
      })) {
    return true;
  }
  std::lock_guard lock(mu_);
  return static_cast<bool>(limiter_.charge(tenant.name, model, rules, usage, now));
}

Nanos wall_now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace kvgate::gateway
