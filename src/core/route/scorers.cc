// Gateway API Inference Extension style scoring: each scorer rates every candidate in
// [0, 1], the "scorers" policy picks the best weighted sum (ties at random). "load" is
// the same with the queue and KV-utilization scorers only: llm-d's "load only"
// baseline, no cache knowledge.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/route/builtins.h"
#include "core/route/registry.h"

namespace kvgate::route::builtin {
namespace {

// Fewer waiting requests is better, min-max normalized over the candidates (1 for the
// shortest queue, 0 for the longest; all 1 when equal). A stale endpoint scores 0.
class QueueScorer final : public Scorer {
 public:
  std::string_view name() const override { return "queue"; }
  void score(const RouteContext&, std::span<const Candidate> c, std::span<double> out) override {
    double lo = std::numeric_limits<double>::infinity();
    double hi = -lo;
    for (const Candidate& x : c) {
      if (x.load.stale) continue;
      lo = std::min(lo, x.load.waiting);
      hi = std::max(hi, x.load.waiting);
    }
    for (size_t i = 0; i < c.size(); ++i) {
      if (c[i].load.stale) {
        out[i] = 0;
      } else {
        out[i] = hi > lo ? (hi - c[i].load.waiting) / (hi - lo) : 1.0;
      }
    }
  }
};

// Free KV cache: 1 - usage. A stale endpoint scores 0.
class KvUtilizationScorer final : public Scorer {
 public:
  std::string_view name() const override { return "kv-utilization"; }
  void score(const RouteContext&, std::span<const Candidate> c, std::span<double> out) override {
    for (size_t i = 0; i < c.size(); ++i) {
      out[i] = c[i].load.stale ? 0 : 1.0 - c[i].load.kv_usage;
    }
  }
};

// Share of the prompt's blocks cached there in GPU memory.
class PrefixScorer final : public Scorer {
 public:
  std::string_view name() const override { return "prefix"; }
  bool uses_overlap() const override { return true; }
  void score(const RouteContext& ctx, std::span<const Candidate> c,
             std::span<double> out) override {
    const uint32_t n = ctx.prompt_blocks();
    for (size_t i = 0; i < c.size(); ++i) {
      out[i] = n == 0 ? 0 : std::min(1.0, static_cast<double>(c[i].gpu_blocks) / n);
    }
  }
};

class ScorersPolicy final : public Policy {
 public:
  ScorersPolicy(std::string name, std::vector<std::unique_ptr<Scorer>> scorers,
                std::vector<double> weights)
      : name_(std::move(name)), scorers_(std::move(scorers)), weights_(std::move(weights)) {
    for (const auto& s : scorers_) uses_overlap_ = uses_overlap_ || s->uses_overlap();
  }

  std::string_view name() const override { return name_; }
  bool uses_overlap() const override { return uses_overlap_; }

  size_t pick(const RouteContext& ctx, std::span<Candidate> c, Rng& rng) override {
    scores_.resize(c.size());
    for (Candidate& x : c) x.cost = 0;
    for (size_t s = 0; s < scorers_.size(); ++s) {
      scorers_[s]->score(ctx, c, scores_);
      for (size_t i = 0; i < c.size(); ++i) c[i].cost -= weights_[s] * scores_[i];
    }
    return pick_lowest_cost(c, rng);
  }

 private:
  std::string name_;
  std::vector<std::unique_ptr<Scorer>> scorers_;
  std::vector<double> weights_;
  std::vector<double> scores_;
  bool uses_overlap_ = false;
};

// Params: scorer name -> weight; `defaults` when there are none. `allowed` (when not
// empty) limits the scorer names.
Result<std::unique_ptr<Policy>> make_weighted(
    const PolicyConfig& config, const Registry& registry,
    const std::vector<std::pair<std::string, std::string>>& defaults,
    const std::vector<std::string>& allowed) {
  const auto& params = config.params.empty() ? defaults : config.params;
  std::vector<std::unique_ptr<Scorer>> scorers;
  std::vector<double> weights;
  for (const auto& [scorer, weight_text] : params) {
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), scorer) == allowed.end()) {
      return Error(fmt::format("{}: unknown parameter '{}'", config.name, scorer));
    }
    PolicyConfig weight_only{config.name, {{scorer, weight_text}}};
    ParamReader p(weight_only);
    const double weight = p.number(scorer, 0, 0, 1e6);
    if (Status s = p.finish(); !s) return Error(s.error());
    auto made = registry.make_scorer({scorer, {}});
    if (!made) return Error(fmt::format("{}: {}", config.name, made.error()));
    scorers.push_back(std::move(*made));
    weights.push_back(weight);
  }
  if (scorers.empty()) return Error(fmt::format("{}: no scorers", config.name));
  return std::unique_ptr<Policy>(
      std::make_unique<ScorersPolicy>(config.name, std::move(scorers), std::move(weights)));
}

template <typename T>
Result<std::unique_ptr<Scorer>> make_scorer(const PolicyConfig& config) {
  if (Status s = ParamReader(config).finish(); !s) return Error(s.error());
  return std::unique_ptr<Scorer>(std::make_unique<T>());
}

}  // namespace

Result<std::unique_ptr<Scorer>> make_queue_scorer(const PolicyConfig& c, const Registry&) {
  return make_scorer<QueueScorer>(c);
}
Result<std::unique_ptr<Scorer>> make_kv_utilization_scorer(const PolicyConfig& c, const Registry&) {
  return make_scorer<KvUtilizationScorer>(c);
}
Result<std::unique_ptr<Scorer>> make_prefix_scorer(const PolicyConfig& c, const Registry&) {
  return make_scorer<PrefixScorer>(c);
}

Result<std::unique_ptr<Policy>> make_scorers(const PolicyConfig& c, const Registry& r) {
  return make_weighted(c, r, {{"queue", "1"}, {"kv-utilization", "1"}, {"prefix", "2"}}, {});
}

Result<std::unique_ptr<Policy>> make_load(const PolicyConfig& c, const Registry& r) {
  return make_weighted(c, r, {{"queue", "1"}, {"kv-utilization", "1"}},
                       {"queue", "kv-utilization"});
}

}  // namespace kvgate::route::builtin
