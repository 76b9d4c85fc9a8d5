// RateLimiter: token- and request-based limits per tenant, and per tenant and model.
//
// LLM requests differ wildly in cost, so budgets are counted in tokens, read from each
// response's `usage` once it completes (as Envoy AI Gateway does). That has a
// consequence the API makes explicit: a request is refused up front only when the
// tenant is *already* at or over a limit (check), and its tokens are charged after it
// finishes (charge). So the request that crosses the limit completes, and the next one
// gets 429 with a Retry-After.
//
// Windows slide: the estimate is this window's count plus the previous window's,
// weighted by how much of it still overlaps the last `window` (the two-counter sliding
// window that Envoy's and Cloudflare's limiters use): smooth, two counters per rule.
//
//   RateLimiter limiter(store, FailurePolicy::kOpen);
//   LimitDecision d = limiter.check("acme", "qwen3", rules, now);
//   if (!d.allowed) reply_429(d);           // Retry-After: d.retry_after_seconds()
//   ... on completion:
//   limiter.charge("acme", "qwen3", rules, {.prompt_tokens = 812, .completion_tokens = 97}, now);
//
// Thread-safety: none of its own; the store decides (MemoryCounterStore: none).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/limit/counter_store.h"

namespace kvgate::limit {

// What a rule counts.
enum class Measure : uint8_t {
  kRequests,          // requests admitted (charged at check)
  kPromptTokens,      // usage.prompt_tokens
  kCompletionTokens,  // usage.completion_tokens
  kTotalTokens,       // prompt_weight x prompt + completion_weight x completion
};

struct Rule {
  std::string name;  // shown in the 429's reason, e.g. "tokens-per-minute"
  Measure measure = Measure::kTotalTokens;
  double limit = 0;  // per window
  Nanos window = 60 * kSecond;
  double prompt_weight = 1.0;      // kTotalTokens only
  double completion_weight = 1.0;  // kTotalTokens only
  // Empty: counts the tenant's requests to every model together. Otherwise the rule
  // applies to (and counts) only requests for this model.
  std::string model;
};

struct Usage {
  uint64_t prompt_tokens = 0;
  uint64_t completion_tokens = 0;
};

// What to do when the counter store cannot answer.
enum class FailurePolicy : uint8_t { kOpen, kClosed };

struct LimitDecision {
  bool allowed = true;
  std::string rule;  // the rule that refused (or, with store_error, "store")
  double used = 0;   // its sliding-window estimate
  double limit = 0;
  Nanos retry_after = 0;  // when the estimate will be under the limit again
  bool store_error = false;
  std::string error;  // the store's message when store_error

  // Whole seconds for the Retry-After header (at least 1).
  int64_t retry_after_seconds() const;
};

class RateLimiter {
 public:
  RateLimiter(CounterStore& store, FailurePolicy on_store_failure, std::string key_prefix = "kvg")
      : store_(&store), on_failure_(on_store_failure), prefix_(std::move(key_prefix)) {}
  // Without a store of its own: only the halves below (plan_check, decide, charges), for
  // a caller that talks to its store asynchronously.
  explicit RateLimiter(FailurePolicy on_store_failure, std::string key_prefix = "kvg")
      : on_failure_(on_store_failure), prefix_(std::move(key_prefix)) {}

  // Refuses when any rule that applies to (tenant, model) is already at or over its
  // limit. When it admits, request-counting rules are charged one request.
  // REQUIRES (check, charge): constructed with a store.
  LimitDecision check(std::string_view tenant, std::string_view model, std::span<const Rule> rules,
                      Nanos now);

  // Charges a finished request's tokens to every token rule that applies.
  Status charge(std::string_view tenant, std::string_view model, std::span<const Rule> rules,
                const Usage& usage, Nanos now);

  // Store failures seen so far (the gateway exports this as a metric).
  uint64_t store_failures() const { return store_failures_; }

  // The same check and charge in halves, for a store answered asynchronously (the
  // gateway's Redis store): what to read, then the decision on what was read. Neither
  // touches the store; check() and charge() above are these halves around a store call.
  struct CheckPlan {
    std::vector<std::string> keys;  // two per active rule: this window's, the previous one's
    std::vector<size_t> active;     // indices into `rules` of the rules that apply
  };
  CheckPlan plan_check(std::string_view tenant, std::string_view model, std::span<const Rule> rules,
                       Nanos now) const;
  // The decision on the values read for `plan` (or the store's error, decided by the
  // failure policy). When it admits, `request_charges` receives the increments of the
  // request-counting rules, to add to the store. REQUIRES: `rules` is the span planned.
  LimitDecision decide(const CheckPlan& plan, std::span<const Rule> rules,
                       const Result<std::vector<int64_t>>& values, Nanos now,
                       std::vector<Increment>& request_charges) const;
  // A view of where a tenant stands (the admin status page), reading nothing and
  // charging nothing: the keys of every rule in `rules`, whatever model it is for (two
  // per rule, as plan_check's), then each rule's sliding-window estimate from the
  // values read for them (what check() compares with its limit).
  std::vector<std::string> usage_keys(std::string_view tenant, std::span<const Rule> rules,
                                      Nanos now) const;
  // REQUIRES: values.size() == 2 * rules.size().
  static std::vector<double> usage(std::span<const Rule> rules, std::span<const int64_t> values,
                                   Nanos now);

  // The increments that charge a finished request's `usage` (empty: nothing to add).
  std::vector<Increment> charges(std::string_view tenant, std::string_view model,
                                 std::span<const Rule> rules, const Usage& usage, Nanos now) const;

 private:
  std::string key(std::string_view tenant, const Rule& rule, int64_t window_index) const;

  CounterStore* store_ = nullptr;
  FailurePolicy on_failure_;
  std::string prefix_;
  uint64_t store_failures_ = 0;
};

// "requests" | "prompt_tokens" | "completion_tokens" | "total_tokens"
std::optional<Measure> parse_measure(std::string_view text);
std::string_view to_string(Measure m);

}  // namespace kvgate::limit
