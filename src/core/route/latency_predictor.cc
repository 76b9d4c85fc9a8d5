#include "core/route/latency_predictor.h"

#include <algorithm>
#include <cmath>

namespace kvgate::route {
namespace {

// Initial covariance (diagonal): large against the data's information, so a few samples
// outweigh the priors.
constexpr double kInitialVariance = 100;
// Cap of the covariance's trace per feature: without it, forgetting inflates the
// variance along a feature that never varies by 1 / forgetting per sample.
constexpr double kMaxVariance = 1e4;
// A rate for the queued tokens below this many seconds per kilotoken (faster than a
// billion tokens a second) is taken as none learned: no progress is credited.
constexpr double kMinSecondsPerKilotoken = 1e-6;

// Kilotokens of prefill still ahead (the header's `ahead`), at `seconds_per_kilotoken`.
double ahead_kilotokens(const LatencyFeatures& f, double seconds_per_kilotoken) {
  const double queued = f.queued_prefill_tokens / 1000;
  const double elapsed = f.prefill_elapsed;
  if (!(elapsed > 0) || !std::isfinite(elapsed) || !(queued > 0) ||
      !(seconds_per_kilotoken > kMinSecondsPerKilotoken)) {
    return queued;
  }
  return std::max(0.0, queued - elapsed / seconds_per_kilotoken);
}

Nanos to_nanos(double s) {
  if (!(s > 0)) return 0;
  return s >= 1e9 ? static_cast<Nanos>(1e18) : seconds(s);  // clamp to ~31 years
}

}  // namespace

Status LatencyPredictorConfig::validate() const {
  if (!(forgetting > 0 && forgetting <= 1)) {
    return Error("latency_targets.forgetting must be in (0, 1]");
  }
  if (!(prior_prefill_tokens_per_second > 0)) {
    return Error("latency_targets.prior_prefill_tokens_per_second must be > 0");
  }
  if (prior_tpot < 0) return Error("latency_targets.prior_tpot must be >= 0");
  return {};
}

void PredictionError::add(double predicted, double measured) {
  if (!(measured > 0) || !std::isfinite(predicted)) return;
  ++count;
  sum_ape += std::abs(predicted - measured) / measured;
}

template <size_t N>
void LatencyPredictor::Rls<N>::reset(const std::array<double, N>& prior) {
  theta = prior;
  p.fill(0);
  for (size_t i = 0; i < N; ++i) p[i * N + i] = kInitialVariance;
  samples = 0;
}

template <size_t N>
double LatencyPredictor::Rls<N>::predict(const std::array<double, N>& x) const {
  double y = 0;
  for (size_t i = 0; i < N; ++i) y += theta[i] * x[i];
  return y;
}

template <size_t N>
void LatencyPredictor::Rls<N>::update(const std::array<double, N>& x, double y, double forgetting) {
  std::array<double, N> px{};  // P x
  for (size_t i = 0; i < N; ++i) {
    for (size_t j = 0; j < N; ++j) px[i] += p[i * N + j] * x[j];
  }
  double denom = forgetting;
  for (size_t i = 0; i < N; ++i) denom += x[i] * px[i];
  if (!(denom > 0) || !std::isfinite(denom)) return;
  const double err = y - predict(x);
  for (size_t i = 0; i < N; ++i) theta[i] += px[i] / denom * err;
  // P = (P - P x x' P / denom) / forgetting, kept symmetric.
  double trace = 0;
  for (size_t i = 0; i < N; ++i) {
    for (size_t j = i; j < N; ++j) {
      const double v = (p[i * N + j] - px[i] * px[j] / denom) / forgetting;
      p[i * N + j] = v;
      p[j * N + i] = v;
    }
    trace += p[i * N + i];
  }
  if (trace > kMaxVariance * N) {
    const double scale = kMaxVariance * N / trace;
    for (double& v : p) v *= scale;
  }
  ++samples;
}

LatencyPredictor::LatencyPredictor(LatencyPredictorConfig config) : config_(config) {
  const double per_kilotoken = 1000.0 / config_.prior_prefill_tokens_per_second;
  ttft_prior_ = {0, per_kilotoken, per_kilotoken, 0, 0};
  tpot_prior_ = {to_seconds(config_.prior_tpot), 0, 0};
  pool_ = fresh();
}

std::array<double, 5> LatencyPredictor::ttft_x(const LatencyFeatures& f, const Rls<5>& model) {
  return {1.0, f.prefill_tokens / 1000, ahead_kilotokens(f, model.theta[2]), f.waiting, f.running};
}

std::array<double, 3> LatencyPredictor::tpot_x(const LatencyFeatures& f) {
  return {1.0, f.running + 1, f.kv_usage};
}

LatencyPredictor::Models LatencyPredictor::fresh() const {
  Models m;
  m.ttft.reset(ttft_prior_);
  m.tpot.reset(tpot_prior_);
  return m;
}

LatencyPredictor::Models& LatencyPredictor::at(kv::EndpointId endpoint) {
  if (endpoint >= endpoints_.size()) endpoints_.resize(size_t{endpoint} + 1);
  std::optional<Models>& m = endpoints_[endpoint];
  if (!m) m = fresh();
  return *m;
}

const LatencyPredictor::Models* LatencyPredictor::find(kv::EndpointId endpoint) const {
  if (endpoint >= endpoints_.size() || !endpoints_[endpoint]) return nullptr;
  return &*endpoints_[endpoint];
}

const LatencyPredictor::Models& LatencyPredictor::predicting(kv::EndpointId endpoint) const {
  const Models* own = find(endpoint);
  return own && own->ttft.samples >= config_.min_samples ? *own : pool_;
}

LatencyPrediction LatencyPredictor::predict(kv::EndpointId endpoint,
                                            const LatencyFeatures& f) const {
  const Models& m = predicting(endpoint);
  LatencyPrediction out;
  out.ttft = to_nanos(m.ttft.predict(ttft_x(f, m.ttft)));
  out.tpot = to_nanos(m.tpot.predict(tpot_x(f)));
  out.samples = m.ttft.samples;
  out.from_pool = (&m == &pool_);
  return out;
}

double LatencyPredictor::prefill_tokens_ahead(kv::EndpointId endpoint,
                                              const LatencyFeatures& f) const {
  return 1000 * ahead_kilotokens(f, predicting(endpoint).ttft.theta[2]);
}

template <size_t N, typename MakeX>
void LatencyPredictor::learn(kv::EndpointId endpoint, const MakeX& make_x, double guess,
                             Nanos measured, Rls<N> Models::*model,
                             PredictionError Models::*error) {
  const double y = to_seconds(measured);
  Models& m = at(endpoint);
  (m.*error).add(guess, y);
  (pool_.*error).add(guess, y);
  // Each model learns from its own features (TTFT's queue term uses the model's rate).
  const std::array<double, N> own_x = make_x(m.*model);
  const std::array<double, N> pool_x = make_x(pool_.*model);
  (m.*model).update(own_x, y, config_.forgetting);
  (pool_.*model).update(pool_x, y, config_.forgetting);
}

void LatencyPredictor::observe_ttft(kv::EndpointId endpoint, const LatencyFeatures& f,
                                    Nanos measured) {
  if (measured < 0) return;
  learn(
      endpoint, [&f](const Rls<5>& model) { return ttft_x(f, model); },
      to_seconds(predict(endpoint, f).ttft), measured, &Models::ttft, &Models::ttft_error);
}

void LatencyPredictor::observe_tpot(kv::EndpointId endpoint, const LatencyFeatures& f,
                                    Nanos measured) {
  if (measured < 0) return;
  learn(
      endpoint, [&f](const Rls<3>&) { return tpot_x(f); }, to_seconds(predict(endpoint, f).tpot),
      measured, &Models::tpot, &Models::tpot_error);
}

void LatencyPredictor::forget(kv::EndpointId endpoint) {
  if (endpoint < endpoints_.size()) endpoints_[endpoint].reset();
}

PredictionError LatencyPredictor::ttft_error(kv::EndpointId endpoint) const {
  const Models* m = find(endpoint);
  return m ? m->ttft_error : PredictionError{};
}

PredictionError LatencyPredictor::tpot_error(kv::EndpointId endpoint) const {
  const Models* m = find(endpoint);
  return m ? m->tpot_error : PredictionError{};
}

uint64_t LatencyPredictor::samples(kv::EndpointId endpoint) const {
  const Models* m = find(endpoint);
  return m ? m->ttft.samples : 0;
}

}  // namespace kvgate::route
