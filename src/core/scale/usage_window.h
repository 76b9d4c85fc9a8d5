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
#include <optional>
#include <utility>

#include "core/common/time.h"
#include "core/metrics/prometheus_text.h"
#include "core/scale/signals.h"

namespace kvgate::scale {

// Cumulative since the gateway started.
struct UsageTotals {
  uint64_t prompt_tokens = 0;
  uint64_t completion_tokens = 0;
  uint64_t requests = 0;            // requests whose usage was counted
  double completion_tokens_sq = 0;  // sum over those requests of completion tokens squared
  metrics::HistogramSnapshot ttft;  // seconds; empty bounds = nothing recorded yet
  metrics::HistogramSnapshot itl;
};

struct UsageRates {
  double prompt_tokens_per_s = 0;
  double generation_tokens_per_s = 0;
  double requests_per_s = 0;      // requests whose usage was counted, per second
  double mean_prompt_tokens = 0;  // per request counted in the window; 0 when none
  double mean_generation_tokens = 0;
  double generation_tokens_sd = 0;  // sample standard deviation (0 with fewer than two)
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

// ArrivalRate: requests/s arriving for a pool, from a cumulative count read at every
// control tick. The rate spans the newest readings covering at least `min_span`: with a
// control interval of a fraction of a second, three requests in 200 ms must not read as
// a burst of 15 requests/s. With ticks at least `min_span` apart it is the last
// interval's rate.
//
//   ArrivalRate a;  a.add(0, 0);
//   every tick: a.add(now, arrivals_so_far);  signals.arrival_rate = a.rate();
class ArrivalRate {
 public:
  explicit ArrivalRate(Nanos min_span = kSecond) : min_span_(min_span) {}
  // REQUIRES: `now` not before the previous call's; `total` never decreases.
  void add(Nanos now, uint64_t total);
  // nullopt until two readings are apart in time.
  std::optional<double> rate() const;

 private:
  Nanos min_span_;
  std::deque<std::pair<Nanos, uint64_t>> readings_;
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
