// UsageWindow: a pool's token rates and latency percentiles over the last window, from
// cumulative counters.
//
// The gateway counts tokens and records TTFT/ITL in cumulative histograms (what it
// exports on /metrics). The autoscaler wants "the last minute" instead: every control
// tick the caller adds the totals as they are now, and rates() differences the newest
// totals against the oldest ones still inside the window, the way Prometheus' rate()
// and histogram_quantile() read the same counters. Memory is one snapshot per tick, not
// one sample per token.
//
//   UsageWindow w(30 * kSecond);
//   every tick: w.add(now, totals_now);  UsageRates r = w.rates();
//   signals.prompt_tokens_per_s = r.prompt_tokens_per_s; signals.ttft = r.ttft; ...
//
// Thread-safety: none (one owner).
#pragma once

#include <cstdint>
#include <deque>

#include "core/common/time.h"
#include "core/metrics/prometheus_text.h"
#include "core/scale/signals.h"

namespace kvgate::scale {

// Cumulative since the gateway started.
struct UsageTotals {
  uint64_t prompt_tokens = 0;
  uint64_t completion_tokens = 0;
  uint64_t requests = 0;            // requests whose usage was counted
  metrics::HistogramSnapshot ttft;  // seconds; empty bounds = nothing recorded yet
  metrics::HistogramSnapshot itl;
};

struct UsageRates {
  double prompt_tokens_per_s = 0;
  double generation_tokens_per_s = 0;
  double requests_per_s = 0;      // requests whose usage was counted, per second
  double mean_prompt_tokens = 0;  // per request counted in the window; 0 when none
  double mean_generation_tokens = 0;
  LatencySummary ttft;
  LatencySummary itl;
  Nanos span = 0;  // the time the figures cover (0: fewer than two snapshots)
};

class UsageWindow {
 public:
  // REQUIRES: window > 0.
  explicit UsageWindow(Nanos window) : window_(window) {}

  // REQUIRES: `now` not before the previous call's; totals never decrease.
  void add(Nanos now, UsageTotals totals);
  // Differences between the newest snapshot and the oldest one inside the window (or,
  // when the window holds one, the newest one before it).
  UsageRates rates() const;

  size_t snapshots() const { return snapshots_.size(); }

 private:
  struct Snapshot {
    Nanos at;
    UsageTotals totals;
  };
  Nanos window_;
  std::deque<Snapshot> snapshots_;
};

// The observations between two cumulative snapshots of one histogram (`older` may be
// empty: nothing before), summarised: mean from sum and count, percentiles by linear
// interpolation inside the bucket that holds them (Prometheus' histogram_quantile: the
// first bucket starts at 0, a percentile in the +Inf bucket is the highest finite bound).
// REQUIRES: same bounds, or `older` empty.
LatencySummary summarize_delta(const metrics::HistogramSnapshot& newer,
                               const metrics::HistogramSnapshot& older);

// Adds `from` into `into` (the same bounds, or either empty). For summing the histograms
// of the several models a pool serves.
void add_histogram(metrics::HistogramSnapshot& into, const metrics::HistogramSnapshot& from);

}  // namespace kvgate::scale
