// Scaling report: what autoscaling cost and what it delivered, per policy of a scenario.
//
//   - SLO attainment: the fraction of requests (non-warmup) whose TTFT and mean ITL are
//     both within the scenario's targets (scaling.slo); rejected or unfinished requests
//     miss. TTFT-only and ITL-only attainment beside it.
//   - GPU-hours: every replica from launch to stop (booting replicas hold their GPUs),
//     times GPUs per replica; and the ratio to the oracle's run when the scenario has one.
//   - Charts over the day: replicas held per policy, offered load, GPU utilisation.
#pragma once

#include <string>
#include <vector>

#include "core/common/result.h"
#include "workload/report.h"
#include "workload/scaling_spec.h"

namespace kvgate::sim {

struct ScalingSummary {
  std::string policy;
  uint64_t requests = 0;
  double slo_attainment = 0;  // 0..1
  double ttft_attainment = 0;
  double itl_attainment = 0;
  double ttft_p99 = 0;  // seconds
  double itl_p99 = 0;   // seconds, of per-request mean ITL
  double gpu_hours = 0;
  double vs_oracle = 0;      // gpu_hours / the oracle's; 0 without an oracle row
  double mean_replicas = 0;  // time-average of replicas held (ready + starting + draining)
  uint32_t peak_replicas = 0;
  uint32_t launches = 0;
  double mean_gpu_utilization = 0;  // reported by the engines, mean over control ticks
};

// `oracle` names the oracle policy's run ("" for none).
std::vector<ScalingSummary> summarize_scaling(const std::vector<workload::PolicyRun>& runs,
                                              const std::vector<workload::StageInfo>& stages,
                                              const workload::SloSpec& slo,
                                              const std::string& oracle);

std::string scaling_table(const std::vector<ScalingSummary>& rows, const workload::SloSpec& slo);
std::string scaling_csv(const std::vector<ScalingSummary>& rows);

// Replicas held over time, one series per policy; x in hours of virtual time.
std::string replicas_svg(const std::string& title, const std::vector<workload::PolicyRun>& runs);
// Offered load (arrivals/s per control interval) of the first run, and each policy's
// mean GPU utilisation as the engines report it.
std::string load_svg(const std::string& title, const std::vector<workload::PolicyRun>& runs);
std::string utilization_svg(const std::string& title, const std::vector<workload::PolicyRun>& runs);

// The frontier: SLO attainment against GPU-hours (x oracle), one series per policy family
// for rows named FAMILY@KNOB (a sweep of the family's main knob), plus the oracle's point.
std::string frontier_svg(const std::string& title, const std::vector<ScalingSummary>& rows);

// Writes scaling.csv, replicas.svg, load.svg and gpu_utilization.svg into `dir`, and
// frontier.svg when rows are named FAMILY@KNOB.
Result<std::vector<std::string>> write_scaling_files(const std::string& scenario,
                                                     const std::vector<workload::PolicyRun>& runs,
                                                     const std::vector<ScalingSummary>& rows,
                                                     const std::string& dir);

}  // namespace kvgate::sim
