// LatencyPredictor: per endpoint, an online model of a request's time to first token
// (TTFT) and time per output token (TPOT), learned from what the shells observe, and the
// measured error of its predictions.
//
// Two linear models per endpoint, fitted by recursive least squares with exponential
// forgetting (recent samples weigh more; an endpoint whose behaviour changes is relearned
// within ~1 / (1 - forgetting) samples):
//   TTFT = a0 + a1 x prefill_tokens/1000 + a2 x ahead/1000
//             + a3 x waiting + a4 x running                       (seconds)
//   TPOT = b0 + b1 x (running + 1) + b2 x kv_usage                 (seconds)
// Prefill is compute-bound (time grows with the tokens to compute, this request's and
// those ahead of it); decode is memory-bound (time per step grows with the batch and the
// KV it reads). The models start from priors (TTFT: the tokens at
// prior_prefill_tokens_per_second; TPOT: prior_tpot), and a pool-wide pair of models
// learns from every endpoint's samples: an endpoint with fewer than min_samples of its
// own is predicted by the pool's (engines of one pool are usually alike). Predictions
// are clamped to >= 0.
//
// The queue position: `ahead` is the prefill still to compute before this request's,
//   ahead = max(0, queued_prefill_tokens - prefill_elapsed x 1000 / a2)
// the tokens routed there and not started (waiting, or in a prefill that has not ended),
// less what the endpoint has computed of them since its queue last moved, at the rate
// the model itself has learned for them (a2: seconds per kilotoken ahead; no credit
// while a2 is not positive). So a request routed just after a long prompt's prefill
// began is predicted to wait for the rest of it, not all of it; with prefill_elapsed 0
// the term is the queued tokens, as before. Each model (an endpoint's, the pool's) uses
// its own a2, at prediction and when it learns.
//
// The error: each observation is first predicted with the model as it stands (before
// the sample teaches it), and its absolute percentage error |predicted - measured| /
// measured is accumulated per endpoint and for the pool: mean absolute percentage error
// (MAPE), what the gateway publishes and the simulator reports.
//
//   LatencyPredictor p({});
//   LatencyFeatures f{.prefill_tokens = 900, .waiting = 2, .running = 8, .kv_usage = 0.3};
//   LatencyPrediction guess = p.predict(endpoint, f);           // at routing
//   ... p.observe_ttft(endpoint, f, first_token_at - routed_at);  // the same features
//   ... p.observe_tpot(endpoint, f, (finished_at - first_token_at) / (tokens - 1));
//   double mape = p.ttft_error().mape();
//
// Bounded: a fixed-size state per endpoint id seen (about 0.4 KiB) and one for the pool;
// the covariance is capped so that a feature that never varies (an idle endpoint's
// queue) cannot grow it without limit. Cost: predict O(1) (~20 multiply-adds), observe
// O(1) (~70 for TTFT). Deterministic: plain arithmetic on the inputs, no clock, no
// randomness. Thread-safety: none; owned by the router's strand.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/common/result.h"
#include "core/common/time.h"
#include "core/kv/prefix_index.h"

namespace kvgate::route {

// What the router knows of an endpoint when it places a request there.
struct LatencyFeatures {
  double prefill_tokens = 0;         // this request's prompt tokens not cached there
  double queued_prefill_tokens = 0;  // prefill tokens routed there before it, not done
  // Seconds since that queue last moved (RouterLoad::prefill_moved_at: a first token came
  // back, or the queue went from empty to not): what the endpoint has spent on it since.
  // 0 when nothing is queued, or unknown (then no progress is credited).
  double prefill_elapsed = 0;
  double waiting = 0;   // requests waiting there (EffectiveLoad::waiting)
  double running = 0;   // requests running there (EffectiveLoad::running)
  double kv_usage = 0;  // fraction of its KV cache in use, 0..1
};

struct LatencyPrediction {
  Nanos ttft = 0;
  Nanos tpot = 0;
  // TTFT samples of the model that predicted: the endpoint's own (>= min_samples), or
  // else the pool's (from_pool). 0: the priors alone.
  uint64_t samples = 0;
  bool from_pool = true;
};

struct LatencyPredictorConfig {
  // Weight of the previous samples at each new one, in (0, 1]: 1 never forgets.
  double forgetting = 0.995;
  // TTFT samples an endpoint needs before its own model predicts for it.
  uint32_t min_samples = 16;
  // Priors: prefill speed (TTFT) and time per output token.
  double prior_prefill_tokens_per_second = 10'000;
  Nanos prior_tpot = 30 * kMillisecond;

