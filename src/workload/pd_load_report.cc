#include "workload/pd_load_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "workload/csv.h"

namespace kvgate::workload {
namespace {

struct Moments {
  double mean = 0;
  double sd = 0;
};

Moments moments(const std::vector<double>& v) {
  Moments m;
  if (v.empty()) return m;
  for (double x : v) m.mean += x;
  m.mean /= static_cast<double>(v.size());
  double ss = 0;
  for (double x : v) ss += (x - m.mean) * (x - m.mean);
  m.sd = std::sqrt(ss / static_cast<double>(v.size()));
  return m;
}

// Pearson r of two equally long series; 0 when either is flat.
double pearson(const std::vector<double>& a, const std::vector<double>& b) {
  const Moments ma = moments(a), mb = moments(b);
  if (a.size() < 2 || a.size() != b.size() || ma.sd <= 0 || mb.sd <= 0) return 0;
  double cov = 0;
  for (size_t i = 0; i < a.size(); ++i) cov += (a[i] - ma.mean) * (b[i] - mb.mean);
  return cov / static_cast<double>(a.size()) / (ma.sd * mb.sd);
}

// Each value minus the mean of its group (groups: consecutive equal keys), so that a
// step in the offered load between stages does not count as a swing.
std::vector<double> within_groups(const std::vector<double>& v, const std::vector<uint32_t>& key) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    double sum = 0;
    while (j < v.size() && key[j] == key[i]) sum += v[j++];
    const double mean = sum / static_cast<double>(j - i);
    for (size_t k = i; k < j; ++k) out[k] = v[k] - mean;
    i = j;
  }
  return out;
}

}  // namespace

std::vector<MeasuredSpan> measured_spans(const std::vector<workload::StageInfo>& stages) {
  double peak = 0;
  for (const workload::StageInfo& st : stages) {
    if (!st.warmup) peak = std::max(peak, st.qps);
  }
  std::vector<MeasuredSpan> spans;
  for (const workload::StageInfo& st : stages) {
    if (st.warmup || st.qps < peak) continue;
    spans.push_back({std::min(st.start + kSettle, st.end), st.end});
  }
  if (spans.empty()) spans.push_back({0, 0});
  return spans;
}

bool has_pd_samples(const std::vector<PolicyRun>& runs) {
  for (const PolicyRun& run : runs) {
    for (const ClusterSample& s : run.samples) {
      if (s.decode_kv_usage > 0) return true;
    }
  }
  return false;
}

std::vector<PdLoadSummary> summarize_pd_load(const std::vector<PolicyRun>& runs,
                                             const std::vector<Summary>& summaries,
                                             const std::vector<workload::StageInfo>& stages) {
  const std::vector<MeasuredSpan> spans = measured_spans(stages);
  auto measured = [&](Nanos t) {
    for (const MeasuredSpan& m : spans) {
      if (t >= m.from && (m.to == 0 || t < m.to)) return true;
    }
    return false;
  };
  std::vector<PdLoadSummary> rows;
  for (size_t i = 0; i < runs.size() && i < summaries.size(); ++i) {
    const PolicyRun& run = runs[i];
    const Summary& s = summaries[i];
    PdLoadSummary row;
    row.policy = run.policy;
    row.requests = s.requests;
    row.served = s.completed;
    row.rejected_after_prefill = s.rejected_after_prefill;
    row.rejected_at_door = s.rejected - s.rejected_after_prefill;
    row.wasted_prefill_tokens = s.wasted_prefill_tokens;
    row.output_tps = s.output_tps_overall;
    std::vector<double> kv, load, busy;
    std::vector<uint32_t> stage;
    for (const ClusterSample& c : run.samples) {
      if (!measured(c.at)) continue;
      kv.push_back(c.decode_kv_usage);
      load.push_back(c.prefill_queued_tokens / 1000);
      stage.push_back(stages.empty() ? 0 : workload::stage_at(stages, c.at));
      busy.push_back(c.prefill_busy);
    }
    row.samples = kv.size();
    if (!kv.empty()) {
      row.decode_kv_mean = moments(kv).mean;
      row.decode_kv_p10 = quantile(kv, 0.1);
      row.decode_kv_p90 = quantile(kv, 0.9);
      row.prefill_queue_mean = moments(load).mean;
      row.prefill_busy = moments(busy).mean;
      row.prefill_busy_sd = moments(within_groups(busy, stage)).sd;
      const std::vector<double> dkv = within_groups(kv, stage);
      const std::vector<double> dload = within_groups(load, stage);
      row.decode_kv_sd = moments(dkv).sd;
      row.prefill_queue_sd = moments(dload).sd;
      row.correlation = pearson(dkv, dload);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string pd_load_table(const std::vector<PdLoadSummary>& rows) {
  std::string out =
      "P/D load: requests served / rejected at the door / refused after prefill (wasted);\n"
      "decode KV usage, prefill queue (k tokens per prefill engine) and prefill engines\n"
      "busy over time in the peak-rate stages (sd, corr: around each stage's mean)\n";
  out += fmt::format("{:<14} {:>7} {:>7} {:>7} {:>11} {:>16} {:>13} {:>13} {:>13} {:>7}\n",
                     "policy", "served", "door", "wasted", "wasted tok", "decode KV mean/sd",
                     "KV p10-p90", "P queue/sd", "P busy/sd", "corr");
  for (const PdLoadSummary& r : rows) {
    out += fmt::format(
        "{:<14} {:>7} {:>7} {:>7} {:>11} {:>9.1f}%/{:>5.1f} {:>6.1f}-{:>5.1f}% {:>7.1f}/{:>5.1f} "
        "{:>6.1f}%/{:>5.1f} {:>7.2f}\n",
        r.policy, r.served, r.rejected_at_door, r.rejected_after_prefill, r.wasted_prefill_tokens,
        r.decode_kv_mean * 100, r.decode_kv_sd * 100, r.decode_kv_p10 * 100, r.decode_kv_p90 * 100,
        r.prefill_queue_mean, r.prefill_queue_sd, r.prefill_busy * 100, r.prefill_busy_sd * 100,
        r.correlation);
  }
  return out;
}

std::string pd_load_csv(const std::vector<PdLoadSummary>& rows) {
  std::string out =
      "policy,requests,served,rejected_at_door,rejected_after_prefill,wasted_prefill_tokens,"
      "output_tokens_per_s,decode_kv_mean,decode_kv_sd,decode_kv_p10,decode_kv_p90,"
      "prefill_queue_ktokens_mean,prefill_queue_ktokens_sd,prefill_busy,prefill_busy_sd,"
      "correlation,samples\n";
  for (const PdLoadSummary& r : rows) {
    out += fmt::format(
        "{},{},{},{},{},{},{:.1f},{:.4f},{:.4f},{:.4f},{:.4f},{:.3f},{:.3f},{:.4f},{:.4f},"
        "{:.3f},{}\n",
        csv_field(r.policy), r.requests, r.served, r.rejected_at_door, r.rejected_after_prefill,
        r.wasted_prefill_tokens, r.output_tps, r.decode_kv_mean, r.decode_kv_sd, r.decode_kv_p10,
        r.decode_kv_p90, r.prefill_queue_mean, r.prefill_queue_sd, r.prefill_busy,
        r.prefill_busy_sd, r.correlation, r.samples);
  }
  return out;
}

}  // namespace kvgate::workload
