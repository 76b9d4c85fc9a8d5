#include "core/scale/forecast.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <vector>

namespace kvgate::scale {

namespace {

class ConstantForecaster final : public Forecaster {
 public:
  void observe(Nanos, double value) override { last_ = value; }
  std::optional<double> predict(Nanos) const override { return last_; }

 private:
  std::optional<double> last_;
};

class MovingAverageForecaster final : public Forecaster {
 public:
  explicit MovingAverageForecaster(Nanos window) : window_(std::max<Nanos>(window, 1)) {}

  void observe(Nanos at, double value) override {
    samples_.push_back({at, value});
    sum_ += value;
    while (samples_.front().at <= at - window_) {
      sum_ -= samples_.front().value;
      samples_.pop_front();
    }
  }
  std::optional<double> predict(Nanos) const override {
    if (samples_.empty()) return std::nullopt;
    return sum_ / static_cast<double>(samples_.size());
  }

 private:
  struct Sample {
    Nanos at;
    double value;
  };
  Nanos window_;
  std::deque<Sample> samples_;
  double sum_ = 0;
};

class HoltWinters final : public Forecaster {
 public:
  explicit HoltWinters(const ForecastConfig& c)
      : slot_(std::max<Nanos>(c.slot, kSecond)),
        length_(std::max<int64_t>(c.season / slot_, 2)),
        alpha_(c.alpha),
        beta_(c.beta),
        gamma_(c.gamma),
        seasonal_(static_cast<size_t>(length_), 0.0) {}

  void observe(Nanos at, double value) override {
    const int64_t slot = at / slot_;
    if (count_ > 0 && slot != open_slot_) {
      close_slot();
      // Slots with no observation at all: carry the model forward, learning nothing.
      for (int64_t k = open_slot_ + 1; k < slot && initialized_; ++k) {
        level_ += trend_;
        last_slot_ = k;
      }
    }
    if (count_ == 0) open_slot_ = slot;
    sum_ += value;
    ++count_;
    last_value_ = value;
  }

  std::optional<double> predict(Nanos at) const override {
    if (!last_value_) return std::nullopt;
    if (!initialized_) return last_value_;
    const int64_t ahead = std::max<int64_t>(at / slot_ - last_slot_, 1);
    return level_ + static_cast<double>(ahead) * trend_ + seasonal_[index(last_slot_ + ahead)];
  }

 private:
  size_t index(int64_t slot) const {
    return static_cast<size_t>(((slot % length_) + length_) % length_);
  }

  void close_slot() {
    const double x = sum_ / static_cast<double>(count_);
    sum_ = 0;
    count_ = 0;
    if (!initialized_) {
      // Collect one full season of consecutive slots, then initialise from it.
      if (!warmup_.empty() && open_slot_ != warmup_start_ + static_cast<int64_t>(warmup_.size())) {
        warmup_.clear();  // a gap: start the season over
      }
      if (warmup_.empty()) warmup_start_ = open_slot_;
      warmup_.push_back(x);
      if (static_cast<int64_t>(warmup_.size()) == length_) initialize();
      return;
    }
    const size_t i = index(open_slot_);
    const double previous_level = level_;
    level_ = alpha_ * (x - seasonal_[i]) + (1 - alpha_) * (level_ + trend_);
    trend_ = beta_ * (level_ - previous_level) + (1 - beta_) * trend_;
    seasonal_[i] = gamma_ * (x - level_) + (1 - gamma_) * seasonal_[i];
    last_slot_ = open_slot_;
  }

  void initialize() {
    double mean = 0;
    for (double v : warmup_) mean += v;
    mean /= static_cast<double>(warmup_.size());
    level_ = mean;
    trend_ = 0;
    for (size_t k = 0; k < warmup_.size(); ++k) {
      seasonal_[index(warmup_start_ + static_cast<int64_t>(k))] = warmup_[k] - mean;
    }
    last_slot_ = warmup_start_ + length_ - 1;
    initialized_ = true;
    warmup_.clear();
    warmup_.shrink_to_fit();
  }

  // Constant after construction.
  Nanos slot_;
  int64_t length_;  // slots per season
  double alpha_, beta_, gamma_;

  // The slot being filled.
  int64_t open_slot_ = 0;
  double sum_ = 0;
  int64_t count_ = 0;
  std::optional<double> last_value_;

  // Warm-up: the first season.
  std::vector<double> warmup_;
  int64_t warmup_start_ = 0;

  // The model, once initialised.
  bool initialized_ = false;
  double level_ = 0;
  double trend_ = 0;
  std::vector<double> seasonal_;
  int64_t last_slot_ = 0;  // the last slot fed to the model
};

}  // namespace

std::unique_ptr<Forecaster> make_forecaster(const ForecastConfig& config) {
  switch (config.method) {
    case ForecastMethod::kNone:
      return nullptr;
    case ForecastMethod::kConstant:
      return std::make_unique<ConstantForecaster>();
    case ForecastMethod::kMovingAverage:
      return std::make_unique<MovingAverageForecaster>(config.window);
    case ForecastMethod::kHoltWinters:
      return std::make_unique<HoltWinters>(config);
  }
  return nullptr;
}

}  // namespace kvgate::scale
