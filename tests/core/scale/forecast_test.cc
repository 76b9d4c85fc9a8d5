#include "core/scale/forecast.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/common/rng.h"

namespace kvgate::scale {
namespace {

constexpr Nanos kDayNs = 24 * 3600 * kSecond;

// A daily curve: quiet at night, a morning ramp, an evening peak.
double daily(Nanos t) {
  const double x = 2 * M_PI * static_cast<double>(t % kDayNs) / static_cast<double>(kDayNs);
  return 1000 + 500 * std::sin(x - M_PI / 2) + 150 * std::sin(2 * x);
}

TEST(Forecast, NoneMakesNoForecaster) {
  EXPECT_EQ(make_forecaster({.method = ForecastMethod::kNone}), nullptr);
}

TEST(Forecast, ConstantIsTheLastValue) {
  auto f = make_forecaster({.method = ForecastMethod::kConstant});
  EXPECT_FALSE(f->predict(0).has_value());
  f->observe(0, 5);
  f->observe(kSecond, 7);
  EXPECT_EQ(f->predict(100 * kSecond), 7);
}

TEST(Forecast, MovingAverageOverItsWindow) {
  auto f = make_forecaster({.method = ForecastMethod::kMovingAverage, .window = 10 * kSecond});
  for (int i = 0; i < 20; ++i) f->observe(i * kSecond, i);
  // Window (9 s, 19 s]: 10..19, mean 14.5.
  EXPECT_DOUBLE_EQ(*f->predict(30 * kSecond), 14.5);
}

struct Errors {
  double hw = 0;
  double constant = 0;
};

// Trains on `days` days of noisy 15 s observations, then on the next day measures the
// mean absolute percentage error of forecasts `horizon` ahead.
Errors daily_errors(int days, Nanos horizon) {
  Rng rng(7);
  auto hw = make_forecaster({.method = ForecastMethod::kHoltWinters});
  auto constant = make_forecaster({.method = ForecastMethod::kConstant});
  const Nanos step = 15 * kSecond;
  Errors e;
  int n = 0;
  for (Nanos t = 0; t < (days + 1) * kDayNs; t += step) {
    const double v = daily(t) * (1 + 0.05 * rng.normal());
    hw->observe(t, v);
    constant->observe(t, v);
    if (t >= days * kDayNs && t % (5 * 60 * kSecond) == 0) {
      const double truth = daily(t + horizon);
      e.hw += std::abs(*hw->predict(t + horizon) - truth) / truth;
      e.constant += std::abs(*constant->predict(t + horizon) - truth) / truth;
      ++n;
    }
  }
  e.hw /= n;
  e.constant /= n;
  return e;
}

TEST(Forecast, HoltWintersLearnsADailyCurve) {
  // Horizon 200 s (a 7B cold start): within 1.5 % though each observation carries 5 %
  // noise (measured 0.7 %; the last value is off by 3.9 %, a 2-minute average by 1.7 %).
  const Errors startup = daily_errors(3, 200 * kSecond);
  EXPECT_LT(startup.hw, 0.015);
  EXPECT_LT(startup.hw, startup.constant);  // the last value carries the noise
  // Two hours ahead the season carries the forecast; the last value does not.
  const Errors far = daily_errors(3, 2 * 3600 * kSecond);
  EXPECT_LT(far.hw, 0.015);  // measured 0.8 %; the last value 22 %
  EXPECT_GT(far.constant, 0.15);
}

TEST(Forecast, HoltWintersPredictsTheLastValueUntilASeasonIsSeen) {
  auto f = make_forecaster({.method = ForecastMethod::kHoltWinters});
  f->observe(0, 3);
  f->observe(10 * kSecond, 4);
  EXPECT_EQ(f->predict(3600 * kSecond), 4);
}

}  // namespace
}  // namespace kvgate::scale
