// Histogram: fixed-bucket counts of observations, as a Prometheus histogram exports them.
// Not thread-safe; the owner serializes access.
//
//   Histogram ttft({0.001, 0.005, 0.01});
//   ttft.observe(0.004);
//   writer.histogram("x_seconds", "help", labels, ttft.snapshot());
#pragma once

#include <algorithm>
#include <vector>

#include "core/metrics/prometheus_text.h"

namespace kvgate::metrics {

class Histogram {
 public:
  // REQUIRES: bounds strictly increasing and finite.
  explicit Histogram(std::vector<double> bounds) {
    snap_.bounds = std::move(bounds);
    snap_.counts.assign(snap_.bounds.size() + 1, 0);
  }

  void observe(double v) {
    const auto it = std::lower_bound(snap_.bounds.begin(), snap_.bounds.end(), v);
    ++snap_.counts[static_cast<size_t>(it - snap_.bounds.begin())];
    snap_.sum += v;
    ++snap_.count;
  }

  const HistogramSnapshot& snapshot() const { return snap_; }

 private:
  HistogramSnapshot snap_;
};

}  // namespace kvgate::metrics
