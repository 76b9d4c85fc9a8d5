#include "sim/warmup_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "env/file.h"
#include "workload/csv.h"
#include "workload/svg_plot.h"

namespace kvgate::sim {

using workload::cdf_points;
using workload::LineChart;
using workload::PolicyRun;
using workload::quantile;
using workload::render_svg;
using workload::ReplicaLife;
using workload::RequestRecord;
using workload::Series;

namespace {

bool in_warmup_stage(const RequestRecord& r, const std::vector<workload::StageInfo>& stages) {
  return r.stage < stages.size() && stages[r.stage].warmup;
}

bool served(const RequestRecord& r) { return !r.rejected && r.first_token >= 0; }

// Whether `r` was served by a new replica within `window` of it joining routing.
bool new_replica_first(const PolicyRun& run, const RequestRecord& r, Nanos window) {
  if (r.endpoint >= run.replicas.size()) return false;
  const ReplicaLife& life = run.replicas[r.endpoint];
  if (life.launched_at <= 0 || life.admitted_at < 0) return false;
  return r.arrival >= life.admitted_at && r.arrival < life.admitted_at + window;
}

TtftFigures figures(const std::vector<const RequestRecord*>& records) {
  TtftFigures f;
  std::vector<double> ttfts;
  uint64_t prompt = 0, cached = 0;
  for (const RequestRecord* r : records) {
    ttfts.push_back(to_seconds(r->first_token - r->arrival));
    prompt += r->prompt_tokens;
    cached += r->cached_tokens;
  }
  f.requests = ttfts.size();
  if (ttfts.empty()) return f;
  double sum = 0;
  for (double t : ttfts) sum += t;
  f.mean = sum / static_cast<double>(ttfts.size());
  f.p50 = quantile(ttfts, 0.5);
  f.p90 = quantile(ttfts, 0.9);
  f.p99 = quantile(ttfts, 0.99);
  f.hit_rate = prompt ? static_cast<double>(cached) / static_cast<double>(prompt) : 0;
  return f;
}

}  // namespace

std::vector<WarmupSummary> summarize_warmup(const std::vector<PolicyRun>& runs,
                                            const std::vector<workload::StageInfo>& stages,
                                            Nanos window) {
  std::vector<WarmupSummary> out;
  for (const PolicyRun& run : runs) {
    WarmupSummary s;
    s.policy = run.policy;
    double warm = 0;
    for (const ReplicaLife& life : run.replicas) {
      if (life.launched_at <= 0 || life.admitted_at < 0) continue;
      ++s.new_replicas;
      warm += to_seconds(life.admitted_at - life.ready_at);
      s.warmup_requests += life.warmup_requests;
      s.warmup_tokens += life.warmup_tokens;
    }
    if (s.new_replicas) s.warmup_seconds = warm / s.new_replicas;
    std::vector<const RequestRecord*> first, pool;
    for (const RequestRecord& r : run.requests) {
      if (!served(r)) continue;
      if (new_replica_first(run, r, window)) first.push_back(&r);
      if (!in_warmup_stage(r, stages)) pool.push_back(&r);
    }
    s.new_replicas_first = figures(first);
    s.pool = figures(pool);
    out.push_back(std::move(s));
  }
  return out;
}

std::string warmup_table(const std::vector<WarmupSummary>& rows, Nanos window) {
  std::string out = fmt::format(
      "\nnew replicas in their first {:.0f} s in routing, and the whole pool (TTFT in "
      "seconds)\n",
      to_seconds(window));
  out += fmt::format(
      "{:<18} {:>5} {:>7} {:>8} | {:>6} {:>7} {:>7} {:>7} {:>5} | {:>6} {:>7} "
      "{:>7} {:>7} {:>5}\n",
      "policy", "new", "warm s", "warm req", "reqs", "p50", "p90", "mean", "hit", "reqs", "p50",
      "p90", "mean", "hit");
  for (const WarmupSummary& s : rows) {
    const TtftFigures& a = s.new_replicas_first;
    const TtftFigures& b = s.pool;
    out += fmt::format(
        "{:<18} {:>5} {:>7.2f} {:>8} | {:>6} {:>7.3f} {:>7.3f} {:>7.3f} {:>4.0f}% | {:>6} "
        "{:>7.3f} {:>7.3f} {:>7.3f} {:>4.0f}%\n",
        s.policy, s.new_replicas, s.warmup_seconds, s.warmup_requests, a.requests, a.p50, a.p90,
        a.mean, a.hit_rate * 100, b.requests, b.p50, b.p90, b.mean, b.hit_rate * 100);
  }
  return out;
}

std::string warmup_csv(const std::vector<WarmupSummary>& rows) {
  std::string out =
      "policy,new_replicas,warmup_seconds,warmup_requests,warmup_tokens,"
      "new_requests,new_ttft_p50,new_ttft_p90,new_ttft_p99,new_ttft_mean,new_hit_rate,"
      "pool_requests,pool_ttft_p50,pool_ttft_p90,pool_ttft_p99,pool_ttft_mean,pool_hit_rate\n";
  for (const WarmupSummary& s : rows) {
    const TtftFigures& a = s.new_replicas_first;
    const TtftFigures& b = s.pool;
    out += fmt::format(
        "{},{},{:.3f},{},{},{},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{},{:.4f},{:.4f},"
        "{:.4f},{:.4f},{:.4f}\n",
        workload::csv_field(s.policy), s.new_replicas, s.warmup_seconds, s.warmup_requests,
        s.warmup_tokens, a.requests, a.p50, a.p90, a.p99, a.mean, a.hit_rate, b.requests, b.p50,
        b.p90, b.p99, b.mean, b.hit_rate);
  }
  return out;
}

std::string warmup_cdf_svg(const std::string& title, const std::vector<PolicyRun>& runs,
                           Nanos window) {
  LineChart c{.title = title,
              .x_label = "TTFT (s), requests new replicas served in their first minutes",
              .y_label = "fraction of requests",
              .log_x = true};
  for (const PolicyRun& run : runs) {
    std::vector<double> ttfts;
    for (const RequestRecord& r : run.requests) {
      if (served(r) && new_replica_first(run, r, window))
        ttfts.push_back(to_seconds(r.first_token - r.arrival));
    }
    c.series.push_back({run.policy, cdf_points(std::move(ttfts))});
  }
  return render_svg(c);
}

std::string warmup_timeline_svg(const std::string& title, const std::vector<PolicyRun>& runs,
                                const std::vector<workload::StageInfo>& stages) {
  LineChart c{.title = title, .x_label = "arrival time (s)", .y_label = "mean TTFT (s), pool"};
  constexpr Nanos kBin = 10 * kSecond;
  for (const PolicyRun& run : runs) {
    std::map<int64_t, std::pair<double, uint64_t>> bins;
    for (const RequestRecord& r : run.requests) {
      if (!served(r) || in_warmup_stage(r, stages)) continue;
      auto& [sum, n] = bins[r.arrival / kBin];
      sum += to_seconds(r.first_token - r.arrival);
      ++n;
    }
    Series s{.name = run.policy};
    for (const auto& [bin, v] : bins) {
      s.points.emplace_back(to_seconds(bin * kBin + kBin / 2),
                            v.first / static_cast<double>(v.second));
    }
    c.series.push_back(std::move(s));
  }
  return render_svg(c);
}

Result<std::vector<std::string>> write_warmup_files(const std::vector<PolicyRun>& runs,
                                                    const std::vector<workload::StageInfo>& stages,
                                                    const std::vector<WarmupSummary>& rows,
                                                    Nanos window, const std::string& dir) {
  const std::vector<std::pair<std::string, std::string>> files = {
      {"warmup.csv", warmup_csv(rows)},
      {"warmup_ttft_cdf.svg",
       warmup_cdf_svg("TTFT on new replicas in their first minutes", runs, window)},
      {"warmup_timeline.svg", warmup_timeline_svg("Pool TTFT over time", runs, stages)},
  };
  return env::write_files(dir, files);
}

}  // namespace kvgate::sim
