#include "core/scale/usage_window.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace kvgate::scale {
namespace {

// The q-quantile of the observations counted in `counts` (per bucket, not cumulative).
double bucket_quantile(const std::vector<double>& bounds, const std::vector<uint64_t>& counts,
                       uint64_t total, double q) {
  const double rank = q * static_cast<double>(total);
  uint64_t below = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const uint64_t in_bucket = counts[i];
    if (in_bucket > 0 && static_cast<double>(below + in_bucket) >= rank) {
      if (i == bounds.size()) return bounds.empty() ? 0 : bounds.back();  // +Inf bucket
      const double lo = i == 0 ? 0 : bounds[i - 1];
      const double hi = bounds[i];
      const double into = (rank - static_cast<double>(below)) / static_cast<double>(in_bucket);
      return lo + (hi - lo) * std::clamp(into, 0.0, 1.0);
    }
    below += in_bucket;
  }
  return bounds.empty() ? 0 : bounds.back();
}

}  // namespace

LatencySummary summarize_delta(const metrics::HistogramSnapshot& newer,
                               const metrics::HistogramSnapshot& older) {
  LatencySummary out;
  if (newer.counts.empty()) return out;
  std::vector<uint64_t> counts = newer.counts;
  uint64_t total = newer.count;
  double sum = newer.sum;
  if (!older.counts.empty() && older.counts.size() == counts.size()) {
    for (size_t i = 0; i < counts.size(); ++i) {
      counts[i] -= std::min(counts[i], older.counts[i]);
    }
    total -= std::min(total, older.count);
    sum -= older.sum;
  }
  out.samples = total;
  if (total == 0) return out;
  out.mean = std::max(0.0, sum / static_cast<double>(total));
  out.p50 = bucket_quantile(newer.bounds, counts, total, 0.5);
  out.p90 = bucket_quantile(newer.bounds, counts, total, 0.9);
  out.p99 = bucket_quantile(newer.bounds, counts, total, 0.99);
  return out;
}

void add_histogram(metrics::HistogramSnapshot& into, const metrics::HistogramSnapshot& from) {
  if (from.counts.empty()) return;
  if (into.counts.empty()) {
    into = from;
    return;
  }
  if (into.counts.size() != from.counts.size()) return;  // different bounds: not summable
  for (size_t i = 0; i < into.counts.size(); ++i) into.counts[i] += from.counts[i];
  into.sum += from.sum;
  into.count += from.count;
}

void UsageWindow::add(Nanos now, UsageTotals totals) {
  snapshots_.push_back({now, std::move(totals)});
  // Keep one snapshot at or before the window's start as the base of the differences.
  while (snapshots_.size() > 2 && snapshots_[1].at <= now - window_) snapshots_.pop_front();
}

UsageRates UsageWindow::rates() const {
  UsageRates r;
  if (snapshots_.size() < 2) return r;
  const Snapshot& base = snapshots_.front();
  const Snapshot& last = snapshots_.back();
  r.span = last.at - base.at;
  if (r.span <= 0) return r;
  const double seconds = to_seconds(r.span);
  auto delta = [](uint64_t a, uint64_t b) { return static_cast<double>(a >= b ? a - b : 0); };
  const double prompt = delta(last.totals.prompt_tokens, base.totals.prompt_tokens);
  const double completion = delta(last.totals.completion_tokens, base.totals.completion_tokens);
  const double requests = delta(last.totals.requests, base.totals.requests);
  r.prompt_tokens_per_s = prompt / seconds;
  r.generation_tokens_per_s = completion / seconds;
  r.requests_per_s = requests / seconds;
  if (requests > 0) {
    r.mean_prompt_tokens = prompt / requests;
    r.mean_generation_tokens = completion / requests;
  }
  if (requests > 1) {
    // The sample variance from the sums: (sum of squares - sum^2 / n) / (n - 1).
    const double sq = last.totals.completion_tokens_sq - base.totals.completion_tokens_sq;
    const double var = (sq - completion * completion / requests) / (requests - 1);
    r.generation_tokens_sd = var > 0 ? std::sqrt(var) : 0;
  }
  r.ttft = summarize_delta(last.totals.ttft, base.totals.ttft);
  r.itl = summarize_delta(last.totals.itl, base.totals.itl);
  return r;
}

void ArrivalRate::add(Nanos now, uint64_t total) {
  readings_.emplace_back(now, total);
  // The base is the newest reading at least min_span_ before `now` (or the oldest).
  while (readings_.size() > 2 && readings_[1].first <= now - min_span_) readings_.pop_front();
}

std::optional<double> ArrivalRate::rate() const {
  if (readings_.size() < 2) return std::nullopt;
  const auto& [base_at, base] = readings_.front();
  const auto& [last_at, last] = readings_.back();
  if (last_at <= base_at) return std::nullopt;
  return static_cast<double>(last >= base ? last - base : 0) / to_seconds(last_at - base_at);
}

}  // namespace kvgate::scale
