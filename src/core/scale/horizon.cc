#include "core/scale/horizon.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <utility>

#include "core/scale/replica_count.h"

namespace kvgate::scale {

namespace {

// Arrival rates are smoothed over this window (the last interval's rate is noisy: 4 % at
// 40 requests/s over 15 s).
constexpr Nanos kRateWindow = 30 * kSecond;
// Points at which the scale-down guard reads the forecast over startup + margin.
constexpr int kGuardPoints = 8;

double quantile_of(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

}  // namespace

StartupEstimator::StartupEstimator(Nanos cold_prior, Nanos caches_kept_prior, double quantile)
    : prior_{cold_prior, caches_kept_prior}, quantile_(quantile) {}

void StartupEstimator::observe(const std::vector<ReplicaSignal>& replicas,
                               bool default_caches_kept) {
  for (const ReplicaSignal& r : replicas) {
    if (r.phase == ReplicaPhase::kStarting) continue;
    if (!seen_ready_.insert(r.id).second || r.ready_at < r.launched_at) continue;
    std::deque<Nanos>& d = samples_[r.caches_kept.value_or(default_caches_kept)];
    d.push_back(r.ready_at - r.launched_at);
    if (d.size() > kKeep) d.pop_front();
  }
  if (seen_ready_.size() > 2 * replicas.size() + 64) {
    // Forget replicas that left the pool (ids are not reused by the actuators).
    std::unordered_set<std::string> now_ready;
    for (const ReplicaSignal& r : replicas) {
      if (r.phase != ReplicaPhase::kStarting) now_ready.insert(r.id);
    }
    seen_ready_ = std::move(now_ready);
  }
}

Nanos StartupEstimator::expected(bool caches_kept) const {
  const std::deque<Nanos>& d = samples_[caches_kept];
  if (d.empty()) return prior_[caches_kept];
  std::vector<double> v;
  v.reserve(d.size());
  for (Nanos n : d) v.push_back(static_cast<double>(n));
  return static_cast<Nanos>(quantile_of(std::move(v), quantile_));
}

void ErrorBand::predict(Nanos due, double forecast) {
  if (!(forecast > 0) || !std::isfinite(forecast)) return;
  pending_.emplace_back(due, forecast);
}

void ErrorBand::observe(Nanos now, double actual) {
  while (!pending_.empty() && pending_.front().first <= now) {
    if (std::isfinite(actual) && actual >= 0) {
      ratios_.emplace_back(now, actual / pending_.front().second);
    }
    pending_.pop_front();
  }
  while (!ratios_.empty() && ratios_.front().first < now - window_) ratios_.pop_front();
}

double ErrorBand::factor(double quantile) const {
  if (ratios_.empty()) return 1;
  std::vector<double> v;
  v.reserve(ratios_.size());
  for (const auto& [at, r] : ratios_) v.push_back(r);
  return std::clamp(quantile_of(std::move(v), quantile), 1 / max_, max_);
}

double TtftCorrection::update(const Input& in, Nanos now) {
  if (!config_.ttft_correction || in.ready <= 0 || !(in.model_rate > 0)) {
    action_ = "hold";
    return factor_;
  }
  // Only a settled pool says something about the model: while replicas join or leave,
  // the window's figures mix two pools.
  if (in.ready != last_ready_) {
    last_ready_ = in.ready;
    unsettled_at_ = now;
    action_ = "unsettled";
    return factor_;
  }
  if (now - unsettled_at_ < config_.settle) {
    action_ = "settling";
    return factor_;
  }
  action_ = "hold";
  const double gain = config_.correction_gain;
  if (in.backlog_per_ready >= 1) {
    if (in.finished_per_ready > 0 && in.model_saturation > 0) {
      const double target = in.finished_per_ready / in.model_saturation;
      const double step = std::clamp(std::log(target / factor_), -1.0, 1.0);
      if (std::abs(step) > 0.02) {
        factor_ *= std::exp(gain * step);
        action_ = step < 0 ? "lower (saturated)" : "raise (saturated)";
      }
    }
  } else if (in.have_ttft || (config_.itl_s > 0 && in.have_itl)) {
    const double limit = in.model_rate * factor_;
    // The worse of what users feel against its target: the wait for the first token,
    // and (with an ITL target) the time between tokens, which a batch too large for the
    // replica's decode speed stretches. Raising needs both well under.
    double ratio = in.have_ttft ? in.measured_ttft / config_.ttft_s : 0;
    if (config_.itl_s > 0 && in.have_itl) {
      ratio = std::max(ratio, in.measured_itl / config_.itl_s);
    }
    if (ratio > 1 + config_.correction_deadband && in.load_per_ready <= limit) {
      // Over target at a load the model says it takes: the model is optimistic.
      factor_ *= std::exp(-gain * std::min(std::log(ratio), 1.0));
      action_ = "lower";
    } else if (factor_ < 1 && ratio < 1 - config_.correction_deadband &&
               in.load_per_ready >= 0.8 * limit && ratio > 0) {
      // Well under target near the corrected limit: give back an earlier lowering, at
      // half the gain, never above 1. Only saturation (measured completions) raises the
      // factor above the model: TTFT stays low right up to a sharp knee, so its being
      // low says nothing about where the knee is.
      factor_ = std::min(1.0, factor_ * std::exp(0.5 * gain * std::min(-std::log(ratio), 1.0)));
      action_ = "raise";
    }
  }
  factor_ = std::clamp(factor_, config_.correction_min, config_.correction_max);
  return factor_;
}

HorizonPolicy::HorizonPolicy(HorizonConfig config, const ForecastConfig& forecast,
                             Nanos interval_hint, Nanos fallback_startup)
    : config_(std::move(config)),
      startup_(config_.startup_cold > 0 ? config_.startup_cold : fallback_startup,
               config_.startup_caches_kept > 0 ? config_.startup_caches_kept : fallback_startup,
               config_.startup_quantile),
      band_(config_.band_window, config_.band_max),
      correction_(config_),
      forecaster_(make_forecaster(forecast)),
      interval_(interval_hint) {
  if (!forecaster_) forecaster_ = make_forecaster({.method = ForecastMethod::kConstant});
}

int32_t HorizonPolicy::replicas_for(double rate, double per_replica) {
  if (!(rate > 0)) return 0;
  if (!(per_replica > 0)) return std::numeric_limits<int32_t>::max();
  return ceil_count(rate / per_replica);
}

Nanos HorizonPolicy::observe_startups(const std::vector<ReplicaSignal>& replicas) {
  startup_.observe(replicas, config_.caches_kept);
  horizon_ = startup_.expected(config_.caches_kept) + interval_;
  return startup_.expected(config_.caches_kept);
}

double HorizonPolicy::finished_rate(const PoolSignals& s) {
  if (s.finished_per_s > 0) return s.finished_per_s;
  if (s.mean_generation_tokens > 0) return s.generation_tokens_per_s / s.mean_generation_tokens;
  return 0;
}

double HorizonPolicy::arrival_estimate(const PoolSignals& s, Nanos now) {
  const double in_system = std::max(0.0, s.waiting) + std::max(0.0, s.running);
  double last = 0;
  if (s.arrival_rate && std::isfinite(*s.arrival_rate)) {
    last = std::max(0.0, *s.arrival_rate);
  } else {
    // Conservation: what arrived is what finished plus what the pool holds more of.
    const double finished = finished_rate(s);
    last = std::isfinite(finished) ? std::max(0.0, finished) : 0;
    if (last_at_ && now > *last_at_) {
      last = std::max(0.0, last + (in_system - last_in_system_) / to_seconds(now - *last_at_));
    }
  }
  if (last_at_ && now > *last_at_) interval_ = now - *last_at_;
  last_at_ = now;
  last_in_system_ = in_system;
  rates_.emplace_back(now, last);
  while (rates_.size() > 1 && rates_.front().first <= now - kRateWindow) rates_.pop_front();
  return last;
}

HorizonPlan HorizonPolicy::plan(const PoolSignals& s, Nanos now, int32_t current, int32_t ready) {
  HorizonPlan p;
  HorizonInputs& in = p.inputs;
  const HorizonConfig& c = config_;

  // 1. Startup (observe_startups ran), the horizon.
  const Nanos startup = startup_.expected(c.caches_kept);
  in.last_rate = arrival_estimate(s, now);
  horizon_ = startup + interval_;
  in.startup_s = to_seconds(startup);

  // 2. Load now, forecast at the horizon, error band.
  double sum = 0;
  for (const auto& [at, r] : rates_) sum += r;
  in.arrival_rate = sum / static_cast<double>(rates_.size());
  // The smoothed rate before this interval: what the burst path compares with.
  const double before = rates_.size() > 1
                            ? (sum - in.last_rate) / static_cast<double>(rates_.size() - 1)
                            : in.arrival_rate;
  const double expected_now = forecaster_->predict(now).value_or(in.arrival_rate);
  band_.observe(now, in.arrival_rate);
  forecaster_->observe(now, in.arrival_rate);
  in.forecast_rate = std::max(0.0, forecaster_->predict(now + horizon_).value_or(in.arrival_rate));
  band_.predict(now + horizon_, in.forecast_rate);
  in.band = std::max(band_.factor(c.quantile), c.headroom);
  in.sized_rate = in.forecast_rate * in.band;

  // 3. Per-replica capacity: the queueing model on the observed mix, corrected.
  if (s.mean_prompt_tokens > 0 || s.mean_generation_tokens > 0) {
    mix_ = RequestMix{.prompt_tokens = s.mean_prompt_tokens,
                      .output_tokens = s.mean_generation_tokens,
                      .output_tokens_sd = s.generation_tokens_sd,
                      .prefix_hit_rate = c.prefix_hit_rate.value_or(s.prefix_hit_rate.value_or(0))};
  }
  if (!mix_) {
    // Nothing finished yet: no mix to size on. Hold what there is (or start one).
    p.needed = std::max(current, s.waiting > 0 || in.arrival_rate > 0 ? 1 : 0);
    p.demand = p.needed;
    p.reason = fmt::format("horizon: no request mix measured yet, holding {}", p.needed);
    return p;
  }
  in.prefix_hit_rate = mix_->prefix_hit_rate;
  const ReplicaCapacity cap = replica_capacity(c.replica, *mix_, c.ttft_s, c.ttft_quantile);
  in.model_rate = cap.rate;
  in.servers = cap.queue.servers;
  in.service_s = cap.queue.service_s;
  const LatencySummary& t = s.ttft;
  const double measured = c.ttft_quantile >= 0.99 ? t.p99 : c.ttft_quantile >= 0.9 ? t.p90 : t.p50;
  in.correction =
      correction_.update({.measured_ttft = measured,
                          .have_ttft = t.samples > 0,
                          .measured_itl = s.itl.p90,
                          .have_itl = s.itl.samples > 0,
                          .load_per_ready = ready > 0 ? in.arrival_rate / ready : 0,
                          .model_rate = cap.rate,
                          .backlog_per_ready = ready > 0 ? s.waiting / ready : s.waiting,
                          .finished_per_ready = ready > 0 ? finished_rate(s) / ready : 0,
                          .model_saturation = cap.saturation,
                          .ready = ready},
                         now);
  in.per_replica = cap.rate * in.correction;

  // The load now includes draining the queue within one startup.
  const double backlog_rate = std::max(0.0, s.waiting) / std::max(in.startup_s, 1.0);
  in.need_now = replicas_for(in.arrival_rate + backlog_rate, in.per_replica);
  in.need_horizon = replicas_for(in.sized_rate, in.per_replica);
  p.demand = in.per_replica > 0 ? in.sized_rate / in.per_replica : 0;

  // 4. Burst fast path: a jump the forecast did not expect, or a growing queue.
  const bool rising = in.last_rate > std::max(expected_now, before) * (1 + c.burst_threshold);
  const bool queue_growing = s.waiting > std::max(1, ready) && s.waiting > last_waiting_;
  last_waiting_ = s.waiting;
  int32_t up = std::max(in.need_now, in.need_horizon);
  if (c.burst && (rising || queue_growing)) {
    in.burst = true;
    // The rate the burst runs at, plus what drains the queue within one startup.
    const double rate = std::max(in.last_rate, in.arrival_rate) + backlog_rate;
    in.burst_replicas = std::min(replicas_for(rate, in.per_replica), current + c.burst_max_step);
    up = std::max(up, in.burst_replicas);
  }

  // 5. Scale-down guard: the banded forecast over startup + margin.
  in.guard_rate = in.arrival_rate;
  const Nanos span = startup + c.margin;
  for (int k = 0; k <= kGuardPoints; ++k) {
    const double f = forecaster_->predict(now + span * k / kGuardPoints).value_or(0);
    in.guard_rate = std::max(in.guard_rate, f * in.band);
  }
  in.need_guard = replicas_for(in.guard_rate, in.per_replica);

  // 6. Standby replicas on top; out of routing while the routed ones take the load now.
  const int32_t routed_now = std::max(in.need_now, in.burst ? in.burst_replicas : 0);
  int32_t routed = up;
  if (up + c.standby < current) routed = std::max(up, std::min(current - c.standby, in.need_guard));
  p.needed = routed + c.standby;
  in.standby = std::clamp(std::min(ready, p.needed) - routed_now, 0, c.standby);
  p.standby = in.standby;

  p.reason = fmt::format(
      "horizon: {:.1f} req/s now, forecast {:.1f} at +{:.0f} s x band {:.2f} = {:.1f} req/s / "
      "{:.2f} per replica (model {:.2f} x TTFT correction {:.2f}, {}) = {}",
      in.arrival_rate, in.forecast_rate, to_seconds(horizon_), in.band, in.sized_rate,
      in.per_replica, in.model_rate, in.correction, correction_.last_action(), in.need_horizon);
  if (in.burst) {
    p.reason += fmt::format(", burst ({} {:.1f} req/s, {:.0f} waiting) {}",
                            rising ? "rate" : "queue", in.last_rate, s.waiting, in.burst_replicas);
  }
  if (routed > up) p.reason += fmt::format(", guard {:.1f} req/s keeps {}", in.guard_rate, routed);
  if (c.standby > 0)
    p.reason += fmt::format(", +{} standby ({} out of routing)", c.standby, in.standby);
  return p;
}

std::vector<NamedInput> named_inputs(const HorizonInputs& in) {
  return {{"arrival_rate", in.arrival_rate},
          {"last_interval_rate", in.last_rate},
          {"forecast_rate", in.forecast_rate},
          {"band", in.band},
          {"sized_rate", in.sized_rate},
          {"guard_rate", in.guard_rate},
          {"model_rate_per_replica", in.model_rate},
          {"ttft_correction", in.correction},
          {"rate_per_replica", in.per_replica},
          {"model_servers", static_cast<double>(in.servers)},
          {"model_service_seconds", in.service_s},
          {"prefix_hit_rate", in.prefix_hit_rate},
          {"startup_seconds", in.startup_s},
          {"burst", in.burst ? 1.0 : 0.0},
          {"burst_replicas", static_cast<double>(in.burst_replicas)},
          {"need_now", static_cast<double>(in.need_now)},
          {"need_horizon", static_cast<double>(in.need_horizon)},
          {"need_guard", static_cast<double>(in.need_guard)},
          {"standby", static_cast<double>(in.standby)}};
}

std::vector<std::string> select_horizon_victims(const std::vector<ReplicaSignal>& replicas,
                                                int32_t count, int32_t keep_ready, Nanos now,
                                                Nanos expected_startup, double stuck_factor) {
  // (class, key1, key2, id): lower goes first.
  using Rank = std::tuple<int, int64_t, int64_t, const std::string*>;
  std::vector<Rank> ranked;
  for (const ReplicaSignal& r : replicas) {
    if (r.phase == ReplicaPhase::kDraining) continue;
    if (r.phase == ReplicaPhase::kStarting) {
      const bool stuck =
          expected_startup > 0 && static_cast<double>(now - r.launched_at) >
                                      stuck_factor * static_cast<double>(expected_startup);
      if (stuck) ranked.emplace_back(0, r.launched_at, 0, &r.id);
      continue;  // still warming: never drained
    }
    ranked.emplace_back(1, r.in_flight, -r.ready_at, &r.id);
  }
  const auto n = std::min<size_t>(ranked.size(), static_cast<size_t>(std::max(count, 0)));
  std::partial_sort(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(n), ranked.end(),
                    [](const Rank& a, const Rank& b) {
                      if (std::get<0>(a) != std::get<0>(b)) return std::get<0>(a) < std::get<0>(b);
                      if (std::get<1>(a) != std::get<1>(b)) return std::get<1>(a) < std::get<1>(b);
                      if (std::get<2>(a) != std::get<2>(b)) return std::get<2>(a) < std::get<2>(b);
                      return *std::get<3>(a) < *std::get<3>(b);
                    });
  int32_t ready = 0;
  for (const Rank& r : ranked) ready += std::get<0>(r) == 1;
  std::vector<std::string> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (std::get<0>(ranked[i]) == 1 && ready-- <= keep_ready) break;
    out.push_back(*std::get<3>(ranked[i]));
  }
  return out;
}

}  // namespace kvgate::scale
