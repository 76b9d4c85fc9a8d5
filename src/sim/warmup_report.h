// Warm-up report: what warming new replicas before traffic bought, per policy of an
// autoscaled scenario (docs/coldstart.md, "Warm-up before traffic").
//
// A "new replica" is one launched after the start of the run that joined routing. Its
// first minutes are the `window` (scaling.new_replica_window_s) after it joined: with
// warm-up on, after its warm-up ended; without, when it became ready. For the requests
// new replicas served in their first minutes, and for the whole pool (non-warmup
// stages), the report gives TTFT percentiles and the prefix-cache hit rate.
#pragma once

#include <string>
#include <vector>

#include "core/common/result.h"
#include "core/common/time.h"
#include "workload/report.h"

namespace kvgate::sim {

struct TtftFigures {
  uint64_t requests = 0;                       // that got a first token
  double p50 = 0, p90 = 0, p99 = 0, mean = 0;  // seconds
  double hit_rate = 0;                         // cached prompt tokens / prompt tokens
};

struct WarmupSummary {
  std::string policy;
  uint32_t new_replicas = 0;       // launched after the start and joined routing
  double warmup_seconds = 0;       // mean time from ready to joining routing
  uint64_t warmup_requests = 0;    // warm-up requests answered, all new replicas
  uint64_t warmup_tokens = 0;      // their prompt tokens
  TtftFigures new_replicas_first;  // requests new replicas served in their first window
  TtftFigures pool;                // every request of the non-warmup stages
};

std::vector<WarmupSummary> summarize_warmup(const std::vector<workload::PolicyRun>& runs,
                                            const std::vector<workload::StageInfo>& stages,
                                            Nanos window);

std::string warmup_table(const std::vector<WarmupSummary>& rows, Nanos window);
std::string warmup_csv(const std::vector<WarmupSummary>& rows);
// CDF of the TTFT of the requests new replicas served in their first window, per policy.
std::string warmup_cdf_svg(const std::string& title, const std::vector<workload::PolicyRun>& runs,
                           Nanos window);
// Mean TTFT of the pool per 10 s of arrival time, per policy.
std::string warmup_timeline_svg(const std::string& title,
                                const std::vector<workload::PolicyRun>& runs,
                                const std::vector<workload::StageInfo>& stages);

// Writes warmup.csv, warmup_ttft_cdf.svg and warmup_timeline.svg into `dir`.
Result<std::vector<std::string>> write_warmup_files(const std::vector<workload::PolicyRun>& runs,
                                                    const std::vector<workload::StageInfo>& stages,
                                                    const std::vector<WarmupSummary>& rows,
                                                    Nanos window, const std::string& dir);

}  // namespace kvgate::sim
