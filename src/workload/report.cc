#include "workload/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>

#include "workload/csv.h"

namespace kvgate::workload {

double quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (pos - static_cast<double>(lo));
}

namespace {

double mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

// Failure columns are printed only for runs with injected failures, so every other
// report stays byte for byte what it was.
bool any_failure_report(const std::vector<Summary>& summaries) {
  return std::any_of(summaries.begin(), summaries.end(),
                     [](const Summary& s) { return s.failure_report; });
}

bool any_lora_report(const std::vector<Summary>& summaries) {
  return std::any_of(summaries.begin(), summaries.end(),
                     [](const Summary& s) { return s.lora_report; });
}

bool any_session_report(const std::vector<Summary>& summaries) {
  return std::any_of(summaries.begin(), summaries.end(),
                     [](const Summary& s) { return s.session_report; });
}

bool any_latency_report(const std::vector<Summary>& summaries) {
  return std::any_of(summaries.begin(), summaries.end(),
                     [](const Summary& s) { return s.latency_report; });
}

bool is_warmup(const std::vector<workload::StageInfo>& stages, uint32_t stage) {
  return stage < stages.size() && stages[stage].warmup;
}

}  // namespace

Summary summarize(const PolicyRun& run, const std::vector<workload::StageInfo>& stages) {
  Summary s;
  s.policy = run.policy;
  std::vector<double> ttft;
  std::vector<double> untargeted_ttft;  // latency targets: requests without any
  uint64_t ttft_targeted = 0, ttft_met = 0, tpot_targeted = 0, tpot_met = 0, slo_met = 0;
  double decode_time = 0, decode_tokens = 0, prompt = 0, cached = 0, output = 0;
  Nanos first_arrival = -1, last_finish = 0;

  struct StageAcc {
    std::vector<double> ttft;
    double output = 0, prompt = 0, cached = 0;
    uint64_t requests = 0, completed = 0;
    Nanos first_arrival = -1, last_finish = 0;
  };
  std::vector<StageAcc> acc(std::max<size_t>(stages.size(), 1));

  for (const RequestRecord& r : run.requests) {
    StageAcc& a = acc[std::min<size_t>(r.stage, acc.size() - 1)];
    ++a.requests;
    if (a.first_arrival < 0 || r.arrival < a.first_arrival) a.first_arrival = r.arrival;
    const bool warm = is_warmup(stages, r.stage);
    if (!warm) {
      ++s.requests;
      if (first_arrival < 0 || r.arrival < first_arrival) first_arrival = r.arrival;
      s.retried += r.retries > 0;
      s.migrated += r.migrated;
      s.session_requests += r.session;
      s.session_kept += r.session_kept;
      s.session_moved += r.session_moved;
      if (run.latency_targets) {
        const bool has_ttft = r.ttft_target > 0;
        const bool targeted = has_ttft || r.tpot_target > 0;
        const bool answered = !r.failed && !r.rejected && r.first_token >= 0;
        const bool met_ttft = answered && (!has_ttft || r.first_token - r.arrival <= r.ttft_target);
        const bool met_tpot =
            answered && (r.tpot_target <= 0 || r.output_tokens < 2 ||
                         (r.finish >= 0 &&
                          (r.finish - r.first_token) / static_cast<Nanos>(r.output_tokens - 1) <=
                              r.tpot_target));
        s.targeted += targeted;
        ttft_targeted += has_ttft;
        ttft_met += has_ttft && met_ttft;
        tpot_targeted += r.tpot_target > 0;
        tpot_met += r.tpot_target > 0 && met_tpot;
        slo_met += targeted && met_ttft && met_tpot;
        if (!targeted && answered) untargeted_ttft.push_back(to_seconds(r.first_token - r.arrival));
      }
    }
    if (r.failed) {
      // Lost: like a refusal, it has no TTFT, tokens or cache figures to count.
      if (!warm) ++s.failed;
      continue;
    }
    if (r.rejected) {
      if (!warm) {
        ++s.rejected;
        if (r.rejected_after_prefill) {
          ++s.rejected_after_prefill;
          s.wasted_prefill_tokens += r.prompt_tokens - r.cached_tokens;
        }
      }
      continue;
    }
    if (r.first_token >= 0) {
      const double t = to_seconds(r.first_token - r.arrival);
      a.ttft.push_back(t);
      if (!warm) ttft.push_back(t);
    }
    a.prompt += r.prompt_tokens;
    a.cached += r.cached_tokens;
    if (r.finish >= 0) {
      ++a.completed;
      a.output += r.output_tokens;
      a.last_finish = std::max(a.last_finish, r.finish);
      if (!warm) {
        ++s.completed;
        output += r.output_tokens;
        last_finish = std::max(last_finish, r.finish);
        if (r.output_tokens > 1 && r.first_token >= 0) {
          decode_time += to_seconds(r.finish - r.first_token);
          decode_tokens += r.output_tokens - 1;
        }
      }
    }
    if (!warm) {
      prompt += r.prompt_tokens;
      cached += r.cached_tokens;
    }
  }

  s.ttft_p50 = quantile(ttft, 0.5);
  s.ttft_p90 = quantile(ttft, 0.9);
  s.ttft_p99 = quantile(ttft, 0.99);
  s.ttft_mean = mean(ttft);
  s.itl_mean = decode_tokens > 0 ? decode_time / decode_tokens : 0;
  s.hit_rate = prompt > 0 ? cached / prompt : 0;
  if (first_arrival >= 0 && last_finish > first_arrival) {
    s.output_tps_overall = output / to_seconds(last_finish - first_arrival);
  }

  std::vector<double> stage_tps;
  for (size_t i = 0; i < stages.size(); ++i) {
    const StageAcc& a = acc[i];
    StageSummary st;
    st.qps = stages[i].qps;
    st.warmup = stages[i].warmup;
    st.requests = a.requests;
    st.ttft_p50 = quantile(a.ttft, 0.5);
    st.ttft_p90 = quantile(a.ttft, 0.9);
    st.ttft_mean = mean(a.ttft);
    st.hit_rate = a.prompt > 0 ? a.cached / a.prompt : 0;
    if (a.first_arrival >= 0 && a.last_finish > a.first_arrival) {
      const double span = to_seconds(a.last_finish - a.first_arrival);
      st.output_tps = a.output / span;
      st.requests_per_s = static_cast<double>(a.completed) / span;
    }
    if (!st.warmup && a.requests > 0) stage_tps.push_back(st.output_tps);
    s.stages.push_back(st);
  }
  s.output_tps = stage_tps.empty() ? s.output_tps_overall : mean(stage_tps);

  // Time-averaged queue and KV usage after the warmup (samples are evenly spaced).
  Nanos measured_from = 0;
  for (const workload::StageInfo& st : stages) {
    if (st.warmup) measured_from = std::max(measured_from, st.end);
  }
  double waiting = 0, kv = 0;
  size_t n = 0;
  for (const ClusterSample& c : run.samples) {
    if (c.at < measured_from) continue;
    waiting += c.mean_waiting;
    kv += c.mean_kv_usage;
    ++n;
  }
  if (n > 0) {
    s.mean_waiting = waiting / static_cast<double>(n);
    s.mean_kv_usage = kv / static_cast<double>(n);
  }
  if (run.wall_seconds > 0) s.speedup = to_seconds(run.end_time) / run.wall_seconds;
  if (run.cpu_seconds > 0) s.speedup_cpu = to_seconds(run.end_time) / run.cpu_seconds;
  s.failure_report = run.failures_injected;
  s.breaker_openings = run.breaker_openings;
  s.latency_report = run.latency_targets;
  s.predictor = run.predictor;
  if (ttft_targeted > 0) {
    s.ttft_target_met = static_cast<double>(ttft_met) / static_cast<double>(ttft_targeted);
  }
  if (tpot_targeted > 0) {
    s.tpot_target_met = static_cast<double>(tpot_met) / static_cast<double>(tpot_targeted);
  }
  if (s.targeted > 0) s.slo_met = static_cast<double>(slo_met) / static_cast<double>(s.targeted);
  s.untargeted_ttft_p90 = quantile(untargeted_ttft, 0.9);
  s.ttft_mape = run.predictor_ttft.mape();
  s.tpot_mape = run.predictor_tpot.mape();
  s.ttft_samples = run.predictor_ttft.count;
  s.tpot_samples = run.predictor_tpot.count;
  s.lora_report = run.lora;
  s.session_report = run.sessions;
  if (s.session_requests > 0) {
    s.session_hit_rate =
        static_cast<double>(s.session_kept) / static_cast<double>(s.session_requests);
  }
  s.adapter_loads = run.adapter_loads;
  s.adapter_evictions = run.adapter_evictions;
  s.placement_actions = run.placement_actions;
  if (run.end_time > 0) {
    s.adapter_loads_per_min =
        static_cast<double>(run.adapter_loads) / (to_seconds(run.end_time) / 60);
  }
  return s;
}

