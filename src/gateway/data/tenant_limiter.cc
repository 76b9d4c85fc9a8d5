// GCC 12 reports a false -Wmismatched-new-delete on Asio coroutine frames (GCC bug 109224).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include "gateway/data/tenant_limiter.h"

#include <algorithm>
#include <boost/asio/async_result.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>

#include "io/redis_counter_store.h"

namespace kvgate::gateway {
namespace asio = boost::asio;

namespace {

limit::FailurePolicy policy(const RateLimitConfig& c) {
  return c.fail_closed ? limit::FailurePolicy::kClosed : limit::FailurePolicy::kOpen;
}

bool charges_tokens(const std::vector<limit::Rule>& rules) {
  return std::any_of(rules.begin(), rules.end(), [](const limit::Rule& r) {
    return r.measure == limit::Measure::kTotalTokens;
  });
}

}  // namespace

TenantLimiter::TenantLimiter(const RateLimitConfig& config)
    : memory_(std::make_unique<limit::MemoryCounterStore>()), limiter_(*memory_, policy(config)) {}

TenantLimiter::TenantLimiter(const RateLimitConfig& config, asio::any_io_executor executor,
                             std::function<void()> on_store_failure, const Clock& clock)
    : executor_(std::move(executor)),
      on_store_failure_(std::move(on_store_failure)),
      memory_(config.store == RateLimitConfig::Store::kRedis
                  ? nullptr
                  : std::make_unique<limit::MemoryCounterStore>()),
      limiter_(memory_ ? limit::RateLimiter(*memory_, policy(config))
                       : limit::RateLimiter(policy(config))) {
  if (!memory_) {
    io::RedisCounterStore::Options o;
    o.host = config.redis.host;
    o.port = config.redis.port;
    o.password = config.redis.password;
    o.clock = &clock;
    o.connect_timeout = o.command_timeout =
        std::chrono::duration_cast<std::chrono::nanoseconds>(config.redis.timeout).count();
    redis_ = std::make_unique<io::RedisCounterStore>(executor_, std::move(o));
  }
}

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
  if (!charges_tokens(rules)) return true;
  std::lock_guard lock(mu_);
  return static_cast<bool>(limiter_.charge(tenant.name, model, rules, usage, now));
}

asio::awaitable<TenantLimiter::Checked> TenantLimiter::check_async(const Tenant& tenant,
                                                                   std::string_view model,
                                                                   Nanos now) {
  if (!redis_) {
    Checked c = check(tenant, model, now);
    if (c.store_failed && on_store_failure_) on_store_failure_();
    co_return c;
  }
  Checked out;
  if (!limited(tenant)) co_return out;
  const std::vector<limit::Rule> rules = rules_for(tenant.limits);
  limit::RateLimiter::CheckPlan plan = limiter_.plan_check(tenant.name, model, rules, now);
  if (plan.active.empty()) co_return out;
  const Result<std::vector<int64_t>> values = co_await read(plan.keys);
  std::vector<limit::Increment> request_charges;
  out.decision = limiter_.decide(plan, rules, values, now, request_charges);
  out.store_failed = out.decision.store_error;
  if (out.store_failed && on_store_failure_) on_store_failure_();
  if (!request_charges.empty()) add(std::move(request_charges));
  co_return out;
}

void TenantLimiter::charge_async(const Tenant& tenant, std::string_view model,
                                 const limit::Usage& usage, Nanos now) {
  if (!redis_) {
    if (!charge(tenant, model, usage, now) && on_store_failure_) on_store_failure_();
    return;
  }
  const std::vector<limit::Rule> rules = rules_for(tenant.limits);
  if (!charges_tokens(rules)) return;
  std::vector<limit::Increment> incs = limiter_.charges(tenant.name, model, rules, usage, now);
  if (!incs.empty()) add(std::move(incs));
}

asio::awaitable<TenantLimiter::Usage> TenantLimiter::usage_async(std::vector<const Tenant*> tenants,
                                                                 Nanos now) {
  Usage out;
  std::vector<std::vector<limit::Rule>> rules;
  std::vector<std::string> keys;
  for (const Tenant* t : tenants) {
    rules.push_back(rules_for(t->limits));
    for (std::string& k : limiter_.usage_keys(t->name, rules.back(), now)) {
      keys.push_back(std::move(k));
    }
  }
  Result<std::vector<int64_t>> values = std::vector<int64_t>();
  if (keys.empty()) {
    // Nobody has a limit: nothing to read.
  } else if (redis_) {
    values = co_await read(keys);
  } else {
    std::lock_guard lock(mu_);
    values = memory_->get(keys, now);
  }
  if (!values || values->size() != keys.size()) {
    out.store_failed = !keys.empty();
    values = std::vector<int64_t>(keys.size(), 0);
  }
  size_t next = 0;  // into the values, two per rule
  for (size_t i = 0; i < tenants.size(); ++i) {
    TenantUsage t{.tenant = tenants[i]->name};
    const std::vector<limit::Rule>& r = rules[i];
    const std::vector<double> used = limit::RateLimiter::usage(
        r, std::span<const int64_t>(values->data() + next, 2 * r.size()), now);
    next += 2 * r.size();
    for (size_t j = 0; j < r.size(); ++j) {
      t.rules.push_back({.rule = r[j].name,
                         .measure = r[j].measure,
                         .model = r[j].model,
                         .limit = r[j].limit,
                         .used = j < used.size() ? used[j] : 0,
                         .window = r[j].window});
    }
    out.tenants.push_back(std::move(t));
  }
  co_return out;
}

asio::awaitable<Result<std::vector<int64_t>>> TenantLimiter::read(std::vector<std::string> keys) {
  using Values = Result<std::vector<int64_t>>;
  return asio::async_initiate<decltype(asio::use_awaitable), void(Values)>(
      [this](auto handler, std::vector<std::string> keys) {
        auto h = std::make_shared<decltype(handler)>(std::move(handler));
        asio::dispatch(executor_, [this, h, keys = std::move(keys)] {
          redis_->get(keys, [h](Values values) {
            // Resumed from the caller's executor, never inside hiredis's callback.
            auto ex = asio::get_associated_executor(*h);
            asio::post(ex, [h, values = std::move(values)]() mutable { (*h)(std::move(values)); });
          });
        });
      },
      asio::use_awaitable, std::move(keys));
}

void TenantLimiter::add(std::vector<limit::Increment> increments) {
  asio::dispatch(executor_, [this, increments = std::move(increments)] {
    redis_->add(increments, [this](Status s) {
      if (!s && on_store_failure_) on_store_failure_();
    });
  });
}

}  // namespace kvgate::gateway
