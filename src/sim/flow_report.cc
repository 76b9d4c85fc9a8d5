#include "sim/flow_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "workload/csv.h"
#include "workload/svg_plot.h"

namespace kvgate::sim {

using workload::cdf_points;
using workload::ClusterSample;
using workload::LineChart;
using workload::PolicyRun;
using workload::quantile;
using workload::render_svg;
using workload::RequestRecord;
using workload::Series;

double weighted_jain_index(const std::vector<double>& served, const std::vector<double>& demanded,
                           const std::vector<double>& weights) {
  const size_t n = served.size();
  if (n == 0) return 0;
  // Water filling: share the capacity (everything served) by weight; a tenant that asked
  // for less keeps what it asked for, the rest goes round again.
  double capacity = 0;
  for (double s : served) capacity += s;
  std::vector<double> fair(n, 0);
  std::vector<bool> capped(n, false);
  for (size_t round = 0; round < n && capacity > 1e-9; ++round) {
    double wsum = 0;
    for (size_t i = 0; i < n; ++i) wsum += capped[i] ? 0 : weights[i];
    if (wsum <= 0) break;
    bool any = false;
    const double per_weight = capacity / wsum;
    for (size_t i = 0; i < n; ++i) {
      if (!capped[i] && fair[i] + per_weight * weights[i] >= demanded[i]) {
        capacity -= demanded[i] - fair[i];
        fair[i] = demanded[i];
        capped[i] = true;
        any = true;
      }
    }
    if (!any) {
      for (size_t i = 0; i < n; ++i) {
        if (!capped[i]) fair[i] += per_weight * weights[i];
      }
      capacity = 0;
    }
  }
  double sum = 0, sq = 0;
  size_t counted = 0;
  for (size_t i = 0; i < n; ++i) {
    if (fair[i] <= 0) continue;
    const double x = served[i] / fair[i];
    sum += x;
    sq += x * x;
    ++counted;
  }
  return sq > 0 ? sum * sum / (static_cast<double>(counted) * sq) : 0;
}

FlowRunSummary summarize_flow(const PolicyRun& run,
                              const std::vector<workload::TenantSpec>& tenants) {
  FlowRunSummary out;
  out.run = run.policy;
  const size_t n = std::max<size_t>(tenants.size(), 1);
  std::vector<TenantSummary> t(n);
  std::vector<std::vector<double>> ttft(n), waits(n);
  std::vector<std::map<std::string, uint64_t>> reasons(n);
  Nanos first = -1, last = 0, arrivals_end = 0;
  double output = 0;
  for (const RequestRecord& r : run.requests) arrivals_end = std::max(arrivals_end, r.arrival);
  for (const RequestRecord& r : run.requests) {
    const size_t i = std::min<size_t>(r.tenant, n - 1);
    ++t[i].sent;
    t[i].demanded_tokens += r.prompt_tokens;  // output added below for served ones
    if (first < 0 || r.arrival < first) first = r.arrival;
    if (r.queue_wait >= 0) {
      ++t[i].queued;
      waits[i].push_back(to_seconds(r.queue_wait));
    }
    if (r.rejected) {
      ++t[i].refused;
      ++reasons[i][std::string(r.reject_reason.empty() ? "rejected" : r.reject_reason)];
      continue;
    }
    if (r.first_token < 0) continue;
    ++t[i].served;
    ttft[i].push_back(to_seconds(r.first_token - r.arrival));
    // Service within the arrival window (the overload), not what was caught up later.
    if (r.finish >= 0 && r.finish <= arrivals_end) {
      t[i].served_tokens += r.prompt_tokens + r.output_tokens;
    }
    t[i].demanded_tokens += r.output_tokens;
    output += r.output_tokens;
    last = std::max(last, r.finish);
  }
  // Refused requests asked for output too: count what the served ones of the tenant got
  // on average (the workload's lengths), so that demand is not understated.
  for (size_t i = 0; i < n; ++i) {
    if (t[i].served > 0 && t[i].refused > 0) {
      double out_tokens = 0;
      for (const RequestRecord& r : run.requests) {
        if (std::min<size_t>(r.tenant, n - 1) == i && !r.rejected && r.first_token >= 0)
          out_tokens += r.output_tokens;
      }
      t[i].demanded_tokens +=
          out_tokens / static_cast<double>(t[i].served) * static_cast<double>(t[i].refused);
    }
  }
  const double span = first >= 0 && last > first ? to_seconds(last - first) : 0;
  const double window = first >= 0 && arrivals_end > first ? to_seconds(arrivals_end - first) : 0;
  out.output_tokens_per_s = span > 0 ? output / span : 0;
  std::vector<double> served, demanded, weights;
  for (size_t i = 0; i < n; ++i) {
    TenantSummary& s = t[i];
    if (s.sent == 0) continue;
    s.tenant = i < tenants.size() ? tenants[i].name : "all";
    s.ttft_p50 = quantile(ttft[i], 0.5);
    s.ttft_p90 = quantile(ttft[i], 0.9);
    s.ttft_p99 = quantile(ttft[i], 0.99);
    s.queue_wait_p90 = quantile(waits[i], 0.9);
    s.served_tokens_per_s = window > 0 ? s.served_tokens / window : 0;
    for (const auto& [reason, count] : reasons[i]) s.refused_by_reason.emplace_back(reason, count);
    served.push_back(s.served_tokens);
    demanded.push_back(s.demanded_tokens);
    weights.push_back(i < tenants.size() ? tenants[i].weight : 1);
    out.tenants.push_back(std::move(s));
  }
  out.jain_index = weighted_jain_index(served, demanded, weights);
  for (const ClusterSample& c : run.samples) out.max_queued = std::max(out.max_queued, c.queued);
  if (run.autoscaled && !run.replicas.empty() && run.replicas.front().launched_at > 0) {
    out.from_zero = true;
    const RequestRecord* first = nullptr;
    for (const RequestRecord& r : run.requests) {
      if (!first || r.arrival < first->arrival) first = &r;
    }
    if (first) {
      out.first_arrival = first->arrival;
      out.first_wait = first->rejected ? -1 : first->queue_wait;
    }
    out.first_launched = run.replicas.front().launched_at;
    out.first_ready = run.replicas.front().ready_at;
  }
  return out;
}

std::string flow_table(const std::vector<FlowRunSummary>& runs) {
  std::string s = "\nflow control, per tenant (TTFT in seconds, tokens = prompt + output)\n";
  s += fmt::format("  {:<16} {:<10} {:>7} {:>7} {:>8} {:>8} {:>8} {:>8} {:>9} {:>11}  {}\n", "run",
                   "tenant", "sent", "served", "p50", "p90", "p99", "wait90", "queued", "tokens/s",
                   "refused");
  for (const FlowRunSummary& r : runs) {
    for (const TenantSummary& t : r.tenants) {
      std::string refused;
      for (const auto& [reason, count] : t.refused_by_reason)
        refused += fmt::format("{}{} {}", refused.empty() ? "" : ", ", count, reason);
      s += fmt::format(
          "  {:<16} {:<10} {:>7} {:>7} {:>8.3f} {:>8.3f} {:>8.3f} {:>8.3f} {:>9} {:>11.0f}  {}\n",
          r.run, t.tenant, t.sent, t.served, t.ttft_p50, t.ttft_p90, t.ttft_p99, t.queue_wait_p90,
          t.queued, t.served_tokens_per_s, refused.empty() ? "-" : refused);
    }
    s += fmt::format(
        "  {:<16} pool: {:.0f} output tokens/s, Jain's index {:.3f}, max queued {:.0f}\n", r.run,
        r.output_tokens_per_s, r.jain_index, r.max_queued);
    if (r.from_zero) {
      s += fmt::format(
          "  {:<16} from zero: first request at {:.2f} s {}; first replica launched at "
          "{:.2f} s, ready at {:.2f} s (cold start {:.1f} s)\n",
          r.run, to_seconds(r.first_arrival),
          r.first_wait >= 0 ? fmt::format("waited {:.2f} s in the queue", to_seconds(r.first_wait))
                            : std::string("was not served"),
          to_seconds(r.first_launched), to_seconds(r.first_ready),
          r.first_ready >= 0 ? to_seconds(r.first_ready - r.first_launched) : 0.0);
    }
  }
  return s;
}

Result<std::vector<std::string>> write_flow_files(const std::vector<PolicyRun>& runs,
                                                  const std::vector<FlowRunSummary>& summaries,
                                                  const std::vector<workload::TenantSpec>& tenants,
                                                  const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Error(fmt::format("cannot create {}: {}", dir, ec.message()));
  std::vector<std::string> written;
  auto write = [&](const std::string& name, const std::string& text) -> Status {
    const std::string path = dir + "/" + name;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) return Error("cannot write " + path);
    written.push_back(path);
    return {};
  };
  std::string csv =
      "run,tenant,sent,served,refused,queued,ttft_p50_s,ttft_p90_s,ttft_p99_s,queue_wait_p90_s,"
      "served_tokens_per_s,pool_output_tokens_per_s,jain_index\n";
  for (const FlowRunSummary& r : summaries) {
    for (const TenantSummary& t : r.tenants) {
      csv +=
          fmt::format("{},{},{},{},{},{},{:.4f},{:.4f},{:.4f},{:.4f},{:.1f},{:.1f},{:.4f}\n",
                      workload::csv_field(r.run), workload::csv_field(t.tenant), t.sent, t.served,
                      t.refused, t.queued, t.ttft_p50, t.ttft_p90, t.ttft_p99, t.queue_wait_p90,
                      t.served_tokens_per_s, r.output_tokens_per_s, r.jain_index);
    }
  }
  if (Status s = write("flow.csv", csv); !s) return Error(s.error());

