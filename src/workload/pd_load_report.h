// PdLoadReport: how the load of a disaggregated cluster moved over time, per policy.
//
// Mooncake (FAST'25, section 7) shows that early rejection judged on the decode load at
// the door makes prefill and decode load swing in anti-phase: while decode is full the
// door rejects and prefill idles; decode drains, the door admits a wave, the wave's
// prefills land on decode together and overfill it. This report puts numbers on that
// from the scrape-time samples of a run, taken in the stages at the peak offered rate
// (where the cluster is overloaded), each from kSettle after its start (past the ramp),
// or over the whole run when there are no stages:
//   - decode KV usage: mean, standard deviation, 10th and 90th percentiles;
//   - the prefill queue (prompt tokens routed to a prefill engine and not yet
//     prefilled, per prefill engine, in thousands): mean and standard deviation, and
//     the share of time prefill engines spend computing (mean and standard deviation
//     over scrape intervals);
//   - the correlation of the two series (Pearson r; clearly negative: anti-phase).
// The standard deviations and the correlation are taken around each stage's own mean.
// next to what the door and the decode side did: requests served, rejected at the door,
// refused after their prefill (wasted), and the prompt tokens prefilled for nothing.
//
//   auto rows = summarize_pd_load(runs, summaries, stages);
//   std::fputs(pd_load_table(rows).c_str(), stdout);
#pragma once

#include <string>
#include <vector>

#include "workload/report.h"

namespace kvgate::workload {

struct PdLoadSummary {
  std::string policy;
  uint64_t requests = 0;  // non-warmup requests sent
  uint64_t served = 0;    // completed
  uint64_t rejected_at_door = 0;
  uint64_t rejected_after_prefill = 0;  // refused by decode, prefill wasted
  uint64_t wasted_prefill_tokens = 0;
  double output_tps = 0;  // all output tokens / span of the run
  // Over the measured span's scrape samples.
  double decode_kv_mean = 0, decode_kv_sd = 0, decode_kv_p10 = 0, decode_kv_p90 = 0;  // 0..1
  double prefill_queue_mean = 0, prefill_queue_sd = 0;  // k tokens per prefill engine
  double prefill_busy = 0, prefill_busy_sd = 0;         // 0..1
  double correlation = 0;  // Pearson r of decode KV usage and prefill queue; 0 if undefined
  size_t samples = 0;      // scrape samples measured
};

// Where the oscillation figures are taken: the peak-rate stages, from kSettle after
// each one's start to its end ({0, 0}: the whole run, when there are no stages).
constexpr Nanos kSettle = 5 * kSecond;
struct MeasuredSpan {
  Nanos from = 0;
  Nanos to = 0;  // 0: open-ended
};
std::vector<MeasuredSpan> measured_spans(const std::vector<workload::StageInfo>& stages);

// One row per run; `summaries` are summarize()'s for the same runs, in the same order.
std::vector<PdLoadSummary> summarize_pd_load(const std::vector<PolicyRun>& runs,
                                             const std::vector<Summary>& summaries,
                                             const std::vector<workload::StageInfo>& stages);

// True when some run sampled decode engines (a disaggregated cluster).
bool has_pd_samples(const std::vector<PolicyRun>& runs);

std::string pd_load_table(const std::vector<PdLoadSummary>& rows);
std::string pd_load_csv(const std::vector<PdLoadSummary>& rows);

}  // namespace kvgate::workload
