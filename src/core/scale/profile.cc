#include "core/scale/profile.h"

#include <algorithm>
#include <string>

namespace kvgate::scale {

namespace {

double lerp(double x0, double y0, double x1, double y1, double x) {
  if (x1 == x0) return y0;
  return y0 + (y1 - y0) * (x - x0) / (x1 - x0);
}

// Linear interpolation over points sorted by key; clamped at both ends.
template <typename T, typename Key, typename Val>
double interpolate(const std::vector<T>& v, double x, Key key, Val val) {
  if (!(x > key(v.front()))) return val(v.front());  // NaN too
  if (x >= key(v.back())) return val(v.back());
  auto hi =
      std::upper_bound(v.begin(), v.end(), x, [&](double a, const T& p) { return a < key(p); });
  auto lo = hi - 1;
  return lerp(key(*lo), val(*lo), key(*hi), val(*hi), x);
}

}  // namespace

Result<PrefillProfile> PrefillProfile::make(std::vector<PrefillPoint> points) {
  if (points.empty()) return Error("prefill profile: no points");
  for (size_t i = 0; i < points.size(); ++i) {
    const PrefillPoint& p = points[i];
    if (!(p.input_tokens > 0) || !(p.tokens_per_s > 0) || !(p.ttft_s >= 0)) {
      return Error("prefill profile point " + std::to_string(i) +
                   ": input_tokens and tokens_per_s must be > 0, ttft >= 0");
    }
  }
  std::stable_sort(points.begin(), points.end(),
                   [](const auto& a, const auto& b) { return a.input_tokens < b.input_tokens; });
  PrefillProfile out;
  out.points_ = std::move(points);
  return out;
}

double PrefillProfile::throughput_at(double input_tokens) const {
  return interpolate(
      points_, input_tokens, [](const PrefillPoint& p) { return p.input_tokens; },
      [](const PrefillPoint& p) { return p.tokens_per_s; });
}

double PrefillProfile::ttft_at(double input_tokens) const {
  return interpolate(
      points_, input_tokens, [](const PrefillPoint& p) { return p.input_tokens; },
      [](const PrefillPoint& p) { return p.ttft_s; });
}

Result<DecodeProfile> DecodeProfile::make(std::vector<DecodeRow> rows) {
  if (rows.empty()) return Error("decode profile: no rows");
  for (size_t i = 0; i < rows.size(); ++i) {
    DecodeRow& r = rows[i];
    const std::string where = "decode profile row " + std::to_string(i);
    if (!(r.context_tokens > 0)) return Error(where + ": context must be > 0");
    if (r.points.empty()) return Error(where + ": no points");
    for (const DecodePoint& p : r.points) {
      if (!(p.itl_s > 0) || !(p.tokens_per_s > 0)) {
        return Error(where + ": itl and tokens_per_s must be > 0");
      }
    }
    std::stable_sort(r.points.begin(), r.points.end(),
                     [](const auto& a, const auto& b) { return a.tokens_per_s < b.tokens_per_s; });
    for (size_t k = 1; k < r.points.size(); ++k) {
      if (r.points[k].itl_s < r.points[k - 1].itl_s) {
        return Error(where + ": ITL falls while throughput rises (not a load curve)");
      }
    }
  }
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return a.context_tokens < b.context_tokens;
  });
  DecodeProfile out;
  out.rows_ = std::move(rows);
  return out;
}

double DecodeProfile::row_best(const DecodeRow& row, double itl_s) {
  const std::vector<DecodePoint>& p = row.points;
  if (!(itl_s > p.front().itl_s)) return p.front().tokens_per_s;  // NaN too
  if (itl_s >= p.back().itl_s) return p.back().tokens_per_s;
  // Last point whose ITL is within the target, then walk towards the next one.
  size_t j = 0;
  while (j + 1 < p.size() && p[j + 1].itl_s <= itl_s) ++j;
  return lerp(p[j].itl_s, p[j].tokens_per_s, p[j + 1].itl_s, p[j + 1].tokens_per_s, itl_s);
}

double DecodeProfile::best_throughput(double itl_s, double context_tokens) const {
  if (!(context_tokens > rows_.front().context_tokens)) return row_best(rows_.front(), itl_s);
  if (context_tokens >= rows_.back().context_tokens) return row_best(rows_.back(), itl_s);
  auto hi = std::upper_bound(rows_.begin(), rows_.end(), context_tokens,
                             [](double c, const DecodeRow& r) { return c < r.context_tokens; });
  auto lo = hi - 1;
  return lerp(lo->context_tokens, row_best(*lo, itl_s), hi->context_tokens, row_best(*hi, itl_s),
              context_tokens);
}

}  // namespace kvgate::scale
