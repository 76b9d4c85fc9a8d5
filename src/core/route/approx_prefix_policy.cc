// approx-prefix: SGLang router's cache-aware policy.
//
// Load is requests in flight. When the pool is imbalanced (max - min load above
// balance_abs_threshold AND max above min x balance_rel_threshold), go to the least
// loaded: balance first. Otherwise, when the best match covers more than
// cache_threshold of the prompt, go to the best match; else to the least loaded
// (where a new prefix can settle). SGLang matches its own routing history; use it with
// overlap_source approx to get the same, or precise/both for event-fed overlap.
#include <algorithm>

#include "core/route/builtins.h"
#include "core/route/registry.h"

namespace kvgate::route::builtin {
namespace {

class ApproxPrefixPolicy final : public Policy {
 public:
  ApproxPrefixPolicy(double cache_threshold, double abs_threshold, double rel_threshold)
      : cache_threshold_(cache_threshold),
        abs_threshold_(abs_threshold),
        rel_threshold_(rel_threshold) {}

  std::string_view name() const override { return "approx-prefix"; }
  bool uses_overlap() const override { return true; }

  size_t pick(const RouteContext& ctx, std::span<Candidate> c, Rng& rng) override {
    double lo = c[0].endpoint->load.in_flight;
    double hi = lo;
    for (const Candidate& x : c) {
      lo = std::min<double>(lo, x.endpoint->load.in_flight);
      hi = std::max<double>(hi, x.endpoint->load.in_flight);
    }
    const bool imbalanced = hi - lo > abs_threshold_ && hi > lo * rel_threshold_;
    if (!imbalanced && ctx.prompt_blocks() > 0) {
      // Best match; among equal matches the least loaded.
      uint32_t best = 0;
      for (const Candidate& x : c) best = std::max(best, x.gpu_blocks);
      const double ratio = static_cast<double>(best) / ctx.prompt_blocks();
      if (best > 0 && ratio > cache_threshold_) {
        for (Candidate& x : c) {
          x.cost = x.gpu_blocks == best ? x.endpoint->load.in_flight : 1e18;
        }
        return pick_lowest_cost(c, rng);
      }
    }
    for (Candidate& x : c) x.cost = x.endpoint->load.in_flight;
    return pick_lowest_cost(c, rng);
  }

 private:
  const double cache_threshold_;
  const double abs_threshold_;
  const double rel_threshold_;
};

}  // namespace

Result<std::unique_ptr<Policy>> make_approx_prefix(const PolicyConfig& config, const Registry&) {
  // Defaults of SGLang's router command line.
  ParamReader p(config);
  const double cache = p.number("cache_threshold", 0.3, 0, 1);
  const double abs = p.number("balance_abs_threshold", 64, 0, 1e9);
  const double rel = p.number("balance_rel_threshold", 1.5, 0, 1e9);
  if (Status s = p.finish(); !s) return Error(s.error());
  return std::unique_ptr<Policy>(std::make_unique<ApproxPrefixPolicy>(cache, abs, rel));
}

}  // namespace kvgate::route::builtin
