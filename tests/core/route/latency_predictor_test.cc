// LatencyPredictor: priors, learning a linear truth, the queue-position term (prefill
// still ahead), the pool model for new endpoints, bounded state under a feature that
// never varies or inputs out of range, determinism, and MAPE arithmetic.
#include "core/route/latency_predictor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/common/rng.h"

namespace kvgate::route {
// Named after the file: the tests compile in unity batches (docs/development.md).
namespace latency_predictor_test {

// The truth the engine follows in these tests (seconds). It computes the prefill queued
// ahead at 30 us a token (33,333 tokens/s), and has been at it for prefill_elapsed.
constexpr double kQueuedSecondsPerToken = 0.00003;
double true_ahead_tokens(const LatencyFeatures& f) {
  return std::max(0.0, f.queued_prefill_tokens - f.prefill_elapsed / kQueuedSecondsPerToken);
}
double true_ttft(const LatencyFeatures& f) {
  return 0.015 + 0.00008 * f.prefill_tokens + kQueuedSecondsPerToken * true_ahead_tokens(f) +
         0.004 * f.waiting + 0.001 * f.running;
}
double true_tpot(const LatencyFeatures& f) {
  return 0.008 + 0.0007 * (f.running + 1) + 0.01 * f.kv_usage;
}

LatencyFeatures random_features(Rng& rng) {
  LatencyFeatures f;
  f.prefill_tokens = static_cast<double>(16 + rng.below(4000));
  f.queued_prefill_tokens = static_cast<double>(rng.below(20000));
  f.waiting = static_cast<double>(rng.below(8));
  f.running = static_cast<double>(rng.below(32));
  f.kv_usage = rng.uniform();
  return f;
}
// With a queue the endpoint has been computing for up to 0.4 s since it last moved: up
// to 13,333 of its tokens done, so that some requests have part of the queue ahead and
// others none of it.
LatencyFeatures queued_features(Rng& rng) {
  LatencyFeatures f = random_features(rng);
  f.prefill_elapsed = 0.4 * rng.uniform();
  return f;
}

// Feeds `n` noiseless samples of the truth to `endpoint` (with queue progress when
// `in_queue`).
void teach(LatencyPredictor& p, kv::EndpointId endpoint, int n, Rng& rng, bool in_queue = false) {
  for (int i = 0; i < n; ++i) {
    const LatencyFeatures f = in_queue ? queued_features(rng) : random_features(rng);
    p.observe_ttft(endpoint, f, seconds(true_ttft(f)));
    p.observe_tpot(endpoint, f, seconds(true_tpot(f)));
  }
}

double relative_error(Nanos predicted, double truth) {
  return std::abs(to_seconds(predicted) - truth) / truth;
}

TEST(LatencyPredictor, PredictsThePriorsBeforeAnySample) {
  LatencyPredictor p({.prior_prefill_tokens_per_second = 10'000, .prior_tpot = 25 * kMillisecond});
  const LatencyPrediction guess =
      p.predict(3, {.prefill_tokens = 1000, .queued_prefill_tokens = 500, .waiting = 4});
  EXPECT_NEAR(to_seconds(guess.ttft), 0.15, 1e-9);  // 1500 tokens at 10k/s
  EXPECT_NEAR(to_seconds(guess.tpot), 0.025, 1e-9);
  EXPECT_EQ(guess.samples, 0u);
  EXPECT_TRUE(guess.from_pool);
  EXPECT_EQ(p.samples(3), 0u);
}

TEST(LatencyPredictor, LearnsALinearTruthFromNoiselessSamples) {
  LatencyPredictor p({.min_samples = 16});
  Rng rng(7);
  teach(p, 3, 400, rng);
  EXPECT_EQ(p.samples(3), 400u);
  Rng fresh(99);
  for (int i = 0; i < 50; ++i) {
    const LatencyFeatures f = random_features(fresh);
    const LatencyPrediction guess = p.predict(3, f);
    EXPECT_FALSE(guess.from_pool);
    EXPECT_EQ(guess.samples, 400u);
    EXPECT_LT(relative_error(guess.ttft, true_ttft(f)), 0.02) << i;
    EXPECT_LT(relative_error(guess.tpot, true_tpot(f)), 0.02) << i;
  }
  // The error measured along the way falls as it learns: the pool's MAPE over all 400
  // samples is well below the priors' error on this truth.
  EXPECT_EQ(p.ttft_error().count, 400u);
  EXPECT_LT(p.ttft_error().mape(), 0.2);
}

// The queue-position term: the queued prefill less what the endpoint computed of it since
// its queue last moved, at the model's own rate. From noiseless samples of a truth with
// that term, the model learns the rate (so what is ahead) and the TTFT within 2%; the
// pool's model, which saw the same samples with its own rate, too.
TEST(LatencyPredictor, LearnsTheQueueAheadTermFromNoiselessSamples) {
  LatencyPredictor p({.min_samples = 16});
  Rng rng(21);
  teach(p, 3, 1500, rng, /*in_queue=*/true);
  Rng fresh(77);
  int partly_ahead = 0;
  int none_ahead = 0;
  for (int i = 0; i < 50; ++i) {
    const LatencyFeatures f = queued_features(fresh);
    const LatencyPrediction guess = p.predict(3, f);
    EXPECT_FALSE(guess.from_pool);
    EXPECT_LT(relative_error(guess.ttft, true_ttft(f)), 0.02) << i;
    const double ahead = true_ahead_tokens(f);
    EXPECT_NEAR(p.prefill_tokens_ahead(3, f), ahead, 0.02 * f.queued_prefill_tokens + 1) << i;
    partly_ahead += ahead > 0 && ahead < f.queued_prefill_tokens;
    none_ahead += ahead == 0;
    const LatencyPrediction pooled = p.predict(8, f);  // never seen: the pool's model
    EXPECT_TRUE(pooled.from_pool);
    EXPECT_LT(relative_error(pooled.ttft, true_ttft(f)), 0.02) << i;
  }
  // Both sides of the kink were probed.
  EXPECT_GT(partly_ahead, 10);
  EXPECT_GT(none_ahead, 5);
  // The queue is the one thing that moved: without the progress, the same model predicts
  // the whole queue ahead.
  LatencyFeatures f{.prefill_tokens = 500, .queued_prefill_tokens = 12'000, .waiting = 2};
  const Nanos whole = p.predict(3, f).ttft;
  f.prefill_elapsed = 0.15;  // 5,000 of the 12,000 done
  EXPECT_NEAR(p.prefill_tokens_ahead(3, f), 7000, 50);
  EXPECT_NEAR(to_seconds(whole - p.predict(3, f).ttft), 0.15, 0.003);
}

// Before any sample, the progress is credited at the prior rate.
TEST(LatencyPredictor, ThePriorsCreditTheQueuesProgress) {
  LatencyPredictor p({.prior_prefill_tokens_per_second = 10'000});
  LatencyFeatures f{.prefill_tokens = 1000, .queued_prefill_tokens = 5000};
  EXPECT_NEAR(p.prefill_tokens_ahead(0, f), 5000, 1e-6);
  EXPECT_NEAR(to_seconds(p.predict(0, f).ttft), 0.6, 1e-9);  // 6,000 tokens at 10k/s
  f.prefill_elapsed = 0.2;                                   // 2,000 done
  EXPECT_NEAR(p.prefill_tokens_ahead(0, f), 3000, 1e-6);
  EXPECT_NEAR(to_seconds(p.predict(0, f).ttft), 0.4, 1e-9);
  f.prefill_elapsed = 0.9;  // more than the queue: none of it left, never less
  EXPECT_EQ(p.prefill_tokens_ahead(0, f), 0.0);
  EXPECT_NEAR(to_seconds(p.predict(0, f).ttft), 0.1, 1e-9);
}

// What is ahead stays within [0, queued] whatever the inputs, and predictions finite; a
// model whose rate for the queue is not positive credits nothing.
TEST(LatencyPredictor, TheQueueTermStaysBounded) {
  LatencyPredictor p({.forgetting = 0.99, .min_samples = 1});
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (double elapsed : {-1.0, 0.0, 1e-12, 0.3, 1e12, inf, nan}) {
    const LatencyFeatures f{
        .prefill_tokens = 800, .queued_prefill_tokens = 9000, .prefill_elapsed = elapsed};
    const double ahead = p.prefill_tokens_ahead(0, f);
    EXPECT_GE(ahead, 0) << elapsed;
    EXPECT_LE(ahead, 9000) << elapsed;
    for (int i = 0; i < 1000; ++i) p.observe_ttft(0, f, seconds(true_ttft(f)));
    const LatencyPrediction guess = p.predict(0, f);
    EXPECT_GE(guess.ttft, 0) << elapsed;
    EXPECT_LT(guess.ttft, 100 * kSecond) << elapsed;
  }
  EXPECT_TRUE(std::isfinite(p.ttft_error().mape()));
  EXPECT_EQ(p.prefill_tokens_ahead(0, {.prefill_elapsed = 5}), 0.0);  // nothing queued

  // TTFT falling as the queue grows (nonsense, but possible data): the rate learned is
  // negative, and no progress is credited.
  LatencyPredictor q({.min_samples = 1});
  for (int i = 0; i < 50; ++i) {
    const double queued = 1000.0 * (i % 5);
    q.observe_ttft(0, {.queued_prefill_tokens = queued}, seconds(1.0 - 0.2 * (i % 5)));
  }
  EXPECT_EQ(q.prefill_tokens_ahead(0, {.queued_prefill_tokens = 5000, .prefill_elapsed = 1}),
            5000.0);
}

TEST(LatencyPredictor, ANewEndpointIsPredictedByThePoolModel) {
  LatencyPredictor p({.min_samples = 16});
  Rng rng(11);
  teach(p, 0, 300, rng);
  const LatencyFeatures f{.prefill_tokens = 2000, .waiting = 2, .running = 10, .kv_usage = 0.5};
  const LatencyPrediction guess = p.predict(5, f);  // never seen
  EXPECT_TRUE(guess.from_pool);
  EXPECT_EQ(guess.samples, 300u);
  EXPECT_LT(relative_error(guess.ttft, true_ttft(f)), 0.02);
  // Below min_samples of its own, still the pool's.
  teach(p, 5, 15, rng);
  EXPECT_TRUE(p.predict(5, f).from_pool);
  teach(p, 5, 1, rng);
  EXPECT_FALSE(p.predict(5, f).from_pool);
}

// An idle endpoint: the same features every time. The covariance along the features that
// never vary must not grow without bound (forgetting inflates it), so predictions stay
// finite and right, and a first different sample does not throw them off to infinity.
TEST(LatencyPredictor, StateStaysBoundedWhenFeaturesNeverVary) {
  LatencyPredictor p({.forgetting = 0.99, .min_samples = 1});
  const LatencyFeatures idle{.prefill_tokens = 500};
  for (int i = 0; i < 100'000; ++i) {
    p.observe_ttft(1, idle, seconds(true_ttft(idle)));
    p.observe_tpot(1, idle, seconds(true_tpot(idle)));
  }
  LatencyPrediction guess = p.predict(1, idle);
  EXPECT_LT(relative_error(guess.ttft, true_ttft(idle)), 0.01);
  EXPECT_LT(relative_error(guess.tpot, true_tpot(idle)), 0.01);
  const LatencyFeatures busy{.prefill_tokens = 3000, .waiting = 5, .running = 20, .kv_usage = 0.9};
  p.observe_ttft(1, busy, seconds(true_ttft(busy)));
  p.observe_tpot(1, busy, seconds(true_tpot(busy)));
  guess = p.predict(1, busy);
  EXPECT_GE(guess.ttft, 0);
  EXPECT_LT(guess.ttft, 100 * kSecond);
  EXPECT_LT(guess.tpot, 100 * kSecond);
  EXPECT_TRUE(std::isfinite(p.ttft_error().mape()));
}

TEST(LatencyPredictor, IsDeterministic) {
  LatencyPredictor a(LatencyPredictorConfig{});
  LatencyPredictor b(LatencyPredictorConfig{});
  Rng ra(5);
  Rng rb(5);
  teach(a, 2, 200, ra);
  teach(b, 2, 200, rb);
  teach(a, 4, 200, ra, /*in_queue=*/true);
  teach(b, 4, 200, rb, /*in_queue=*/true);
  Rng probe(8);
  for (int i = 0; i < 20; ++i) {
    const LatencyFeatures f = queued_features(probe);
    for (kv::EndpointId e : {2u, 4u, 6u}) {
      EXPECT_EQ(a.predict(e, f).ttft, b.predict(e, f).ttft);
      EXPECT_EQ(a.predict(e, f).tpot, b.predict(e, f).tpot);
      EXPECT_EQ(a.prefill_tokens_ahead(e, f), b.prefill_tokens_ahead(e, f));
    }
  }
  EXPECT_EQ(a.ttft_error().sum_ape, b.ttft_error().sum_ape);
  EXPECT_EQ(a.tpot_error().sum_ape, b.tpot_error().sum_ape);
}

TEST(LatencyPredictor, PredictionsAreNeverNegative) {
  LatencyPredictor p({.min_samples = 1});
  // Teach it that TTFT falls steeply with the queue (nonsense, but possible data).
  for (int i = 0; i < 50; ++i) {
    const double waiting = i % 5;
    p.observe_ttft(0, {.waiting = waiting}, seconds(std::max(0.0, 1.0 - 0.2 * waiting)));
  }
  EXPECT_EQ(p.predict(0, {.waiting = 40}).ttft, 0);  // the line says -7 s
}

TEST(LatencyPredictor, MeanAbsolutePercentageError) {
  PredictionError e;
  e.add(110, 100);  // 10%
  e.add(50, 100);   // 50%
  e.add(1, 0);      // undefined: not counted
  e.add(1, -5);
  EXPECT_EQ(e.count, 2u);
  EXPECT_NEAR(e.mape(), 0.3, 1e-12);
  EXPECT_EQ(PredictionError{}.mape(), 0.0);

  // The predictor scores each sample with the model as it stood before the sample:
  // the priors predict 100 ms for 1000 tokens at 10k/s, and 200 ms came: 50% off.
  LatencyPredictor p({.prior_prefill_tokens_per_second = 10'000});
  p.observe_ttft(4, {.prefill_tokens = 1000}, 200 * kMillisecond);
  EXPECT_EQ(p.ttft_error().count, 1u);
  EXPECT_NEAR(p.ttft_error().mape(), 0.5, 1e-6);
  EXPECT_NEAR(p.ttft_error(4).mape(), 0.5, 1e-6);
  EXPECT_EQ(p.tpot_error().count, 0u);
  // Forgetting the endpoint drops its own model and error, not the pool's record.
  p.forget(4);
  EXPECT_EQ(p.samples(4), 0u);
  EXPECT_EQ(p.ttft_error(4).count, 0u);
  EXPECT_EQ(p.ttft_error().count, 1u);
}

TEST(LatencyPredictor, ConfigIsValidated) {
  EXPECT_TRUE(LatencyPredictorConfig{}.validate().ok());
  EXPECT_TRUE(LatencyPredictorConfig{.forgetting = 1}.validate().ok());
  EXPECT_FALSE(LatencyPredictorConfig{.forgetting = 0}.validate().ok());
  EXPECT_FALSE(LatencyPredictorConfig{.forgetting = 1.5}.validate().ok());
  EXPECT_FALSE(LatencyPredictorConfig{.prior_prefill_tokens_per_second = 0}.validate().ok());
}

}  // namespace latency_predictor_test
}  // namespace kvgate::route
