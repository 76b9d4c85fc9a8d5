// StepSeries: the recent past of a few numbers at a fixed resolution, in fixed memory,
// for the admin status page's sparklines and charts (docs/gateway.md, "Status page").
//
// Time is cut into steps of `step` (step k covers [k * step, (k + 1) * step)); the series
// keeps the last `capacity` of them in a ring. Each step holds, per channel, a sum and a
// count of what was added during it: means() is the step's mean (a latency: sum of
// seconds over requests), and set() replaces the step's value (a gauge: its last
// reading). A step nobody wrote to reads as empty, so a pause shows as a gap and not as
// a flat line. Memory: capacity x (8 + 12 x N) bytes, whatever the rate of writes.
//
//   StepSeries<2> s(5 * kSecond, 60);          // five minutes at 5 s
//   s.add(now, 0, ttft_sum_delta, ttft_count_delta);
//   s.set(now, 1, replicas);
//   std::vector<std::optional<double>> m = s.means(now, 0);  // 60 steps, oldest first
//
// Time is passed in (core: no clock). Thread-safety: none (one owner, or its lock).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/common/time.h"

namespace kvgate::metrics {

template <size_t N>
class StepSeries {
 public:
  // REQUIRES: step > 0, capacity > 0.
  StepSeries(Nanos step, size_t capacity) : step_(step), ring_(capacity) {}

  Nanos step() const { return step_; }
  size_t capacity() const { return ring_.size(); }

  // Adds `sum` over `count` observations to channel `channel` of the step holding `now`.
  // REQUIRES: channel < N; now >= 0.
  void add(Nanos now, size_t channel, double sum, uint64_t count) {
    Step& s = at(now);
    s.sum[channel] += sum;
    s.count[channel] += static_cast<uint32_t>(count);
  }
  // Sets channel `channel` of the step holding `now` to `value` (what was added to it
  // before in that step is replaced).
  void set(Nanos now, size_t channel, double value) {
    Step& s = at(now);
    s.sum[channel] = value;
    s.count[channel] = 1;
  }

  // The `capacity` steps that end with the one holding `now`, oldest first: channel
  // `channel`'s mean in each (sum / count), nullopt where nothing was added.
  // REQUIRES: channel < N; now >= 0.
  std::vector<std::optional<double>> means(Nanos now, size_t channel) const {
    std::vector<std::optional<double>> out(ring_.size());
    const int64_t last = now / step_;
    for (size_t i = 0; i < ring_.size(); ++i) {
      const int64_t k = last - static_cast<int64_t>(ring_.size() - 1 - i);
      if (k < 0) continue;
      const Step& s = ring_[slot(k)];
      if (s.index == k && s.count[channel] > 0) {
        out[i] = s.sum[channel] / static_cast<double>(s.count[channel]);
      }
    }
    return out;
  }

 private:
  struct Step {
    int64_t index = -1;  // the step this slot holds now
    std::array<double, N> sum{};
    std::array<uint32_t, N> count{};
  };

  size_t slot(int64_t k) const { return static_cast<size_t>(k) % ring_.size(); }

  // The step holding `now`; a slot that held an older step starts afresh.
  Step& at(Nanos now) {
    const int64_t k = now / step_;
    Step& s = ring_[slot(k)];
    if (s.index != k) s = Step{.index = k};
    return s;
  }

  Nanos step_;
  std::vector<Step> ring_;
};

}  // namespace kvgate::metrics