std::string format_table(const std::string& scenario, const std::vector<Summary>& summaries) {
  std::string out = fmt::format("scenario: {}\n", scenario);
  out += fmt::format("{:<14} {:>9} {:>9} {:>9} {:>9} {:>11} {:>9} {:>9} {:>9} {:>9}\n", "policy",
                     "TTFT p50", "TTFT p90", "TTFT p99", "ITL mean", "out tok/s", "hit rate",
                     "waiting", "rejected", "requests");
  for (const Summary& s : summaries) {
    out += fmt::format(
        "{:<14} {:>8.2f}s {:>8.2f}s {:>8.2f}s {:>7.1f}ms {:>11.0f} {:>8.1f}% {:>9.1f} {:>9} "
        "{:>9}\n",
        s.policy, s.ttft_p50, s.ttft_p90, s.ttft_p99, s.itl_mean * 1e3, s.output_tps,
        s.hit_rate * 100, s.mean_waiting, s.rejected, s.requests);
  }
  if (any_lora_report(summaries)) {
    out += fmt::format("{:<14} {:>9} {:>9} {:>9} {:>9}\n", "LoRA", "loads", "loads/min",
                       "evictions", "placement");
    for (const Summary& s : summaries) {
      out += fmt::format("{:<14} {:>9} {:>9.1f} {:>9} {:>9}\n", s.policy, s.adapter_loads,
                         s.adapter_loads_per_min, s.adapter_evictions, s.placement_actions);
    }
  }
  if (any_session_report(summaries)) {
    out += fmt::format("{:<14} {:>9} {:>9} {:>9} {:>9}\n", "sessions", "requests", "kept", "moved",
                       "hit rate");
    for (const Summary& s : summaries) {
      out += fmt::format("{:<14} {:>9} {:>9} {:>9} {:>8.1f}%\n", s.policy, s.session_requests,
                         s.session_kept, s.session_moved, s.session_hit_rate * 100);
    }
  }
  if (any_latency_report(summaries)) {
    out += fmt::format("{:<14} {:>9} {:>9} {:>9} {:>9} {:>11} {:>9} {:>9}\n", "targets", "targeted",
                       "TTFT met", "TPOT met", "all met", "p90 others", "TTFT MAPE", "TPOT MAPE");
    for (const Summary& s : summaries) {
      const std::string ttft_mape =
          s.predictor ? fmt::format("{:.1f}%", s.ttft_mape * 100) : std::string("-");
      const std::string tpot_mape =
          s.predictor ? fmt::format("{:.1f}%", s.tpot_mape * 100) : std::string("-");
      out += fmt::format("{:<14} {:>9} {:>8.1f}% {:>8.1f}% {:>8.1f}% {:>10.2f}s {:>9} {:>9}\n",
                         s.policy, s.targeted, s.ttft_target_met * 100, s.tpot_target_met * 100,
                         s.slo_met * 100, s.untargeted_ttft_p90, ttft_mape, tpot_mape);
    }
  }
  if (any_failure_report(summaries)) {
    out += fmt::format("{:<14} {:>9} {:>9} {:>9} {:>9}\n", "failures", "lost", "retried",
                       "migrated", "breaker");
    for (const Summary& s : summaries) {
      out += fmt::format("{:<14} {:>9} {:>9} {:>9} {:>9}\n", s.policy, s.failed, s.retried,
                         s.migrated, s.breaker_openings);
    }
  }
  return out;
}

