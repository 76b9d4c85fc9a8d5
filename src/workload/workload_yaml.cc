#include "workload/workload_yaml.h"

#include "workload/tenant_workload.h"
#include "workload/yaml_util.h"

namespace kvgate::workload {

Status check_keys(const YAML::Node& node, std::initializer_list<const char*> known,
                  const std::string& where) {
  if (!node || !node.IsMap()) return {};
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>("");
    bool ok = false;
    for (const char* k : known) ok = ok || key == k;
    if (!ok) return Error(where + ": unknown key \"" + key + "\"");
  }
  return {};
}

namespace {

Result<ArrivalSpec> parse_arrivals(const YAML::Node& n) {
  ArrivalSpec a;
  const std::string where = "workload.arrivals";
  if (!n) return Error(where + ": missing");
  KVGATE_TRY(check_keys(n,
                        {"kind", "stages", "mean_qps", "amplitude", "period_s", "phase",
                         "duration_s", "stage_s", "bursts"},
                        where));
  std::string kind = "poisson";
  KVGATE_TRY(read_field(n, "kind", kind, where));
  if (kind == "poisson") {
    a.kind = ArrivalSpec::Kind::kPoisson;
  } else if (kind == "constant") {
    a.kind = ArrivalSpec::Kind::kConstant;
  } else if (kind == "diurnal") {
    a.kind = ArrivalSpec::Kind::kDiurnal;
  } else {
    return Error(where + ".kind: expected poisson, constant or diurnal, got \"" + kind + "\"");
  }
  if (a.kind == ArrivalSpec::Kind::kDiurnal) {
    KVGATE_TRY(read_field(n, "mean_qps", a.mean_qps, where));
    KVGATE_TRY(read_field(n, "amplitude", a.amplitude, where));
    KVGATE_TRY(read_field(n, "period_s", a.period_s, where));
    KVGATE_TRY(read_field(n, "phase", a.phase, where));
    KVGATE_TRY(read_field(n, "duration_s", a.duration_s, where));
    KVGATE_TRY(read_field(n, "stage_s", a.stage_s, where));
    if (a.mean_qps < 0 || a.period_s <= 0 || a.duration_s <= 0 || a.amplitude < 0 ||
        a.amplitude > 1) {
      return Error(where +
                   ": need mean_qps >= 0, period_s > 0, duration_s > 0, 0 <= amplitude <= 1");
    }
    if (const YAML::Node bursts = n["bursts"]) {
      if (!bursts.IsSequence()) return Error(where + ".bursts: expected a list");
      for (size_t i = 0; i < bursts.size(); ++i) {
        const std::string w = where + ".bursts[" + std::to_string(i) + "]";
        KVGATE_TRY(check_keys(bursts[i], {"start_s", "duration_s", "factor"}, w));
        ArrivalSpec::Burst b;
        KVGATE_TRY(read_field(bursts[i], "start_s", b.start_s, w));
        KVGATE_TRY(read_field(bursts[i], "duration_s", b.duration_s, w));
        KVGATE_TRY(read_field(bursts[i], "factor", b.factor, w));
        if (b.start_s < 0 || b.duration_s <= 0 || b.factor <= 0 || b.factor > 100) {
          return Error(w + ": need start_s >= 0, duration_s > 0, 0 < factor <= 100");
        }
        a.bursts.push_back(b);
      }
    }
    return a;
  }
  const YAML::Node stages = n["stages"];
  if (!stages || !stages.IsSequence() || stages.size() == 0) {
    return Error(where + ".stages: expected a non-empty list");
  }
  for (size_t i = 0; i < stages.size(); ++i) {
    const std::string w = where + ".stages[" + std::to_string(i) + "]";
    const YAML::Node s = stages[i];
    KVGATE_TRY(check_keys(s, {"qps", "rate", "duration_s", "duration", "warmup"}, w));
    Stage st;
    KVGATE_TRY(read_field(s, "rate", st.qps, w));
    KVGATE_TRY(read_field(s, "qps", st.qps, w));
    KVGATE_TRY(read_field(s, "duration", st.duration_s, w));
    KVGATE_TRY(read_field(s, "duration_s", st.duration_s, w));
    KVGATE_TRY(read_field(s, "warmup", st.warmup, w));
    if (st.qps < 0 || st.duration_s <= 0) return Error(w + ": need qps >= 0 and duration_s > 0");
    a.stages.push_back(st);
  }
  return a;
}

}  // namespace

