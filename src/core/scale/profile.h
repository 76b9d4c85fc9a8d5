// Profiles: what one replica can do, measured in advance, as interpolation tables.
//
// The disaggregated planner (planner.h) divides predicted token rates by these.
//   - PrefillProfile: at a prompt length, the prompt tokens/s one prefill replica
//     sustains and its TTFT there. Linear interpolation in the prompt length; outside
//     the table the nearest row holds.
//   - DecodeProfile: for several context lengths, a curve of (ITL, generated tokens/s
//     per replica) from light to heavy batches. best_throughput(itl, context) is the
//     highest throughput whose ITL stays within `itl`, interpolated along the curve,
//     then linearly between the two context rows around `context`.
//
//   auto p = PrefillProfile::make({{1000, 10000, 0.10}, {3000, 14000, 0.25}});
//   double tps = p->throughput_at(2000);  // 12000
//
// Immutable after make(); safe to share between threads.
#pragma once

#include <vector>

#include "core/common/result.h"

namespace kvgate::scale {

struct PrefillPoint {
  double input_tokens = 0;  // prompt length
  double tokens_per_s = 0;  // prompt tokens/s per replica at that length
  double ttft_s = 0;        // TTFT at that length (unloaded), seconds; 0 = not profiled
};

class PrefillProfile {
 public:
  // Errors name the offending row: empty table, non-positive length or throughput.
  static Result<PrefillProfile> make(std::vector<PrefillPoint> points);

  double throughput_at(double input_tokens) const;
  double ttft_at(double input_tokens) const;
  const std::vector<PrefillPoint>& points() const { return points_; }

 private:
  std::vector<PrefillPoint> points_;  // sorted by input_tokens
};

struct DecodePoint {
  double itl_s = 0;         // inter-token latency at this load, seconds
  double tokens_per_s = 0;  // generated tokens/s per replica at this load
};

struct DecodeRow {
  double context_tokens = 0;        // prompt + half the output, as the planner predicts it
  std::vector<DecodePoint> points;  // any order; ITL must not fall as throughput rises
};

class DecodeProfile {
 public:
  static Result<DecodeProfile> make(std::vector<DecodeRow> rows);

  // Highest tokens/s per replica with ITL <= itl_s at this context length. When even the
  // lightest profiled load exceeds itl_s, that lightest point's throughput (the best the
  // profile knows; the pool will miss its target).
  double best_throughput(double itl_s, double context_tokens) const;
  const std::vector<DecodeRow>& rows() const { return rows_; }

 private:
  static double row_best(const DecodeRow& row, double itl_s);
  std::vector<DecodeRow> rows_;  // sorted by context, points sorted by throughput
};

}  // namespace kvgate::scale
