#include "core/limit/rate_limiter.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace kvgate::limit {
namespace {

bool applies(const Rule& rule, std::string_view model) {
  return rule.model.empty() || rule.model == model;
}

double charged_amount(const Rule& rule, const Usage& u) {
  switch (rule.measure) {
    case Measure::kRequests:
      return 0;  // charged at check
    case Measure::kPromptTokens:
      return static_cast<double>(u.prompt_tokens);
    case Measure::kCompletionTokens:
      return static_cast<double>(u.completion_tokens);
    case Measure::kTotalTokens:
      return rule.prompt_weight * static_cast<double>(u.prompt_tokens) +
             rule.completion_weight * static_cast<double>(u.completion_tokens);
  }
  return 0;
}

// Time from `now` until cur + prev x (1 - f) drops below limit, where f is the elapsed
// fraction of the current window. Past the window's end the current count becomes the
// previous one and decays the same way.
Nanos retry_after(double cur, double prev, double limit, Nanos window, Nanos into) {
  const double w = static_cast<double>(window);
  const double f_now = static_cast<double>(into) / w;
  if (cur < limit && prev > 0) {
    double f = 1.0 - (limit - cur) / prev;  // estimate < limit once f exceeds this
    if (f < 1.0) return static_cast<Nanos>(std::max(0.0, f - f_now) * w);
  }
  // In the next window: cur x (1 - f') < limit.
  double f_next = cur > 0 ? std::max(0.0, 1.0 - limit / cur) : 0.0;
  return static_cast<Nanos>((1.0 - f_now + f_next) * w);
}

}  // namespace

int64_t LimitDecision::retry_after_seconds() const {
  return std::max<int64_t>(1, (retry_after + kSecond - 1) / kSecond);
}

std::string RateLimiter::key(std::string_view tenant, const Rule& rule,
                             int64_t window_index) const {
  std::string k = prefix_;
  k += ':';
  k += tenant;
  k += ':';
  k += rule.name;
  if (!rule.model.empty()) {
    k += ':';
    k += rule.model;
  }
  k += ':';
  k += std::to_string(window_index);
  return k;
}

RateLimiter::CheckPlan RateLimiter::plan_check(std::string_view tenant, std::string_view model,
                                               std::span<const Rule> rules, Nanos now) const {
  CheckPlan plan;
  for (size_t i = 0; i < rules.size(); ++i) {
    const Rule& r = rules[i];
    if (!applies(r, model) || r.window <= 0) continue;
    plan.active.push_back(i);
    int64_t w = now / r.window;
    plan.keys.push_back(key(tenant, r, w));
    plan.keys.push_back(key(tenant, r, w - 1));
  }
  return plan;
}

LimitDecision RateLimiter::decide(const CheckPlan& plan, std::span<const Rule> rules,
                                  const Result<std::vector<int64_t>>& values, Nanos now,
                                  std::vector<Increment>& request_charges) const {
  LimitDecision d;
  if (plan.active.empty()) return d;
  if (!values || values->size() != plan.keys.size()) {
    d.store_error = true;
    d.error = values ? std::string("store answered the wrong number of values") : values.error();
    d.rule = "store";
    d.allowed = on_failure_ == FailurePolicy::kOpen;
    d.retry_after = kSecond;
    return d;
  }
  std::vector<Increment> charges;
  for (size_t i = 0; i < plan.active.size(); ++i) {
    const Rule& r = rules[plan.active[i]];
    const double cur = static_cast<double>((*values)[2 * i]);
    const double prev = static_cast<double>((*values)[2 * i + 1]);
    const Nanos into = now % r.window;
    const double used =
        cur + prev * (1.0 - static_cast<double>(into) / static_cast<double>(r.window));
    if (used >= r.limit) {
      Nanos retry = retry_after(cur, prev, r.limit, r.window, into);
      if (d.allowed || retry > d.retry_after) {  // report the rule that frees up last
        d.allowed = false;
        d.rule = r.name;
        d.used = used;
        d.limit = r.limit;
        d.retry_after = retry;
      }
    }
    if (r.measure == Measure::kRequests) {
      charges.push_back({plan.keys[2 * i], 1, 2 * r.window});
    }
  }
  if (d.allowed) request_charges = std::move(charges);
  return d;
}

LimitDecision RateLimiter::check(std::string_view tenant, std::string_view model,
                                 std::span<const Rule> rules, Nanos now) {
  const CheckPlan plan = plan_check(tenant, model, rules, now);
  if (plan.active.empty()) return {};
  const Result<std::vector<int64_t>> values = store_->get(plan.keys, now);
  std::vector<Increment> request_charges;
  LimitDecision d = decide(plan, rules, values, now, request_charges);
  if (d.store_error) ++store_failures_;
  if (!request_charges.empty()) {
    if (Status s = store_->add(request_charges, now); !s) ++store_failures_;
  }
  return d;
}

std::vector<Increment> RateLimiter::charges(std::string_view tenant, std::string_view model,
                                            std::span<const Rule> rules, const Usage& usage,
                                            Nanos now) const {
  std::vector<Increment> incs;
  for (const Rule& r : rules) {
    if (!applies(r, model) || r.window <= 0) continue;
    double amount = charged_amount(r, usage);
    if (amount <= 0) continue;
    incs.push_back(
        {key(tenant, r, now / r.window), static_cast<int64_t>(std::llround(amount)), 2 * r.window});
  }
  return incs;
}

Status RateLimiter::charge(std::string_view tenant, std::string_view model,
                           std::span<const Rule> rules, const Usage& usage, Nanos now) {
  const std::vector<Increment> incs = charges(tenant, model, rules, usage, now);
  if (incs.empty()) return {};
  Status s = store_->add(incs, now);
  if (!s) ++store_failures_;
  return s;
}

std::vector<std::string> RateLimiter::usage_keys(std::string_view tenant,
                                                 std::span<const Rule> rules, Nanos now) const {
  std::vector<std::string> keys;
  for (const Rule& r : rules) {
    const int64_t w = r.window > 0 ? now / r.window : 0;
    keys.push_back(key(tenant, r, w));
    keys.push_back(key(tenant, r, w - 1));
  }
  return keys;
}

std::vector<double> RateLimiter::usage(std::span<const Rule> rules, std::span<const int64_t> values,
                                       Nanos now) {
  std::vector<double> out;
  for (size_t i = 0; i < rules.size() && 2 * i + 1 < values.size(); ++i) {
    const Rule& r = rules[i];
    const double cur = static_cast<double>(values[2 * i]);
    const double prev = static_cast<double>(values[2 * i + 1]);
    if (r.window <= 0) {
      out.push_back(cur);
      continue;
    }
    const Nanos into = now % r.window;
    out.push_back(cur + prev * (1.0 - static_cast<double>(into) / static_cast<double>(r.window)));
  }
  return out;
}

std::optional<Measure> parse_measure(std::string_view text) {
  if (text == "requests") return Measure::kRequests;
  if (text == "prompt_tokens") return Measure::kPromptTokens;
  if (text == "completion_tokens") return Measure::kCompletionTokens;
  if (text == "total_tokens") return Measure::kTotalTokens;
  return std::nullopt;
}

std::string_view to_string(Measure m) {
  switch (m) {
    case Measure::kRequests:
      return "requests";
    case Measure::kPromptTokens:
      return "prompt_tokens";
    case Measure::kCompletionTokens:
      return "completion_tokens";
    case Measure::kTotalTokens:
      return "total_tokens";
  }
  return "?";
}

}  // namespace kvgate::limit