Result<WorkloadSpec> parse_workload(const YAML::Node& n, const std::string& base_dir) {
  WorkloadSpec w;
  const std::string where = "workload";
  if (!n || !n.IsMap()) return Error("workload: missing or not a map");
  KVGATE_TRY(check_keys(
      n, {"kind", "shared_prefix", "chat", "trace", "arrivals", "vocab_size", "tenants"}, where));
  std::string kind;
  KVGATE_TRY(read_field(n, "kind", kind, where));
  KVGATE_TRY(read_field(n, "vocab_size", w.vocab_size, where));
  if (kind == "tenants") {
    KVGATE_TRY(parse_tenants(n["tenants"], base_dir, w));
    return w;  // each tenant brings its own arrivals
  }
  if (kind == "shared_prefix") {
    w.kind = WorkloadSpec::Kind::kSharedPrefix;
    const YAML::Node s = n["shared_prefix"];
    const std::string ws = where + ".shared_prefix";
    KVGATE_TRY(
        check_keys(s,
                   {"groups", "num_groups", "prompts_per_group", "num_prompts_per_group",
                    "system_prompt_tokens", "system_prompt_len", "question_tokens", "question_len",
                    "output_tokens", "output_len", "output_tokens_min", "order"},
                   ws));
    auto& sp = w.shared_prefix;
    KVGATE_TRY(read_field(s, "num_groups", sp.groups, ws));
    KVGATE_TRY(read_field(s, "groups", sp.groups, ws));
    KVGATE_TRY(read_field(s, "num_prompts_per_group", sp.prompts_per_group, ws));
    KVGATE_TRY(read_field(s, "prompts_per_group", sp.prompts_per_group, ws));
    KVGATE_TRY(read_field(s, "system_prompt_len", sp.system_prompt_tokens, ws));
    KVGATE_TRY(read_field(s, "system_prompt_tokens", sp.system_prompt_tokens, ws));
    KVGATE_TRY(read_field(s, "question_len", sp.question_tokens, ws));
    KVGATE_TRY(read_field(s, "question_tokens", sp.question_tokens, ws));
    KVGATE_TRY(read_field(s, "output_len", sp.output_tokens, ws));
    KVGATE_TRY(read_field(s, "output_tokens", sp.output_tokens, ws));
    KVGATE_TRY(read_field(s, "output_tokens_min", sp.output_tokens_min, ws));
    std::string order = "cycle";
    KVGATE_TRY(read_field(s, "order", order, ws));
    if (order != "cycle" && order != "random") {
      return Error(ws + ".order: expected cycle or random");
    }
    sp.cycle = order == "cycle";
    if (sp.groups == 0 || sp.prompts_per_group == 0 || sp.output_tokens == 0) {
      return Error(ws + ": groups, prompts_per_group and output_tokens must be > 0");
    }
    if (sp.output_tokens_min > sp.output_tokens) {
      return Error(ws + ": output_tokens_min must be <= output_tokens");
    }
  } else if (kind == "chat") {
    w.kind = WorkloadSpec::Kind::kChat;
    const YAML::Node s = n["chat"];
    const std::string ws = where + ".chat";
    KVGATE_TRY(check_keys(s,
                          {"system_prompts", "system_prompt_tokens", "min_turns", "max_turns",
                           "user_tokens", "output_tokens", "think_time_s"},
                          ws));
    auto& c = w.chat;
    KVGATE_TRY(read_field(s, "system_prompts", c.system_prompts, ws));
    KVGATE_TRY(read_field(s, "system_prompt_tokens", c.system_prompt_tokens, ws));
    KVGATE_TRY(read_field(s, "min_turns", c.min_turns, ws));
    KVGATE_TRY(read_field(s, "max_turns", c.max_turns, ws));
    KVGATE_TRY(read_field(s, "user_tokens", c.user_tokens, ws));
    KVGATE_TRY(read_field(s, "output_tokens", c.output_tokens, ws));
    KVGATE_TRY(read_field(s, "think_time_s", c.think_time_s, ws));
    if (c.min_turns == 0 || c.max_turns < c.min_turns || c.output_tokens == 0) {
      return Error(ws + ": need 1 <= min_turns <= max_turns and output_tokens > 0");
    }
  } else if (kind == "trace") {
    w.kind = WorkloadSpec::Kind::kTrace;
    const YAML::Node s = n["trace"];
    const std::string ws = where + ".trace";
    KVGATE_TRY(
        check_keys(s, {"path", "block_tokens", "time_scale", "max_requests", "stage_s"}, ws));
    auto& t = w.trace;
    KVGATE_TRY(read_field(s, "path", t.path, ws));
    KVGATE_TRY(read_field(s, "block_tokens", t.block_tokens, ws));
    KVGATE_TRY(read_field(s, "time_scale", t.time_scale, ws));
    KVGATE_TRY(read_field(s, "max_requests", t.max_requests, ws));
    KVGATE_TRY(read_field(s, "stage_s", t.stage_s, ws));
    if (t.path.empty()) return Error(ws + ".path: required");
    if (t.path[0] != '/' && !base_dir.empty()) t.path = base_dir + "/" + t.path;
    if (t.block_tokens == 0 || t.time_scale <= 0) {
      return Error(ws + ": need block_tokens > 0 and time_scale > 0");
    }
    return w;  // a trace brings its own arrivals
  } else {
    return Error(where + ".kind: expected shared_prefix, chat, trace or tenants, got \"" + kind +
                 "\"");
  }
  auto arrivals = parse_arrivals(n["arrivals"]);
  if (!arrivals) return Error(arrivals.error());
  w.arrivals = std::move(*arrivals);
  return w;
}

}  // namespace kvgate::workload
