// Flow-control report: per run and tenant, what flow control did to latency, service
// and fairness (docs/flow-control.md). For multi-tenant workloads (tenant_workload.h).
//
// Per tenant: requests sent, served (a first token), refused by reason, TTFT p50/p90/p99,
// queue wait p90, served tokens/s: prompt + output of the requests that finished within
// the arrival window (first to last arrival: the overload), over that window. Per run:
// the pool's output tokens/s (all output over the whole run) and Jain's fairness index
// of weighted service within the window: x_i = served_i / fair_i, where fair_i is tenant
// i's max-min fair share of the tokens the pool served in the window, by weight and
// capped at what it asked for (water filling); 1 means every tenant got its fair share.
#pragma once

#include <string>
#include <vector>

#include "core/common/result.h"
#include "workload/report.h"
#include "workload/workload.h"

namespace kvgate::sim {

struct TenantSummary {
  std::string tenant;
  uint64_t sent = 0;
  uint64_t served = 0;
  uint64_t refused = 0;
  std::vector<std::pair<std::string, uint64_t>> refused_by_reason;  // reason, count
  double ttft_p50 = 0, ttft_p90 = 0, ttft_p99 = 0;                  // seconds, over served requests
  double queue_wait_p90 = 0;                                        // seconds, over queued requests
  uint64_t queued = 0;  // requests that waited in the queue
  double served_tokens_per_s = 0;
  double demanded_tokens = 0;  // prompt + output of every request sent
  double served_tokens = 0;    // prompt + output finished within the arrival window
};

struct FlowRunSummary {
  std::string run;
  std::vector<TenantSummary> tenants;  // in the workload's tenant order (senders only)
  double output_tokens_per_s = 0;      // the pool's, over the run's span
  double jain_index = 0;               // of weighted service (see above)
  double max_queued = 0;
  // Autoscaled runs that started with no replica (scale from zero): the first request's
  // arrival and wait in the queue (-1: never dispatched), and the first replica's launch
  // and ready times (ready - launched: its cold start, from the profile's phase table).
  bool from_zero = false;
  Nanos first_arrival = 0, first_wait = -1, first_launched = 0, first_ready = -1;
};

FlowRunSummary summarize_flow(const workload::PolicyRun& run,
                              const std::vector<workload::TenantSpec>& tenants);
// Jain's index of served_i / fair_i (exposed for tests).
double weighted_jain_index(const std::vector<double>& served, const std::vector<double>& demanded,
                           const std::vector<double>& weights);

std::string flow_table(const std::vector<FlowRunSummary>& runs);
// flow.csv, flow_ttft_cdf.svg (TTFT CDF per run and tenant), flow_queue.svg (queue
// length over time per run) in `dir`. Returns the paths written.
Result<std::vector<std::string>> write_flow_files(const std::vector<workload::PolicyRun>& runs,
                                                  const std::vector<FlowRunSummary>& summaries,
                                                  const std::vector<workload::TenantSpec>& tenants,
                                                  const std::string& dir);

}  // namespace kvgate::sim
