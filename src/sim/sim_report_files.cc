#include "sim/sim_report_files.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "sim/svg_plot.h"

namespace kvgate::sim {
namespace {

Status write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Error("cannot write " + path);
  out << text;
  if (!out) return Error("error writing " + path);
  return {};
}

std::string requests_csv(const ScenarioResults& r) {
  std::string out =
      "policy,request,stage,endpoint,arrival_s,ttft_s,e2e_s,prompt_tokens,cached_tokens,"
      "output_tokens,rejected\n";
  for (const PolicyRun& run : r.runs) {
    for (size_t i = 0; i < run.requests.size(); ++i) {
      const RequestRecord& q = run.requests[i];
      out += fmt::format("{},{},{},{},{:.6f},{:.6f},{:.6f},{},{},{},{}\n", run.policy, i, q.stage,
                         q.endpoint, to_seconds(q.arrival),
                         q.first_token >= 0 ? to_seconds(q.first_token - q.arrival) : -1.0,
                         q.finish >= 0 ? to_seconds(q.finish - q.arrival) : -1.0, q.prompt_tokens,
                         q.cached_tokens, q.output_tokens, q.rejected ? 1 : 0);
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

std::string pd_load_over_time_svg(const ScenarioResults& r) {
  LineChart c;
  c.title = "Decode KV usage (%) and prefill queue over time: " + r.scenario;
  c.x_label = "time (s)";
  c.y_label = "decode KV usage (%) / prefill waiting per engine";
  c.width = 900;
  for (const PolicyRun& run : r.runs) {
    Series kv{run.policy + " decode KV %", {}, false};
    Series queue{run.policy + " prefill queue", {}, false};
    const size_t step = std::max<size_t>(1, run.samples.size() / 600);
    for (size_t i = 0; i < run.samples.size(); i += step) {
      const ClusterSample& s = run.samples[i];
      kv.points.emplace_back(to_seconds(s.at), s.decode_kv_usage * 100);
      queue.points.emplace_back(to_seconds(s.at), s.prefill_waiting);
    }
    c.series.push_back(std::move(kv));
    c.series.push_back(std::move(queue));
  }
  return render_svg(c);
}

Result<std::vector<std::string>> write_report_files(const ScenarioResults& r,
                                                    const std::string& dir, bool per_request) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Error("cannot create " + dir + ": " + ec.message());
  std::vector<std::pair<std::string, std::string>> files = {
      {"summary.csv", summary_csv(r.summaries)},
      {"stages.csv", stages_csv(r.summaries)},
      {"report.json", report_json(r.scenario, r.seed, r.summaries)},
      {"ttft_cdf.svg", ttft_cdf_svg(r)},
      {"throughput_vs_qps.svg", throughput_vs_qps_svg(r)},
      {"ttft_p90_vs_qps.svg", ttft_vs_qps_svg(r)},
  };
  bool disaggregated = false;
  for (const PolicyRun& run : r.runs) {
    for (const ClusterSample& s : run.samples)
      disaggregated = disaggregated || s.decode_kv_usage > 0;
  }
  if (disaggregated) files.emplace_back("pd_load_over_time.svg", pd_load_over_time_svg(r));
  if (per_request) files.emplace_back("requests.csv", requests_csv(r));
  std::vector<std::string> written;
  for (const auto& [name, text] : files) {
    const std::string path = dir + "/" + name;
    if (Status s = write_file(path, text); !s) return Error(s.error());
    written.push_back(path);
  }
  return written;
}

}  // namespace kvgate::sim
