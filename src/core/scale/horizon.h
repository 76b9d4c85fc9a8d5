// The horizon policy: sizes an aggregated pool for the load one startup ahead, with a
// queueing model for what a replica takes and an error band learned from its own
// forecasts (docs/autoscaler.md, "The horizon policy").
//
// A replica asked for now serves from now + startup, so the pool is sized for the load
// then. One decision (HorizonPolicy::plan):
//   1. startup: StartupEstimator's quantile of the pool's observed launch-to-ready
//      times, cold and caches-kept apart, starting from the profile's phase table;
//   2. load: the arrival rate now (measured, or finished + growth of the queue), its
//      forecast at now + startup + one interval, times the error band: the chosen quantile
//      of actual / forecast over the forecasts that have come due (ErrorBand);
//   3. per-replica capacity: replica_capacity() (queueing.h) from the profile and the
//      observed mix, times the TTFT correction (TtftCorrection) that learns how far the
//      model is from the measured TTFT, only while the pool is settled and within what
//      the model says it takes, so missing capacity is never mistaken for model error;
//   4. the burst fast path (BurstPath): the last interval's rate well above the forecast,
//      or waiting requests growing, sizes for that rate plus what drains the queue within
//      one startup, at most `burst.max_step` replicas above the pool per interval;
//   5. scale-down guard: the pool only shrinks to what the banded forecast needs over
//      [now, now + startup + margin], so a replica released now is not asked for again
//      before a new one could be up;
//   6. standby: `standby` replicas above the need, kept started and out of routing while
//      the load is below what the routed replicas take.
// Victims (select_horizon_victims): stuck replicas, then ready ones, emptiest first and
// among equals the youngest; never a replica still starting.
//
// Thread-safety: none; owned by one Autoscaler.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "core/common/time.h"
#include "core/scale/forecast.h"
#include "core/scale/queueing.h"
#include "core/scale/signals.h"

namespace kvgate::scale {

struct HorizonConfig {
  double ttft_s = 1.0;          // TTFT target
  double ttft_quantile = 0.99;  // of requests within it (the queueing model's target)
  // ITL target for the correction (0: TTFT alone): the measured ITL p90 over it at a
  // load the model says a replica takes lowers the factor as a TTFT over target does.
  double itl_s = 0;
  ReplicaProfile replica;
  std::optional<double> prefix_hit_rate;  // set: use this, not the measured one

  double quantile = 0.95;              // of the load at the horizon the pool is sized for
  Nanos band_window = 3600 * kSecond;  // forecast errors remembered
  double band_max = 2.0;               // the band's factor is clamped to [1 / band_max, band_max]
  double headroom = 1.0;               // and never below this: headroom before errors are seen

  // Startup priors (0: the autoscaler's cold_start.startup_time) and which kind of start
  // the pool's next replicas make when the actuator does not say.
  Nanos startup_cold = 0;
  Nanos startup_caches_kept = 0;
  bool caches_kept = false;
  double startup_quantile = 0.9;  // of observed startups: the horizon
  Nanos margin = 60 * kSecond;    // scale-down guard: startup + margin

  bool ttft_correction = true;
  double correction_min = 0.5;
  double correction_max = 1.5;
  double correction_gain = 0.1;  // log-step per decision
  double correction_deadband = 0.2;
  Nanos settle = 60 * kSecond;  // the pool unchanged and without backlog this long

  bool burst = true;
  double burst_threshold = 0.25;  // last interval's rate above the forecast by this
  int32_t burst_max_step = 4;     // replicas added by the fast path per decision

  int32_t standby = 0;  // replicas kept started but out of routing
};

// Learns launch-to-ready times per kind of start.
class StartupEstimator {
 public:
  StartupEstimator(Nanos cold_prior, Nanos caches_kept_prior, double quantile);
  // Learns from replicas that became ready since the last call (by id); a replica that
  // does not say how it started counts as `default_caches_kept`.
  void observe(const std::vector<ReplicaSignal>& replicas, bool default_caches_kept);
  // The quantile of the kind's recent startups, or its prior before one was seen.
  Nanos expected(bool caches_kept) const;
  size_t observations(bool caches_kept) const { return samples_[caches_kept].size(); }

 private:
  static constexpr size_t kKeep = 32;
  Nanos prior_[2];
  double quantile_;
  std::deque<Nanos> samples_[2];
  std::unordered_set<std::string> seen_ready_;  // pruned when it outgrows the pool
};

// The forecast's recent errors: every decision records what it forecast for its horizon;
// when that time comes the ratio actual / forecast is kept for `window`.
class ErrorBand {
 public:
  ErrorBand(Nanos window, double max_factor) : window_(window), max_(max_factor) {}
  void predict(Nanos due, double forecast);
  void observe(Nanos now, double actual);
  // The quantile of the ratios kept, within [1 / max, max]; 1 before any came due.
  double factor(double quantile) const;
  size_t samples() const { return ratios_.size(); }