std::string summary_csv(const std::vector<Summary>& summaries) {
  const bool failures = any_failure_report(summaries);
  std::string out =
      "policy,requests,completed,rejected,ttft_p50_s,ttft_p90_s,ttft_p99_s,ttft_mean_s,"
      "itl_mean_s,output_tokens_per_s,output_tokens_per_s_overall,prefix_hit_rate,"
      "mean_waiting,mean_kv_usage,speedup,speedup_cpu,rejected_after_prefill,"
      "wasted_prefill_tokens";
  const bool lora = any_lora_report(summaries);
  const bool sessions = any_session_report(summaries);
  const bool latency = any_latency_report(summaries);
  out += failures ? ",failed,retried,migrated,breaker_openings" : "";
  out += lora ? ",adapter_loads,adapter_loads_per_min,adapter_evictions,placement_actions" : "";
  out += sessions ? ",session_requests,session_kept,session_moved,session_hit_rate" : "";
  out += latency ? ",targeted,ttft_target_met,tpot_target_met,slo_met,untargeted_ttft_p90_s,"
                   "predictor_ttft_mape,predictor_tpot_mape,predictor_ttft_samples,"
                   "predictor_tpot_samples\n"
                 : "\n";
  for (const Summary& s : summaries) {
    out += fmt::format(
        "{},{},{},{},{:.4f},{:.4f},{:.4f},{:.4f},{:.5f},{:.1f},{:.1f},{:.4f},{:.3f},"
        "{:.4f},{:.0f},{:.0f},{},{}\n",
        csv_field(s.policy), s.requests, s.completed, s.rejected, s.ttft_p50, s.ttft_p90,
        s.ttft_p99, s.ttft_mean, s.itl_mean, s.output_tps, s.output_tps_overall, s.hit_rate,
        s.mean_waiting, s.mean_kv_usage, s.speedup, s.speedup_cpu, s.rejected_after_prefill,
        s.wasted_prefill_tokens);
    if (failures) {
      out.pop_back();  // the line's end: the failure columns follow
      out += fmt::format(",{},{},{},{}\n", s.failed, s.retried, s.migrated, s.breaker_openings);
    }
    if (lora) {
      out.pop_back();
      out += fmt::format(",{},{:.2f},{},{}\n", s.adapter_loads, s.adapter_loads_per_min,
                         s.adapter_evictions, s.placement_actions);
    }
    if (sessions) {
      out.pop_back();
      out += fmt::format(",{},{},{},{:.4f}\n", s.session_requests, s.session_kept, s.session_moved,
                         s.session_hit_rate);
    }
    if (latency) {
      out.pop_back();
      // No predictor: its MAPE columns are empty (not 0, which would read as exact).
      out += fmt::format(",{},{:.4f},{:.4f},{:.4f},{:.4f},{},{},{},{}\n", s.targeted,
                         s.ttft_target_met, s.tpot_target_met, s.slo_met, s.untargeted_ttft_p90,
                         s.predictor ? fmt::format("{:.4f}", s.ttft_mape) : "",
                         s.predictor ? fmt::format("{:.4f}", s.tpot_mape) : "", s.ttft_samples,
                         s.tpot_samples);
    }
  }
  return out;
}