  LineChart cdf{.title = "TTFT CDF per run and tenant",
                .x_label = "TTFT (s)",
                .y_label = "fraction of served requests",
                .log_x = true};
  LineChart queue{.title = "Requests queued in the gateway",
                  .x_label = "time (s)",
                  .y_label = "queued requests"};
  for (const PolicyRun& run : runs) {
    const size_t n = std::max<size_t>(tenants.size(), 1);
    std::vector<std::vector<double>> ttft(n);
    for (const RequestRecord& r : run.requests) {
      if (!r.rejected && r.first_token >= 0)
        ttft[std::min<size_t>(r.tenant, n - 1)].push_back(to_seconds(r.first_token - r.arrival));
    }
    for (size_t i = 0; i < n; ++i) {
      if (ttft[i].empty()) continue;
      const std::string tenant = i < tenants.size() ? tenants[i].name : "all";
      cdf.series.push_back({run.policy + " / " + tenant, cdf_points(std::move(ttft[i]))});
    }
    Series q{run.policy, {}};
    for (const ClusterSample& c : run.samples) q.points.emplace_back(to_seconds(c.at), c.queued);
    if (q.points.size() > 2000) {
      Series thin{q.name, {}};
      const size_t step = q.points.size() / 1000;
      for (size_t k = 0; k < q.points.size(); k += step) thin.points.push_back(q.points[k]);
      q = std::move(thin);
    }
    queue.series.push_back(std::move(q));
  }
  if (Status s = write("flow_ttft_cdf.svg", render_svg(cdf)); !s) return Error(s.error());
  if (Status s = write("flow_queue.svg", render_svg(queue)); !s) return Error(s.error());
  return written;
}

}  // namespace kvgate::sim