  // Error naming the first field out of range.
  Status validate() const;
  bool operator==(const LatencyPredictorConfig&) const = default;
};

// Mean absolute percentage error of predictions against measurements. Measurements of
// 0 or less are not counted (the percentage is undefined).
struct PredictionError {
  uint64_t count = 0;
  double sum_ape = 0;  // sum of |predicted - measured| / measured
  void add(double predicted, double measured);
  // Mean APE as a fraction (0.1 = 10%); 0 when nothing was counted.
  double mape() const { return count == 0 ? 0 : sum_ape / static_cast<double>(count); }
};

class LatencyPredictor {
 public:
  // REQUIRES: config.validate() ok.
  explicit LatencyPredictor(LatencyPredictorConfig config);

  LatencyPrediction predict(kv::EndpointId endpoint, const LatencyFeatures& f) const;
  // A request routed to `endpoint` with features `f` got its first token `measured`
  // after routing. Negative or non-finite measurements are ignored.
  void observe_ttft(kv::EndpointId endpoint, const LatencyFeatures& f, Nanos measured);
  // Its output tokens came `measured` apart on average (after the first).
  void observe_tpot(kv::EndpointId endpoint, const LatencyFeatures& f, Nanos measured);
  // The endpoint left the pool (or its id is reused): its model and error start over.
  void forget(kv::EndpointId endpoint);
  // The prefill tokens the model that predicts for `endpoint` takes to be still ahead of
  // a request with features `f` (`ahead` above).
  double prefill_tokens_ahead(kv::EndpointId endpoint, const LatencyFeatures& f) const;

  // Errors of the whole pool (every endpoint's samples, forgotten ones included) and of
  // one endpoint (zero when unknown).
  const PredictionError& ttft_error() const { return pool_.ttft_error; }
  const PredictionError& tpot_error() const { return pool_.tpot_error; }
  PredictionError ttft_error(kv::EndpointId endpoint) const;
  PredictionError tpot_error(kv::EndpointId endpoint) const;
  // TTFT samples the endpoint's own model has learned from.
  uint64_t samples(kv::EndpointId endpoint) const;

  const LatencyPredictorConfig& config() const { return config_; }

 private:
  // Recursive least squares over N features: the estimate and its covariance.
  template <size_t N>
  struct Rls {
    std::array<double, N> theta{};
    std::array<double, N * N> p{};  // row-major, symmetric
    uint64_t samples = 0;
    void reset(const std::array<double, N>& prior);
    double predict(const std::array<double, N>& x) const;
    void update(const std::array<double, N>& x, double y, double forgetting);
  };
  struct Models {
    Rls<5> ttft;
    Rls<3> tpot;
    PredictionError ttft_error;
    PredictionError tpot_error;
  };

  // The features of each model: TTFT's depend on the model's own rate for the queue.
  static std::array<double, 5> ttft_x(const LatencyFeatures& f, const Rls<5>& model);
  static std::array<double, 3> tpot_x(const LatencyFeatures& f);
  Models fresh() const;
  Models& at(kv::EndpointId endpoint);  // created from the priors on first use
  const Models* find(kv::EndpointId endpoint) const;
  // The models that predict for `endpoint`: its own (min_samples or more), else the pool's.
  const Models& predicting(kv::EndpointId endpoint) const;
  // One measurement (seconds of it: y) of a request predicted `guess` (before it): the
  // endpoint's and the pool's `error` count it, their `model` learns make_x(model) -> y.
  template <size_t N, typename MakeX>
  void learn(kv::EndpointId endpoint, const MakeX& make_x, double guess, Nanos measured,
             Rls<N> Models::*model, PredictionError Models::*error);

  const LatencyPredictorConfig config_;
  std::array<double, 5> ttft_prior_{};
  std::array<double, 3> tpot_prior_{};
  Models pool_;
  std::vector<std::optional<Models>> endpoints_;  // by id
};

}  // namespace kvgate::route
