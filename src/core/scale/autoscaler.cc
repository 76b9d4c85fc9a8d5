#include "core/scale/autoscaler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/scale/budget.h"
#include "core/scale/planner.h"
#include "core/scale/schedule.h"

namespace kvgate::scale {

Result<Autoscaler> Autoscaler::make(AutoscaleConfig config) {
  if (config.policy == PolicyKind::kGpuUtilization) config.signal = Signal::kGpuUtilization;
  if (Status s = validate(config); !s) return Error(s.error());
  return Autoscaler(std::move(config));
}

Autoscaler::Autoscaler(AutoscaleConfig config)
    : config_(std::move(config)),
      startup_(config_.startup_time),
      tracker_(config_.tracking),
      behavior_(config_.behavior) {
  if (config_.policy == PolicyKind::kPlanner) {
    input_forecast_ = make_forecaster(config_.forecast);
    output_forecast_ = make_forecaster(config_.forecast);
  } else if (config_.policy == PolicyKind::kHorizon) {
    horizon_ = std::make_unique<HorizonPolicy>(config_.horizon, config_.forecast, 15 * kSecond,
                                               config_.startup_time);
  } else {
    demand_forecast_ = make_forecaster(config_.forecast);
  }
}

Autoscaler::Autoscaler(Autoscaler&&) noexcept = default;
Autoscaler& Autoscaler::operator=(Autoscaler&&) noexcept = default;
Autoscaler::~Autoscaler() = default;

double Autoscaler::forecast(Forecaster* f, double value, Nanos now, Nanos horizon) {
  if (!std::isfinite(value)) return 0;  // bad input must not poison the model
  if (f == nullptr) return value;
  f->observe(now, value);
  // Size for the larger of now and the horizon: scaling down ahead of a predicted drop
  // would leave the pool short until the drop comes.
  return std::max(value, f->predict(now + horizon).value_or(value));
}

void Autoscaler::need_from_target(const PoolSignals& s, Nanos now, Decision& d) {
  const Capacity& c = d.capacity;
  const std::optional<double> value = signal_value(s, config_.signal);
  const std::string_view name = signal_name(config_.signal);
  const bool aware = config_.cold_start_aware;
  // Cold-start aware: the ready replicas produced the measurement, and everything that
  // will be up by the horizon is capacity. Naive: every replica is multiplied by the
  // per-ready value, booting ones included (what a Value-type external metric does).
  const int32_t capacity = aware ? c.at_horizon() + c.late : c.total();
  if (!value || !std::isfinite(*value) || *value < 0) {
    d.needed = capacity > 0 ? capacity : (s.waiting > 0 ? 1 : 0);
    d.reason = fmt::format("{}: no measurement (ready {}), holding {}", name, c.ready, d.needed);
    return;
  }
  const int32_t base = aware ? c.ready : c.total();
  const double now_demand = base * (*value / config_.target);
  d.demand = forecast(demand_forecast_.get(), now_demand, now, d.horizon);
  const TargetTracker::Recommendation r = tracker_.recommend(d.demand, capacity, c.ready, now);
  d.needed = r.needed;
  d.panic = r.panic;
  d.reason = fmt::format(
      "{} {:.3g}/replica vs target {:.3g}: demand {:.2f} replicas{} vs capacity {}", name, *value,
      config_.target, r.demand, d.demand > now_demand ? " (forecast)" : "", capacity);
  if (r.panic) d.reason += fmt::format(", panic (6 s demand {:.2f})", r.panic_demand);
  if (r.held_by_panic) d.reason += ", no scale-down in panic";
}

void Autoscaler::need_from_planner(const PoolSignals& s, Nanos now, Decision& d) {
  const auto pick = [&](const LatencySummary& l) -> std::optional<double> {
    if (l.samples == 0) return std::nullopt;
    switch (config_.latency_stat) {
      case LatencyStat::kMean:
        return l.mean;
      case LatencyStat::kP50:
        return l.p50;
      case LatencyStat::kP90:
        return l.p90;
      case LatencyStat::kP99:
        return l.p99;
    }
    return std::nullopt;
  };
  PlannerInput in;
  in.input_tokens_per_s = forecast(input_forecast_.get(), s.prompt_tokens_per_s, now, d.horizon);
  in.output_tokens_per_s =
      forecast(output_forecast_.get(), s.generation_tokens_per_s, now, d.horizon);
  in.mean_input_tokens = s.mean_prompt_tokens;
  in.mean_output_tokens = s.mean_generation_tokens;
  in.measured_ttft_s = pick(s.ttft);
  in.measured_itl_s = pick(s.itl);
  in.cap_correction_at_one = config_.cold_start_aware && d.capacity.arriving + d.capacity.late > 0;
  PlannerResult r;
  if (config_.role == PoolRole::kPrefill) {
    r = plan_prefill(*config_.prefill_profile, config_.planner, in);
    d.reason = fmt::format(
        "planner prefill: {:.0f} prompt tok/s x correction {:.2f} / {:.0f} tok/s per replica "
        "at {:.0f} tokens = {:.2f}",
        in.input_tokens_per_s, r.correction, r.per_replica, in.mean_input_tokens, r.replicas);
  } else {
    r = plan_decode(*config_.decode_profile, config_.planner, in);
    d.reason = fmt::format(
        "planner decode: {:.0f} output tok/s / {:.0f} tok/s per replica at ITL {:.1f} ms "
        "(correction {:.2f}) = {:.2f}",
        in.output_tokens_per_s, r.per_replica, 1e3 * config_.planner.itl_s / r.correction,
        r.correction, r.replicas);
  }
  d.demand = r.replicas;
  d.needed = r.needed;
}

void Autoscaler::need_from_horizon(const PoolSignals& s, Nanos now, Decision& d) {
  const Capacity& c = d.capacity;
  HorizonPlan p = horizon_->plan(s, now, c.total(), c.ready);
  d.needed = p.needed;
  d.demand = p.demand;
  d.standby = p.standby;
  d.reason = std::move(p.reason);
  d.inputs = p.inputs;
}

Decision Autoscaler::propose(const PoolSignals& s, Nanos now) {
  Decision d;
  Nanos expected = 0;
  if (horizon_) {
    // The horizon policy's own estimator (a quantile, cold and caches-kept apart).
    expected = horizon_->observe_startups(s.replicas);
  } else {
    startup_.observe(s.replicas);
    expected = startup_.expected();
  }
  d.horizon = horizon_ ? horizon_->horizon() : expected;
  d.capacity = account_capacity(s.replicas, now, d.horizon, expected,
                                config_.cold_start_aware ? config_.stuck_factor : 1e300);
  d.current_replicas = d.capacity.total();

  if (config_.policy == PolicyKind::kPlanner) {
    need_from_planner(s, now, d);
  } else if (horizon_) {
    need_from_horizon(s, now, d);
    d.horizon = horizon_->horizon();
  } else {
    need_from_target(s, now, d);
  }
  if (d.needed == 0 && s.waiting > 0) {
    d.needed = 1;  // requests wait for a pool with nothing to serve them: start one
    d.reason += ", requests waiting";
  }
  int32_t raw = d.needed;
  if (config_.cold_start_aware && d.capacity.stuck > 0) {
    raw += d.capacity.stuck;
    d.reason += fmt::format(", {} stuck starting", d.capacity.stuck);
  }

  const Bounds b = schedule_bounds(config_.schedule, now, d.horizon,
                                   {config_.min_replicas, config_.max_replicas});
  d.min_replicas = b.min_replicas;
  d.max_replicas = b.max_replicas;
  const BehaviorState::Normalized n =
      behavior_.normalize(raw, d.current_replicas, b.min_replicas, b.max_replicas, now);
  d.desired_replicas = n.replicas;
  d.reason += fmt::format(" -> {}", n.replicas);
  if (!n.limited_by.empty()) d.reason += fmt::format(" (held by {})", n.limited_by);
  d.limited_by = n.limited_by;
  return d;
}

Decision Autoscaler::commit(Decision d, int32_t replicas, const PoolSignals& s, Nanos now) {
  replicas = std::max(replicas, 0);
  if (replicas != d.desired_replicas) {
    d.reason += fmt::format(", GPU budget -> {}", replicas);
    d.desired_replicas = replicas;
  }
  if (replicas < d.current_replicas && horizon_) {
    // Never a replica still starting: the pool keeps what it cannot drain.
    d.drain = select_horizon_victims(s.replicas, d.current_replicas - replicas,
                                     std::min(replicas, d.capacity.ready), now, horizon_->horizon(),
                                     config_.stuck_factor);
    replicas = d.current_replicas - static_cast<int32_t>(d.drain.size());
    if (replicas != d.desired_replicas) {
      d.reason += fmt::format(", {} starting kept", replicas - d.desired_replicas);
      d.desired_replicas = replicas;
    }
  } else if (replicas < d.current_replicas) {
    d.drain = select_victims(s.replicas, d.current_replicas - replicas, now,
                             {.young_age = config_.young_age,
                              .expected_startup = startup_.expected(),
                              .stuck_factor = config_.stuck_factor});
  }
  d.standby = std::min(d.standby, replicas);
  behavior_.record_scale(d.current_replicas, replicas, now);
  return d;
}

Decision Autoscaler::decide(const PoolSignals& signals, Nanos now) {
  Decision d = propose(signals, now);
  const int32_t n = d.desired_replicas;
  return commit(std::move(d), n, signals, now);
}

std::vector<Decision> decide_with_budget(std::span<Autoscaler* const> pools,
                                         std::span<const PoolSignals> signals, int64_t total_gpus,
                                         Nanos now) {
  std::vector<Decision> proposals;
  std::vector<PoolAsk> asks;
  for (size_t i = 0; i < pools.size(); ++i) {
    proposals.push_back(pools[i]->propose(signals[i], now));
    asks.push_back({.desired = proposals.back().desired_replicas,
                    .min_replicas = proposals.back().min_replicas,
                    .gpus_per_replica = pools[i]->config().gpus_per_replica});
  }
  const BudgetFit fit = fit_gpu_budget(asks, total_gpus);
  std::vector<Decision> out;
  for (size_t i = 0; i < pools.size(); ++i) {
    out.push_back(pools[i]->commit(std::move(proposals[i]), fit.replicas[i], signals[i], now));
    if (fit.over_budget) out.back().reason += ", min replicas exceed the GPU budget";
  }
  return out;
}

}  // namespace kvgate::scale
