// Histogram: a Prometheus-style cumulative histogram kept by the engine model.
//
// The engine model observes TTFT, inter-token latency, end-to-end latency and queue
// time into histograms with vLLM's bucket bounds, so the server only renders them and
// the simulator can read them (or take exact values from StepResult instead).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace kvgate::engine {

class Histogram {
 public:
  Histogram() = default;
  // REQUIRES: bounds strictly increasing. A +Inf bucket is implicit.
  explicit Histogram(std::span<const double> bounds)
      : bounds_(bounds.begin(), bounds.end()), counts_(bounds.size() + 1, 0) {}

  void observe(double value) {
    // A decode step observes the same inter-token latency for its whole batch.
    if (value != last_value_) {
      last_value_ = value;
      last_bucket_ = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) -
                                         bounds_.begin());
    }
    ++counts_[last_bucket_];
    sum_ += value;
    ++count_;
  }

  // Upper bounds (without +Inf).
  const std::vector<double>& bounds() const { return bounds_; }
  // Per-bucket (non-cumulative) counts; the last one is the +Inf bucket.
  const std::vector<uint64_t>& counts() const { return counts_; }
  // Cumulative count of observations <= bounds()[i] (i == bounds().size(): all).
  uint64_t cumulative(size_t i) const {
    uint64_t c = 0;
    for (size_t j = 0; j <= i && j < counts_.size(); ++j) c += counts_[j];
    return c;
  }
  double sum() const { return sum_; }
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  double sum_ = 0;
  uint64_t count_ = 0;
  double last_value_ = -1;  // memo of the last observation's bucket
  size_t last_bucket_ = 0;
};

// vLLM's bucket bounds (seconds), vllm/v1/metrics/loggers.py.
inline constexpr double kTtftBuckets[] = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                          0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                          20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
inline constexpr double kItlBuckets[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                         0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
inline constexpr double kRequestLatencyBuckets[] = {
    0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
    30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

}  // namespace kvgate::engine
