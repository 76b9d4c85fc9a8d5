#include "workload/report_files.h"

#include <fmt/format.h>

#include <algorithm>

#include "workload/csv.h"
#include "workload/pd_load_report.h"
#include "workload/svg_plot.h"

namespace kvgate::workload {
namespace {

std::string requests_csv(const ScenarioResults& r) {
  std::string out =
      "policy,request,stage,endpoint,arrival_s,ttft_s,e2e_s,prompt_tokens,cached_tokens,"
      "output_tokens,rejected,tenant,queue_wait_s\n";
  for (const PolicyRun& run : r.runs) {
    for (size_t i = 0; i < run.requests.size(); ++i) {
      const RequestRecord& q = run.requests[i];
      out += fmt::format("{},{},{},{},{:.6f},{:.6f},{:.6f},{},{},{},{},{},{:.6f}\n",
                         csv_field(run.policy), i, q.stage, q.endpoint, to_seconds(q.arrival),
                         q.first_token >= 0 ? to_seconds(q.first_token - q.arrival) : -1.0,
                         q.finish >= 0 ? to_seconds(q.finish - q.arrival) : -1.0, q.prompt_tokens,
                         q.cached_tokens, q.output_tokens, q.rejected ? 1 : 0, q.tenant,
                         q.queue_wait >= 0 ? to_seconds(q.queue_wait) : -1.0);
    }
  }
  return out;
}

// Every scrape sample of every run: the time series behind pd_load_over_time.svg.
std::string pd_samples_csv(const ScenarioResults& r) {
  std::string out =
      "policy,time_s,decode_kv_usage,prefill_waiting,prefill_queued_tokens,prefill_busy\n";
  for (const PolicyRun& run : r.runs) {
    for (const ClusterSample& s : run.samples) {
      out += fmt::format("{},{:.3f},{:.4f},{:.3f},{:.0f},{:.3f}\n", csv_field(run.policy),
                         to_seconds(s.at), s.decode_kv_usage, s.prefill_waiting,
                         s.prefill_queued_tokens, s.prefill_busy);
    }
  }
  return out;
}

}  // namespace

std::string ttft_cdf_svg(const ScenarioResults& r) {
  LineChart c;
  c.title = "TTFT distribution per policy: " + r.scenario;
  c.x_label = "time to first token (s, log scale)";
  c.y_label = "fraction of requests";
  c.log_x = true;
  for (const PolicyRun& run : r.runs) {
    std::vector<double> ttft;
    for (const RequestRecord& q : run.requests) {
      const bool warm = q.stage < r.stages.size() && r.stages[q.stage].warmup;
      if (!warm && q.first_token >= 0)
        ttft.push_back(std::max(1e-4, to_seconds(q.first_token - q.arrival)));
    }
    c.series.push_back({run.policy, cdf_points(std::move(ttft)), false});
  }
  return render_svg(c);
}

std::string throughput_vs_qps_svg(const ScenarioResults& r) {
  LineChart c;
  c.title = "Output throughput vs offered QPS: " + r.scenario;
  c.x_label = "offered load (requests/s)";
  c.y_label = "output tokens/s";
  for (const Summary& s : r.summaries) {
    Series series{s.policy, {}, true};
    for (const StageSummary& st : s.stages) {
      if (!st.warmup && st.requests > 0) series.points.emplace_back(st.qps, st.output_tps);
    }
    c.series.push_back(std::move(series));
  }
  return render_svg(c);
}

std::string ttft_vs_qps_svg(const ScenarioResults& r) {
  LineChart c;
  c.title = "p90 TTFT vs offered QPS: " + r.scenario;
  c.x_label = "offered load (requests/s)";
  c.y_label = "p90 time to first token (s, log scale)";
  c.log_y = true;
  for (const Summary& s : r.summaries) {
    Series series{s.policy, {}, true};
    for (const StageSummary& st : s.stages) {
      if (!st.warmup && st.requests > 0)
        series.points.emplace_back(st.qps, std::max(1e-3, st.ttft_p90));
    }
    c.series.push_back(std::move(series));
  }
  return render_svg(c);
}

namespace {

// Decode KV usage (%) and the share of prefill engines busy (%) of one run, between
// `from` and `to` (0: the end), each averaged over `smooth` consecutive samples.
LineChart pd_panel(const PolicyRun& run, Nanos from, Nanos to, size_t smooth) {
  LineChart c;
  c.x_label = "time (s)";
  c.y_label = "%";
  c.width = 900;
  c.height = 280;
  Series kv{"decode KV usage", {}, false};
  Series busy{"prefill engines busy", {}, false};
  double kv_sum = 0, busy_sum = 0;
  size_t n = 0;
  for (const ClusterSample& s : run.samples) {
    if (s.at < from || (to > 0 && s.at > to)) continue;
    kv_sum += s.decode_kv_usage;
    busy_sum += s.prefill_busy;
    if (++n < smooth) continue;
    const double t = to_seconds(s.at);
    kv.points.emplace_back(t, kv_sum / static_cast<double>(n) * 100);
    busy.points.emplace_back(t, busy_sum / static_cast<double>(n) * 100);
    kv_sum = busy_sum = 0;
    n = 0;
  }
  c.series = {std::move(kv), std::move(busy)};
  return c;
}

}  // namespace

std::string pd_load_over_time_svg(const ScenarioResults& r) {
  // One panel per policy, on the same time axis, so the swings line up by eye; each
  // point averages enough samples to keep the file small (1 s at the default scrape).
  std::vector<LineChart> panels;
  for (const PolicyRun& run : r.runs) {
    const size_t smooth = std::max<size_t>(1, run.samples.size() / 1500);
    LineChart c = pd_panel(run, 0, 0, std::max<size_t>(smooth, 10));
    c.title = fmt::format("{}: decode KV usage and prefill engines busy (1 s means)", run.policy);
    panels.push_back(std::move(c));
  }
  return render_svg_panels(panels);
}

PdZoom pd_zoom_window(const ScenarioResults& r) {
  // The busiest stage (the first of the highest rate), from 10 s in (past the ramp).
  const workload::StageInfo* busiest = nullptr;
  for (const workload::StageInfo& st : r.stages) {
    if (!st.warmup && (!busiest || st.qps > busiest->qps)) busiest = &st;
  }
  if (!busiest) return {};
  const Nanos from = std::min(busiest->start + 10 * kSecond, busiest->end);
  return {from, std::min(from + 20 * kSecond, busiest->end)};
}

std::string pd_load_zoom_svg(const ScenarioResults& r) {
  const PdZoom zoom = pd_zoom_window(r);
  std::vector<LineChart> panels;
  for (const PolicyRun& run : r.runs) {
    LineChart c = pd_panel(run, zoom.from, zoom.to, 1);
    c.title = fmt::format("{}: decode KV usage and prefill engines busy, every scrape", run.policy);
    panels.push_back(std::move(c));
  }
  return render_svg_panels(panels);
}

std::vector<std::pair<std::string, std::string>> report_files(const ScenarioResults& r,
                                                              bool per_request) {
  std::vector<std::pair<std::string, std::string>> files = {
      {"summary.csv", summary_csv(r.summaries)},
      {"stages.csv", stages_csv(r.summaries)},
      {"report.json", report_json(r.scenario, r.seed, r.summaries)},
      {"ttft_cdf.svg", ttft_cdf_svg(r)},
      {"throughput_vs_qps.svg", throughput_vs_qps_svg(r)},
      {"ttft_p90_vs_qps.svg", ttft_vs_qps_svg(r)},
  };
  const bool disaggregated = has_pd_samples(r.runs);
  if (disaggregated) {
    files.emplace_back("pd_load_over_time.svg", pd_load_over_time_svg(r));
    files.emplace_back("pd_load_zoom.svg", pd_load_zoom_svg(r));
    files.emplace_back("pd_load.csv",
                       pd_load_csv(summarize_pd_load(r.runs, r.summaries, r.stages)));
    files.emplace_back("pd_load_samples.csv", pd_samples_csv(r));
  }
  if (per_request) files.emplace_back("requests.csv", requests_csv(r));
  return files;
}

}  // namespace kvgate::workload
