#include "workload/workload_yaml.h"

#include "core/common/yaml_reader.h"
#include "workload/tenant_workload.h"

namespace kvgate::workload {
namespace {

// `workload` is the section that holds `arrivals:`; `where` its path.
Result<ArrivalSpec> parse_arrivals(const YamlReader& y, const YAML::Node& workload,
                                   const std::string& where) {
  ArrivalSpec a;
  const std::string wa = where + ".arrivals";
  const YAML::Node n = workload["arrivals"];
  if (!n) return y.error(workload, wa, "missing");
  KVGATE_TRY(y.expect_map(n, wa,
                          {"kind", "stages", "mean_qps", "amplitude", "period_s", "phase",
                           "duration_s", "stage_s", "bursts"}));
  std::string kind = "poisson";
  KVGATE_TRY(y.read(n, "kind", kind, wa));
  if (kind == "poisson") {
    a.kind = ArrivalSpec::Kind::kPoisson;
  } else if (kind == "constant") {
    a.kind = ArrivalSpec::Kind::kConstant;
  } else if (kind == "diurnal") {
    a.kind = ArrivalSpec::Kind::kDiurnal;
  } else {
    return y.error(n["kind"], wa + ".kind",
                   "expected poisson, constant or diurnal, got \"" + kind + "\"");
  }
  if (a.kind == ArrivalSpec::Kind::kDiurnal) {
    KVGATE_TRY(y.read(n, "mean_qps", a.mean_qps, wa));
    KVGATE_TRY(y.read(n, "amplitude", a.amplitude, wa));
    KVGATE_TRY(y.read(n, "period_s", a.period_s, wa));
    KVGATE_TRY(y.read(n, "phase", a.phase, wa));
    KVGATE_TRY(y.read(n, "duration_s", a.duration_s, wa));
    KVGATE_TRY(y.read(n, "stage_s", a.stage_s, wa));
    if (a.mean_qps < 0 || a.period_s <= 0 || a.duration_s <= 0 || a.amplitude < 0 ||
        a.amplitude > 1) {
      return y.error(n, wa,
                     "need mean_qps >= 0, period_s > 0, duration_s > 0, 0 <= amplitude <= 1");
    }
    if (const YAML::Node bursts = n["bursts"]) {
      if (!bursts.IsSequence()) return y.error(bursts, wa + ".bursts", "expected a list");
      for (size_t i = 0; i < bursts.size(); ++i) {
        const std::string w = wa + ".bursts[" + std::to_string(i) + "]";
        const YAML::Node b = bursts[i];
        KVGATE_TRY(y.expect_map(b, w, {"start_s", "duration_s", "factor"}));
        ArrivalSpec::Burst burst;
        KVGATE_TRY(y.read(b, "start_s", burst.start_s, w));
        KVGATE_TRY(y.read(b, "duration_s", burst.duration_s, w));
        KVGATE_TRY(y.read(b, "factor", burst.factor, w));
        if (burst.start_s < 0 || burst.duration_s <= 0 || burst.factor <= 0 || burst.factor > 100) {
          return y.error(b, w, "need start_s >= 0, duration_s > 0, 0 < factor <= 100");
        }
        a.bursts.push_back(burst);
      }
    }
    return a;
  }
  const YAML::Node stages = n["stages"];
  if (!stages || !stages.IsSequence() || stages.size() == 0) {
    return y.error(stages ? stages : n, wa + ".stages", "expected a non-empty list");
  }
  for (size_t i = 0; i < stages.size(); ++i) {
    const std::string w = wa + ".stages[" + std::to_string(i) + "]";
    const YAML::Node s = stages[i];
    KVGATE_TRY(y.expect_map(s, w, {"qps", "rate", "duration_s", "duration", "warmup"}));
    Stage st;
    KVGATE_TRY(y.read(s, "rate", st.qps, w));
    KVGATE_TRY(y.read(s, "qps", st.qps, w));
    KVGATE_TRY(y.read(s, "duration", st.duration_s, w));
    KVGATE_TRY(y.read(s, "duration_s", st.duration_s, w));
    KVGATE_TRY(y.read(s, "warmup", st.warmup, w));
    if (st.qps < 0 || st.duration_s <= 0) {
      return y.error(s, w, "need qps >= 0 and duration_s > 0");
    }
    a.stages.push_back(st);
  }
  return a;
}

}  // namespace

Result<WorkloadSpec> parse_workload(const YAML::Node& n, const std::string& base_dir,
                                    std::string_view file, const std::string& where) {
  const YamlReader y(file);
  WorkloadSpec w;
  if (!n || !n.IsMap()) return y.error(n, where, "missing or not a map");
  KVGATE_TRY(y.expect_map(
      n, where,
      {"kind", "shared_prefix", "chat", "trace", "arrivals", "vocab_size", "tenants", "targets"}));
  std::string kind;
  KVGATE_TRY(y.read(n, "kind", kind, where));
  KVGATE_TRY(y.read(n, "vocab_size", w.vocab_size, where));
  if (const YAML::Node t = n["targets"]) {
    const std::string wt = where + ".targets";
    KVGATE_TRY(y.expect_map(t, wt, {"fraction", "ttft_ms", "tpot_ms"}));
    double ttft_ms = 0, tpot_ms = 0;
    KVGATE_TRY(y.read(t, "fraction", w.targets.fraction, wt));
    KVGATE_TRY(y.read(t, "ttft_ms", ttft_ms, wt));
    KVGATE_TRY(y.read(t, "tpot_ms", tpot_ms, wt));
    if (!(w.targets.fraction >= 0 && w.targets.fraction <= 1)) {
      return y.error(t["fraction"], wt + ".fraction", "expected a number in [0, 1]");
    }
    if (!(ttft_ms >= 0 && ttft_ms <= 86'400'000)) {
      return y.error(t["ttft_ms"], wt + ".ttft_ms", "expected milliseconds >= 0 (at most a day)");
    }
    if (!(tpot_ms >= 0 && tpot_ms <= 86'400'000)) {
      return y.error(t["tpot_ms"], wt + ".tpot_ms", "expected milliseconds >= 0 (at most a day)");
    }
    if (ttft_ms == 0 && tpot_ms == 0) {
      return y.error(t, wt, "needs ttft_ms or tpot_ms (or both) > 0");
    }
    w.targets.ttft = static_cast<Nanos>(ttft_ms * 1e6);
    w.targets.tpot = static_cast<Nanos>(tpot_ms * 1e6);
  }
  if (kind == "tenants") {
    KVGATE_TRY(parse_tenants(n["tenants"], base_dir, w, file, where + ".tenants"));
    return w;  // each tenant brings its own arrivals
  }
  if (kind == "shared_prefix") {
    w.kind = WorkloadSpec::Kind::kSharedPrefix;
    const YAML::Node s = n["shared_prefix"];
    const std::string ws = where + ".shared_prefix";
    if (!s) return y.error(n, ws, "missing");
    KVGATE_TRY(y.expect_map(
        s, ws,
        {"groups", "num_groups", "prompts_per_group", "num_prompts_per_group",
         "system_prompt_tokens", "system_prompt_len", "question_tokens", "question_len",
         "output_tokens", "output_len", "output_tokens_min", "order"}));
    auto& sp = w.shared_prefix;
    KVGATE_TRY(y.read(s, "num_groups", sp.groups, ws));
    KVGATE_TRY(y.read(s, "groups", sp.groups, ws));
    KVGATE_TRY(y.read(s, "num_prompts_per_group", sp.prompts_per_group, ws));
    KVGATE_TRY(y.read(s, "prompts_per_group", sp.prompts_per_group, ws));
    KVGATE_TRY(y.read(s, "system_prompt_len", sp.system_prompt_tokens, ws));
    KVGATE_TRY(y.read(s, "system_prompt_tokens", sp.system_prompt_tokens, ws));
    KVGATE_TRY(y.read(s, "question_len", sp.question_tokens, ws));
    KVGATE_TRY(y.read(s, "question_tokens", sp.question_tokens, ws));
    KVGATE_TRY(y.read(s, "output_len", sp.output_tokens, ws));
    KVGATE_TRY(y.read(s, "output_tokens", sp.output_tokens, ws));
    KVGATE_TRY(y.read(s, "output_tokens_min", sp.output_tokens_min, ws));
    std::string order = "cycle";
    KVGATE_TRY(y.read(s, "order", order, ws));
    if (order != "cycle" && order != "random") {
      return y.error(s["order"], ws + ".order", "expected cycle or random");
    }
    sp.cycle = order == "cycle";
    if (sp.groups == 0 || sp.prompts_per_group == 0 || sp.output_tokens == 0) {
      return y.error(s, ws, "groups, prompts_per_group and output_tokens must be > 0");
    }
    if (sp.output_tokens_min > sp.output_tokens) {
      return y.error(s, ws, "output_tokens_min must be <= output_tokens");
    }
  } else if (kind == "chat") {
    w.kind = WorkloadSpec::Kind::kChat;
    const YAML::Node s = n["chat"];
    const std::string ws = where + ".chat";
    if (!s) return y.error(n, ws, "missing");
    KVGATE_TRY(y.expect_map(s, ws,
                            {"system_prompts", "system_prompt_tokens", "min_turns", "max_turns",
                             "user_tokens", "output_tokens", "think_time_s"}));
    auto& c = w.chat;
    KVGATE_TRY(y.read(s, "system_prompts", c.system_prompts, ws));
    KVGATE_TRY(y.read(s, "system_prompt_tokens", c.system_prompt_tokens, ws));
    KVGATE_TRY(y.read(s, "min_turns", c.min_turns, ws));
    KVGATE_TRY(y.read(s, "max_turns", c.max_turns, ws));
    KVGATE_TRY(y.read(s, "user_tokens", c.user_tokens, ws));
    KVGATE_TRY(y.read(s, "output_tokens", c.output_tokens, ws));
    KVGATE_TRY(y.read(s, "think_time_s", c.think_time_s, ws));
    if (c.min_turns == 0 || c.max_turns < c.min_turns || c.output_tokens == 0) {
      return y.error(s, ws, "need 1 <= min_turns <= max_turns and output_tokens > 0");
    }
  } else if (kind == "trace") {
    w.kind = WorkloadSpec::Kind::kTrace;
    const YAML::Node s = n["trace"];
    const std::string ws = where + ".trace";
    if (!s) return y.error(n, ws, "missing");
    KVGATE_TRY(
        y.expect_map(s, ws, {"path", "block_tokens", "time_scale", "max_requests", "stage_s"}));
    auto& t = w.trace;
    KVGATE_TRY(y.read(s, "path", t.path, ws));
    KVGATE_TRY(y.read(s, "block_tokens", t.block_tokens, ws));
    KVGATE_TRY(y.read(s, "time_scale", t.time_scale, ws));
    KVGATE_TRY(y.read(s, "max_requests", t.max_requests, ws));
    KVGATE_TRY(y.read(s, "stage_s", t.stage_s, ws));
    if (t.path.empty()) return y.error(s, ws + ".path", "required");
    if (t.path[0] != '/' && !base_dir.empty()) t.path = base_dir + "/" + t.path;
    if (t.block_tokens == 0 || t.time_scale <= 0) {
      return y.error(s, ws, "need block_tokens > 0 and time_scale > 0");
    }
    return w;  // a trace brings its own arrivals
  } else {
    const YAML::Node k = n["kind"];
    return y.error(k ? k : n, where + ".kind",
                   "expected shared_prefix, chat, trace or tenants, got \"" + kind + "\"");
  }
  auto arrivals = parse_arrivals(y, n, where);
  if (!arrivals) return Error(arrivals.error());
  w.arrivals = std::move(*arrivals);
  return w;
}

}  // namespace kvgate::workload
