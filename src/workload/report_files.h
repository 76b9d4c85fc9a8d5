// The files of a scenario's results, as (file name, text): summary.csv, stages.csv,
// report.json, requests.csv (optional) and the SVG charts (ttft_cdf.svg,
// throughput_vs_qps.svg, ttft_p90_vs_qps.svg). Disaggregated clusters also get
// pd_load_over_time.svg and pd_load_zoom.svg (one panel per policy), pd_load.csv
// (pd_load_report.h) and pd_load_samples.csv (every scrape sample: decode KV usage, prefill
// waiting, queued tokens, busy). `kvgate sim` and `kvgate bench` both write them, with
// env::write_files.
//
//   env::write_files(dir, report_files(results, /*per_request=*/true));
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "workload/report.h"

namespace kvgate::workload {

struct ScenarioResults {
  std::string scenario;
  uint64_t seed = 0;
  std::vector<PolicyRun> runs;
  std::vector<Summary> summaries;
  std::vector<workload::StageInfo> stages;
};

// The charts as SVG text (also used by the tests).
std::string ttft_cdf_svg(const ScenarioResults& results);
std::string throughput_vs_qps_svg(const ScenarioResults& results);
std::string ttft_vs_qps_svg(const ScenarioResults& results);
// Disaggregated clusters: decode KV usage and the share of prefill engines busy over
// time, one panel per policy (Mooncake's load oscillation): the whole run in 1 s means,
// and a 20 s zoom on every scrape sample, from 10 s into the busiest stage.
std::string pd_load_over_time_svg(const ScenarioResults& results);
std::string pd_load_zoom_svg(const ScenarioResults& results);
struct PdZoom {
  Nanos from = 0;
  Nanos to = 0;  // 0: the end of the run
};
PdZoom pd_zoom_window(const ScenarioResults& results);

// Every file of the report, in the order above (requests.csv last, when `per_request`).
std::vector<std::pair<std::string, std::string>> report_files(const ScenarioResults& results,
                                                              bool per_request);

}  // namespace kvgate::workload