std::string stages_csv(const std::vector<Summary>& summaries) {
  std::string out =
      "policy,stage,qps,warmup,requests,ttft_p50_s,ttft_p90_s,ttft_mean_s,output_tokens_per_s,"
      "requests_per_s,prefix_hit_rate\n";
  for (const Summary& s : summaries) {
    for (size_t i = 0; i < s.stages.size(); ++i) {
      const StageSummary& st = s.stages[i];
      out +=
          fmt::format("{},{},{:.3f},{},{},{:.4f},{:.4f},{:.4f},{:.1f},{:.3f},{:.4f}\n",
                      csv_field(s.policy), i, st.qps, st.warmup ? 1 : 0, st.requests, st.ttft_p50,
                      st.ttft_p90, st.ttft_mean, st.output_tps, st.requests_per_s, st.hit_rate);
    }
  }
  return out;
}

std::string report_json(const std::string& scenario, uint64_t seed,
                        const std::vector<Summary>& summaries) {
  boost::json::object root;
  root["scenario"] = scenario;
  root["seed"] = seed;
  boost::json::array policies;
  for (const Summary& s : summaries) {
    boost::json::object p;
    p["policy"] = s.policy;
    p["requests"] = s.requests;
    p["completed"] = s.completed;
    p["rejected"] = s.rejected;
    p["rejected_after_prefill"] = s.rejected_after_prefill;
    p["wasted_prefill_tokens"] = s.wasted_prefill_tokens;
    if (s.failure_report) {
      p["failed"] = s.failed;
      p["retried"] = s.retried;
      p["migrated"] = s.migrated;
      p["breaker_openings"] = s.breaker_openings;
    }
    if (s.latency_report) {
      p["targeted"] = s.targeted;
      p["ttft_target_met"] = s.ttft_target_met;
      p["tpot_target_met"] = s.tpot_target_met;
      p["slo_met"] = s.slo_met;
      p["untargeted_ttft_p90_s"] = s.untargeted_ttft_p90;
      if (s.predictor) {
        p["predictor_ttft_mape"] = s.ttft_mape;
        p["predictor_tpot_mape"] = s.tpot_mape;
        p["predictor_ttft_samples"] = s.ttft_samples;
        p["predictor_tpot_samples"] = s.tpot_samples;
      }
    }
    if (s.lora_report) {
      p["adapter_loads"] = s.adapter_loads;
      p["adapter_loads_per_min"] = s.adapter_loads_per_min;
      p["adapter_evictions"] = s.adapter_evictions;
      p["placement_actions"] = s.placement_actions;
    }
    if (s.session_report) {
      p["session_requests"] = s.session_requests;
      p["session_kept"] = s.session_kept;
      p["session_moved"] = s.session_moved;
      p["session_hit_rate"] = s.session_hit_rate;
    }
    p["ttft_p50_s"] = s.ttft_p50;
    p["ttft_p90_s"] = s.ttft_p90;
    p["ttft_p99_s"] = s.ttft_p99;
    p["ttft_mean_s"] = s.ttft_mean;
    p["itl_mean_s"] = s.itl_mean;
    p["output_tokens_per_s"] = s.output_tps;
    p["output_tokens_per_s_overall"] = s.output_tps_overall;
    p["prefix_hit_rate"] = s.hit_rate;
    p["mean_waiting"] = s.mean_waiting;
    p["mean_kv_usage"] = s.mean_kv_usage;
    p["speedup_vs_real_time"] = s.speedup;
    p["speedup_vs_real_time_cpu"] = s.speedup_cpu;
    boost::json::array stages;
    for (const StageSummary& st : s.stages) {
      stages.push_back(boost::json::object{{"qps", st.qps},
                                           {"warmup", st.warmup},
                                           {"requests", st.requests},
                                           {"ttft_p50_s", st.ttft_p50},
                                           {"ttft_p90_s", st.ttft_p90},
                                           {"ttft_mean_s", st.ttft_mean},
                                           {"output_tokens_per_s", st.output_tps},
                                           {"requests_per_s", st.requests_per_s},
                                           {"prefix_hit_rate", st.hit_rate}});
    }
    p["stages"] = std::move(stages);
    policies.push_back(std::move(p));
  }
  root["policies"] = std::move(policies);
  return boost::json::serialize(root) + "\n";
}

}  // namespace kvgate::workload