 private:
  Nanos window_;
  double max_;
  std::deque<std::pair<Nanos, double>> pending_;  // (due, forecast), by due time
  std::deque<std::pair<Nanos, double>> ratios_;   // (at, actual / forecast)
};

// A multiplier on the model's per-replica capacity, learned from what the pool measures
// once it has settled (the same ready replicas for `settle`):
//   - saturated (a backlog of >= 1 waiting request per ready replica): the replicas run
//     flat out, so what they complete per second is their true saturation rate; the
//     factor moves towards measured / modelled saturation;
//   - otherwise TTFT over target (beyond the deadband) at a load within what the model
//     says a replica takes means the model is optimistic: lower; TTFT well under target
//     at >= 80 % of that load gives an earlier lowering back (half the gain, up to 1).
//     Only saturation raises it above 1: TTFT stays low right up to a sharp knee.
// Over target at a load beyond the model's rate says nothing about the model (capacity is
// missing), and a pool sized with headroom never runs near the limit, so the factor does
// not chase the replica count it causes: no oscillation.
class TtftCorrection {
 public:
  explicit TtftCorrection(const HorizonConfig& c) : config_(c) {}
  struct Input {
    double measured_ttft = 0;  // the measured quantile matching the target's
    bool have_ttft = false;
    double measured_itl = 0;  // the measured ITL p90 (used when HorizonConfig::itl_s > 0)
    bool have_itl = false;
    double load_per_ready = 0;      // arrivals/s per ready replica
    double model_rate = 0;          // the model's requests/s per replica (before correction)
    double backlog_per_ready = 0;   // waiting requests per ready replica
    double finished_per_ready = 0;  // requests/s each ready replica completed
    double model_saturation = 0;    // the model's requests/s per replica at saturation
    int32_t ready = 0;
  };
  // Updates and returns the factor.
  double update(const Input& in, Nanos now);
  double factor() const { return factor_; }
  const char* last_action() const { return action_; }

 private:
  HorizonConfig config_;
  double factor_ = 1;
  int32_t last_ready_ = -1;
  Nanos unsettled_at_ = 0;
  const char* action_ = "hold";
};

// Everything one horizon decision used, for logs, metrics and the admin API.
struct HorizonInputs {
  double arrival_rate = 0;   // requests/s now (smoothed)
  double last_rate = 0;      // the last interval's
  double forecast_rate = 0;  // at the horizon
  double band = 1;           // error band factor
  double sized_rate = 0;     // what the pool is sized for
  double guard_rate = 0;     // the highest banded forecast over startup + margin
  double model_rate = 0;     // requests/s per replica, the queueing model
  double correction = 1;     // TTFT correction on it
  double per_replica = 0;    // model x correction
  int32_t servers = 0;       // sequence slots per replica in the model
  double service_s = 0;
  double startup_s = 0;  // the horizon's startup estimate
  bool burst = false;
  int32_t burst_replicas = 0;
  int32_t need_now = 0;
  int32_t need_horizon = 0;
  int32_t need_guard = 0;
  int32_t standby = 0;
  double prefix_hit_rate = 0;
};

// The inputs by name (snake_case, units in the name), in a fixed order: the
// kvgate_autoscaler_horizon{input} gauge and the admin API's "inputs".
struct NamedInput {
  std::string_view name;
  double value;
};
std::vector<NamedInput> named_inputs(const HorizonInputs& in);

struct HorizonPlan {
  int32_t needed = 0;   // replicas, standby included
  int32_t standby = 0;  // of which out of routing
  double demand = 0;    // unrounded replicas for the sized load
  HorizonInputs inputs;
  std::string reason;
};

class HorizonPolicy {
 public:
  // `fallback_startup`: the prior when the config's are 0.
  HorizonPolicy(HorizonConfig config, const ForecastConfig& forecast, Nanos interval_hint,
                Nanos fallback_startup);

  // `current`: replicas ready + starting (not draining), `ready` of them. Call once
  // per decision.
  HorizonPlan plan(const PoolSignals& s, Nanos now, int32_t current, int32_t ready);
  // Learns from the replicas (once per decision, before plan) and returns the expected
  // startup of the pool's next replica.
  Nanos observe_startups(const std::vector<ReplicaSignal>& replicas);
  Nanos horizon() const { return horizon_; }
  const HorizonConfig& config() const { return config_; }

 private:
  double arrival_estimate(const PoolSignals& s, Nanos now);
  static int32_t replicas_for(double rate, double per_replica);
  static double finished_rate(const PoolSignals& s);

  HorizonConfig config_;
  StartupEstimator startup_;
  ErrorBand band_;
  TtftCorrection correction_;
  std::unique_ptr<Forecaster> forecaster_;  // constant when none is configured
  Nanos interval_ = 15 * kSecond;           // learned from the calls' spacing
  Nanos horizon_ = 0;
  std::optional<Nanos> last_at_;
  double last_in_system_ = 0;
  double last_waiting_ = 0;
  std::deque<std::pair<Nanos, double>> rates_;  // (at, last interval's rate), 30 s
  std::optional<RequestMix> mix_;               // the last measured
};

// Ids of up to `count` replicas to drain: stuck starting replicas first (longest stuck
// first), then ready ones by fewest requests in flight, then youngest (latest ready),
// then id, leaving at least `keep_ready` ready ones (a pool does not give up serving
// replicas for ones still booting). Starting replicas that are not stuck are never picked.
std::vector<std::string> select_horizon_victims(const std::vector<ReplicaSignal>& replicas,
                                                int32_t count, int32_t keep_ready, Nanos now,
                                                Nanos expected_startup, double stuck_factor);

}  // namespace kvgate::scale
