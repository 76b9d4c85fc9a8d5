#include "sim/scaling_report.h"

#include <fmt/format.h>

#include <algorithm>

#include "env/file.h"
#include "workload/csv.h"
#include "workload/svg_plot.h"

namespace kvgate::sim {

using workload::LineChart;
using workload::PolicyRun;
using workload::quantile;
using workload::render_svg;
using workload::RequestRecord;
using workload::ScaleSample;
using workload::Series;
using workload::SloSpec;

namespace {

uint32_t held(const ScaleSample& s) { return s.ready + s.starting + s.draining; }

}  // namespace

std::vector<ScalingSummary> summarize_scaling(const std::vector<PolicyRun>& runs,
                                              const std::vector<workload::StageInfo>& stages,
                                              const SloSpec& slo, const std::string& oracle) {
  std::vector<ScalingSummary> out;
  double oracle_hours = 0;
  for (const PolicyRun& run : runs) {
    ScalingSummary s;
    s.policy = run.policy;
    uint64_t ok = 0, ttft_ok = 0, itl_ok = 0;
    std::vector<double> ttfts, itls;
    for (const RequestRecord& r : run.requests) {
      if (!stages.empty() && r.stage < stages.size() && stages[r.stage].warmup) continue;
      ++s.requests;
      if (r.rejected || r.first_token < 0 || r.finish < 0) continue;
      const double ttft = to_seconds(r.first_token - r.arrival);
      const double itl =
          r.output_tokens > 1 ? to_seconds(r.finish - r.first_token) / (r.output_tokens - 1) : 0.0;
      ttfts.push_back(ttft);
      itls.push_back(itl);
      const bool t = ttft <= slo.ttft_s, i = itl <= slo.itl_s;
      ttft_ok += t;
      itl_ok += i;
      ok += t && i;
    }
    const double n = static_cast<double>(std::max<uint64_t>(s.requests, 1));
    s.slo_attainment = static_cast<double>(ok) / n;
    s.ttft_attainment = static_cast<double>(ttft_ok) / n;
    s.itl_attainment = static_cast<double>(itl_ok) / n;
    s.ttft_p99 = quantile(std::move(ttfts), 0.99);
    s.itl_p99 = quantile(std::move(itls), 0.99);
    s.gpu_hours = run.gpu_seconds / 3600;
    s.launches = run.launches;
    // Replicas held, as a time average over the control ticks (each stands for the
    // interval before it).
    double area = 0, util = 0;
    Nanos prev = 0;
    for (const ScaleSample& x : run.scale) {
      area += held(x) * to_seconds(x.at - prev);
      util += x.gpu_utilization;
      prev = x.at;
      s.peak_replicas = std::max(s.peak_replicas, held(x));
    }
    if (!run.scale.empty()) {
      s.mean_replicas = area / to_seconds(std::max<Nanos>(prev, 1));
      s.mean_gpu_utilization = util / static_cast<double>(run.scale.size());
    }
    if (run.policy == oracle) oracle_hours = s.gpu_hours;
    out.push_back(std::move(s));
  }
  if (oracle_hours > 0) {
    for (ScalingSummary& s : out) s.vs_oracle = s.gpu_hours / oracle_hours;
  }
  return out;
}

std::string scaling_table(const std::vector<ScalingSummary>& rows, const SloSpec& slo) {
  std::string out = fmt::format(
      "autoscaling (SLO: TTFT <= {:g} s and mean ITL <= {:g} ms)\n"
      "{:<22} {:>9} {:>7} {:>7} {:>9} {:>8} {:>9} {:>8} {:>9} {:>6} {:>8} {:>6}\n",
      slo.ttft_s, slo.itl_s * 1e3, "policy", "SLO met", "TTFT ok", "ITL ok", "TTFT p99", "ITL p99",
      "GPU-hours", "x oracle", "mean repl", "peak", "launches", "util");
  for (const ScalingSummary& s : rows) {
    out += fmt::format(
        "{:<22} {:>8.1f}% {:>6.1f}% {:>6.1f}% {:>8.2f}s {:>6.1f}ms {:>9.2f} {:>8} {:>9.2f} {:>6} "
        "{:>8} {:>5.0f}%\n",
        s.policy, 100 * s.slo_attainment, 100 * s.ttft_attainment, 100 * s.itl_attainment,
        s.ttft_p99, 1e3 * s.itl_p99, s.gpu_hours,
        s.vs_oracle > 0 ? fmt::format("{:.2f}", s.vs_oracle) : std::string("-"), s.mean_replicas,
        s.peak_replicas, s.launches, 100 * s.mean_gpu_utilization);
  }
  return out;
}

std::string scaling_csv(const std::vector<ScalingSummary>& rows) {
  std::string out =
      "policy,requests,slo_attainment,ttft_attainment,itl_attainment,ttft_p99_s,itl_p99_s,"
      "gpu_hours,vs_oracle,mean_replicas,peak_replicas,launches,mean_gpu_utilization\n";
  for (const ScalingSummary& s : rows) {
    out +=
        fmt::format("{},{},{:.5f},{:.5f},{:.5f},{:.4f},{:.5f},{:.4f},{:.4f},{:.3f},{},{},{:.4f}\n",
                    workload::csv_field(s.policy), s.requests, s.slo_attainment, s.ttft_attainment,
                    s.itl_attainment, s.ttft_p99, s.itl_p99, s.gpu_hours, s.vs_oracle,
                    s.mean_replicas, s.peak_replicas, s.launches, s.mean_gpu_utilization);
  }
  return out;
}

std::string replicas_svg(const std::string& title, const std::vector<PolicyRun>& runs) {
  LineChart c{.title = title, .x_label = "hours (virtual time)", .y_label = "replicas held"};
  for (const PolicyRun& run : runs) {
    Series s{run.policy, {}};
    for (const ScaleSample& x : run.scale) s.points.emplace_back(to_seconds(x.at) / 3600, held(x));
    c.series.push_back(std::move(s));
  }
  return render_svg(c);
}

std::string load_svg(const std::string& title, const std::vector<PolicyRun>& runs) {
  LineChart c{.title = title, .x_label = "hours (virtual time)", .y_label = "arrivals per second"};
  if (!runs.empty()) {
    Series s{"offered load", {}};
    for (const ScaleSample& x : runs.front().scale)
      s.points.emplace_back(to_seconds(x.at) / 3600, x.arrival_qps);
    c.series.push_back(std::move(s));
  }
  return render_svg(c);
}

std::string utilization_svg(const std::string& title, const std::vector<PolicyRun>& runs) {
  LineChart c{
      .title = title, .x_label = "hours (virtual time)", .y_label = "mean GPU utilisation (0..1)"};
  for (const PolicyRun& run : runs) {
    Series s{run.policy, {}};
    for (const ScaleSample& x : run.scale)
      s.points.emplace_back(to_seconds(x.at) / 3600, x.gpu_utilization);
    c.series.push_back(std::move(s));
  }
  return render_svg(c);
}

std::string frontier_svg(const std::string& title, const std::vector<ScalingSummary>& rows) {
  LineChart c{
      .title = title, .x_label = "GPU-hours (x oracle)", .y_label = "requests within the SLO (%)"};
  std::vector<std::string> families;
  for (const ScalingSummary& r : rows) {
    const size_t at = r.policy.find('@');
    if (at == std::string::npos || r.vs_oracle <= 0) continue;
    const std::string family = r.policy.substr(0, at);
    auto it = std::find(families.begin(), families.end(), family);
    if (it == families.end()) {
      families.push_back(family);
      c.series.push_back({family, {}, true});
      it = families.end() - 1;
    }
    c.series[static_cast<size_t>(it - families.begin())].points.emplace_back(
        r.vs_oracle, 100 * r.slo_attainment);
  }
  for (Series& s : c.series) std::sort(s.points.begin(), s.points.end());
  for (const ScalingSummary& r : rows) {
    if (r.vs_oracle > 0 && r.policy.find('@') == std::string::npos && r.vs_oracle == 1) {
      c.series.push_back({r.policy, {{r.vs_oracle, 100 * r.slo_attainment}}, true});
    }
  }
  return render_svg(c);
}

Result<std::vector<std::string>> write_scaling_files(const std::string& scenario,
                                                     const std::vector<PolicyRun>& runs,
                                                     const std::vector<ScalingSummary>& rows,
                                                     const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> files = {
      {"scaling.csv", scaling_csv(rows)},
      {"replicas.svg", replicas_svg(scenario + ": replicas held", runs)},
      {"load.svg", load_svg(scenario + ": offered load", runs)},
      {"gpu_utilization.svg", utilization_svg(scenario + ": GPU utilisation", runs)},
  };
  const bool swept = std::any_of(rows.begin(), rows.end(), [](const ScalingSummary& r) {
    return r.policy.find('@') != std::string::npos && r.vs_oracle > 0;
  });
  if (swept) files.emplace_back("frontier.svg", frontier_svg(scenario + ": frontier", rows));
  return env::write_files(dir, files);
}

}  // namespace kvgate::sim
