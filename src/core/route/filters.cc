// Built-in filters: healthy, saturation (criticality and load shedding).
#include <algorithm>

#include "core/route/builtins.h"
#include "core/route/registry.h"

namespace kvgate::route::builtin {
namespace {

// Healthy endpoints only (not unhealthy, not draining), and not one the request excludes.
class HealthyFilter final : public Filter {
 public:
  std::string_view name() const override { return "healthy"; }
  RejectReason apply(const RouteContext& ctx, std::vector<Candidate>& c) override {
    const std::span<const EndpointId> excluded = ctx.request.excluded;
    std::erase_if(c, [&](const Candidate& x) {
      return x.endpoint->health != Health::kHealthy ||
             std::find(excluded.begin(), excluded.end(), x.endpoint->id) != excluded.end();
    });
    return c.empty() ? RejectReason::kNoHealthyEndpoints : RejectReason::kNone;
  }
};

// Per criticality (Gateway API Inference Extension):
//  - critical: endpoints whose waiting queue is below critical_max_waiting; if none
//    is, every candidate (a critical request is never shed);
//  - standard: the unsaturated endpoints; if none is, every candidate;
//  - sheddable: the unsaturated endpoints; if none is, reject (saturated) unless
//    shedding is off.
// Stale metrics count as saturated (and as a long queue).
class SaturationFilter final : public Filter {
 public:
  std::string_view name() const override { return "saturation"; }
  RejectReason apply(const RouteContext& ctx, std::vector<Candidate>& c) override {
    const SaturationConfig& cfg = ctx.config.saturation;
    auto keep_if = [&](auto ok) {
      size_t n = std::count_if(c.begin(), c.end(), ok);
      if (n == 0) return false;
      std::erase_if(c, [&](const Candidate& x) { return !ok(x); });
      return true;
    };
    auto unsaturated = [](const Candidate& x) { return !x.load.saturated(); };
    switch (ctx.request.criticality) {
      case Criticality::kCritical:
        keep_if([&](const Candidate& x) {
          return !x.load.stale && x.load.waiting < cfg.critical_max_waiting;
        });
        return RejectReason::kNone;
      case Criticality::kStandard:
        keep_if(unsaturated);
        return RejectReason::kNone;
      case Criticality::kSheddable:
        if (keep_if(unsaturated) || !cfg.shed) return RejectReason::kNone;
        c.clear();
        return RejectReason::kSaturated;
    }
    return RejectReason::kNone;
  }
};

}  // namespace

Result<std::unique_ptr<Filter>> make_healthy_filter(const PolicyConfig& config, const Registry&) {
  if (Status s = ParamReader(config).finish(); !s) return Error(s.error());
  return std::unique_ptr<Filter>(std::make_unique<HealthyFilter>());
}

Result<std::unique_ptr<Filter>> make_saturation_filter(const PolicyConfig& config,
                                                       const Registry&) {
  if (Status s = ParamReader(config).finish(); !s) return Error(s.error());
  return std::unique_ptr<Filter>(std::make_unique<SaturationFilter>());
}

}  // namespace kvgate::route::builtin
