// Forecaster: predicts a load series (tokens/s, requests, demand) a short time ahead.
//
// The autoscaler forecasts at a horizon equal to the pool's measured startup time: a
// replica requested now serves from then on, so that is the load it must be sized for.
// Three methods:
//   - constant: the last observed value;
//   - moving average: mean of the observations in a trailing window;
//   - Holt-Winters, additive, with a daily season. Observations are averaged into slots
//     (5 min by default, 288 per day); a slot is fed to the model when the next begins.
//     Initialisation waits for one full season: level = its mean, trend = 0, seasonal
//     index = each slot's value minus that mean. Until then it predicts the last value.
//
//   auto f = make_forecaster(ForecastConfig{.method = ForecastMethod::kHoltWinters});
//   f->observe(now, tokens_per_s);
//   std::optional<double> ahead = f->predict(now + startup_time);
//
// Thread-safety: none.
#pragma once

#include <memory>
#include <optional>

#include "core/common/time.h"

namespace kvgate::scale {

class Forecaster {
 public:
  virtual ~Forecaster() = default;
  // REQUIRES: `at` does not go backwards between calls.
  virtual void observe(Nanos at, double value) = 0;
  // The predicted value at `at` (normally >= the last observation's time); nullopt
  // before the first observation.
  virtual std::optional<double> predict(Nanos at) const = 0;
};

enum class ForecastMethod { kNone, kConstant, kMovingAverage, kHoltWinters };

struct ForecastConfig {
  ForecastMethod method = ForecastMethod::kNone;
  Nanos window = 120 * kSecond;  // moving average
  Nanos season = 24 * 3600 * kSecond;
  Nanos slot = 300 * kSecond;  // Holt-Winters slot length; season must be a multiple
  double alpha = 0.2;          // level
  double beta = 0.01;          // trend
  double gamma = 0.3;          // season
};

// nullptr for ForecastMethod::kNone.
std::unique_ptr<Forecaster> make_forecaster(const ForecastConfig& config);

}  // namespace kvgate::scale
