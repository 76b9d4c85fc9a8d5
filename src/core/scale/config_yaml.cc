#include "core/scale/config_yaml.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cmath>
#include <initializer_list>
#include <string>
#include <string_view>

#include "core/common/yaml_reader.h"
#include "core/scale/config_yaml_node.h"

namespace kvgate::scale {

namespace {

Status read_double(const YamlReader& y, const YAML::Node& map, const char* key,
                   const std::string& path, double& out) {
  const YAML::Node n = map[key];
  if (!n) return {};
  double v = 0;
  if (!n.IsScalar() || !YAML::convert<double>::decode(n, v) || !std::isfinite(v)) {
    return y.error(n, path + "." + key, "expected a number");
  }
  out = v;
  return {};
}

Status read_int(const YamlReader& y, const YAML::Node& map, const char* key,
                const std::string& path, int32_t& out) {
  const YAML::Node n = map[key];
  if (!n) return {};
  int32_t v = 0;
  if (!n.IsScalar() || !YAML::convert<int32_t>::decode(n, v)) {
    return y.error(n, path + "." + key, "expected an integer");
  }
  out = v;
  return {};
}

Status read_bool(const YamlReader& y, const YAML::Node& map, const char* key,
                 const std::string& path, bool& out) {
  const YAML::Node n = map[key];
  if (!n) return {};
  bool v = false;
  if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v)) {
    return y.error(n, path + "." + key, "expected true or false");
  }
  out = v;
  return {};
}

Status read_duration(const YamlReader& y, const YAML::Node& map, const char* key,
                     const std::string& path, Nanos& out) {
  const YAML::Node n = map[key];
  if (!n) return {};
  if (!n.IsScalar()) return y.error(n, path + "." + key, "expected a duration");
  Result<Nanos> d = parse_duration(n.Scalar());
  if (!d) return y.error(n, path + "." + key, d.error());
  out = *d;
  return {};
}

Status read_string(const YamlReader& y, const YAML::Node& map, const char* key,
                   const std::string& path, std::optional<std::string>& out) {
  const YAML::Node n = map[key];
  if (!n) return {};
  if (!n.IsScalar()) return y.error(n, path + "." + key, "expected a string");
  out = n.Scalar();
  return {};
}

Status parse_rules(const YamlReader& y, const YAML::Node& n, const std::string& path,
                   ScalingRules& r) {
  KVGATE_TRY(y.expect_map(n, path, {"stabilization_window", "select_policy", "policies"}));
  KVGATE_TRY(read_duration(y, n, "stabilization_window", path, r.stabilization_window));
  std::optional<std::string> select;
  KVGATE_TRY(read_string(y, n, "select_policy", path, select));
  if (select) {
    if (*select == "max") {
      r.select = SelectPolicy::kMax;
    } else if (*select == "min") {
      r.select = SelectPolicy::kMin;
    } else if (*select == "disabled") {
      r.select = SelectPolicy::kDisabled;
    } else {
      return y.error(n["select_policy"], path + ".select_policy", "expected max, min or disabled");
    }
  }
  const YAML::Node list = n["policies"];
  if (!list) return {};
  if (!list.IsSequence()) return y.error(list, path + ".policies", "expected a list");
  r.policies.clear();
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node p = list[i];
    const std::string at = path + ".policies[" + std::to_string(i) + "]";
    KVGATE_TRY(y.expect_map(p, at, {"type", "value", "period"}));
    ScalingPolicy policy;
    std::optional<std::string> type;
    KVGATE_TRY(read_string(y, p, "type", at, type));
    if (type == "pods") {
      policy.type = PolicyType::kPods;
    } else if (type == "percent") {
      policy.type = PolicyType::kPercent;
    } else {
      return y.error(type ? p["type"] : p, at + ".type", "expected pods or percent");
    }
    if (!p["value"]) return y.error(p, at + ".value", "required");
    KVGATE_TRY(read_int(y, p, "value", at, policy.value));
    KVGATE_TRY(read_duration(y, p, "period", at, policy.period));
    r.policies.push_back(policy);
  }
  return {};
}

Status parse_forecast(const YamlReader& y, const YAML::Node& n, const std::string& path,
                      ForecastConfig& f) {
  KVGATE_TRY(
      y.expect_map(n, path, {"method", "window", "season", "slot", "alpha", "beta", "gamma"}));
  std::optional<std::string> method;
  KVGATE_TRY(read_string(y, n, "method", path, method));
  if (!method || *method == "none") {
    f.method = ForecastMethod::kNone;
  } else if (*method == "constant") {
    f.method = ForecastMethod::kConstant;
  } else if (*method == "moving_average") {
    f.method = ForecastMethod::kMovingAverage;
  } else if (*method == "holt_winters") {
    f.method = ForecastMethod::kHoltWinters;
  } else {
    return y.error(n["method"], path + ".method",
                   "expected none, constant, moving_average or holt_winters");
  }
  KVGATE_TRY(read_duration(y, n, "window", path, f.window));
  KVGATE_TRY(read_duration(y, n, "season", path, f.season));
  KVGATE_TRY(read_duration(y, n, "slot", path, f.slot));
  KVGATE_TRY(read_double(y, n, "alpha", path, f.alpha));
  KVGATE_TRY(read_double(y, n, "beta", path, f.beta));
  KVGATE_TRY(read_double(y, n, "gamma", path, f.gamma));
  return {};
}

Result<Nanos> parse_utc_offset(std::string_view s) {
  const Error bad("expected +HH:MM or -HH:MM");
  if (s.size() != 6 || (s[0] != '+' && s[0] != '-')) return bad;
  Result<Nanos> t = parse_time_of_day(s.substr(1));
  if (!t) return bad;
  return s[0] == '-' ? -*t : *t;
}

Status parse_schedule(const YamlReader& y, const YAML::Node& n, const std::string& path,
                      Schedule& s) {
  KVGATE_TRY(y.expect_map(n, path, {"utc_offset", "windows"}));
  if (const YAML::Node off = n["utc_offset"]) {
    Result<Nanos> o = off.IsScalar() ? parse_utc_offset(off.Scalar()) : Error("expected a string");
    if (!o) return y.error(off, path + ".utc_offset", o.error());
    s.utc_offset = *o;
  }
  const YAML::Node list = n["windows"];
  if (!list) return {};
  if (!list.IsSequence()) return y.error(list, path + ".windows", "expected a list");
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node w = list[i];
    const std::string at = path + ".windows[" + std::to_string(i) + "]";
    KVGATE_TRY(y.expect_map(w, at, {"from", "to", "min_replicas", "max_replicas"}));
    ScheduleWindow window;
    for (const char* key : {"from", "to"}) {
      const YAML::Node t = w[key];
      if (!t) return y.error(w, at + "." + key, "required");
      Result<Nanos> v = t.IsScalar() ? parse_time_of_day(t.Scalar()) : Error("expected HH:MM");
      if (!v) return y.error(t, at + "." + key, v.error());
      (key[0] == 'f' ? window.start : window.end) = *v;
    }
    int32_t v = 0;
    if (w["min_replicas"]) {
      KVGATE_TRY(read_int(y, w, "min_replicas", at, v));
      window.min_replicas = v;
    }
    if (w["max_replicas"]) {
      KVGATE_TRY(read_int(y, w, "max_replicas", at, v));
      window.max_replicas = v;
    }
    s.windows.push_back(window);
  }
  return {};
}

Status parse_profiles(const YamlReader& y, const YAML::Node& n, const std::string& path,
                      AutoscaleConfig& c) {
  if (const YAML::Node list = n["prefill_profile"]) {
    const std::string at = path + ".prefill_profile";
    if (!list.IsSequence()) return y.error(list, at, "expected a list");
    std::vector<PrefillPoint> points;
    for (size_t i = 0; i < list.size(); ++i) {
      const YAML::Node p = list[i];
      const std::string pat = at + "[" + std::to_string(i) + "]";
      KVGATE_TRY(y.expect_map(p, pat, {"input_tokens", "tokens_per_s", "ttft"}));
      PrefillPoint point;
      KVGATE_TRY(read_double(y, p, "input_tokens", pat, point.input_tokens));
      KVGATE_TRY(read_double(y, p, "tokens_per_s", pat, point.tokens_per_s));
      Nanos ttft = 0;
      KVGATE_TRY(read_duration(y, p, "ttft", pat, ttft));
      point.ttft_s = to_seconds(ttft);
      points.push_back(point);
    }
    Result<PrefillProfile> profile = PrefillProfile::make(std::move(points));
    if (!profile) return y.error(list, at, profile.error());
    c.prefill_profile = std::move(*profile);
  }
  if (const YAML::Node list = n["decode_profile"]) {
    const std::string at = path + ".decode_profile";
    if (!list.IsSequence()) return y.error(list, at, "expected a list");
    std::vector<DecodeRow> rows;
    for (size_t i = 0; i < list.size(); ++i) {
      const YAML::Node r = list[i];
      const std::string rat = at + "[" + std::to_string(i) + "]";
      KVGATE_TRY(y.expect_map(r, rat, {"context_tokens", "points"}));
      DecodeRow row;
      KVGATE_TRY(read_double(y, r, "context_tokens", rat, row.context_tokens));
      const YAML::Node points = r["points"];
      if (!points || !points.IsSequence()) return y.error(r, rat + ".points", "expected a list");
      for (size_t k = 0; k < points.size(); ++k) {
        const YAML::Node p = points[k];
        const std::string pat = rat + ".points[" + std::to_string(k) + "]";
        KVGATE_TRY(y.expect_map(p, pat, {"itl", "tokens_per_s"}));
        DecodePoint point;
        Nanos itl = 0;
        KVGATE_TRY(read_duration(y, p, "itl", pat, itl));
        point.itl_s = to_seconds(itl);
        KVGATE_TRY(read_double(y, p, "tokens_per_s", pat, point.tokens_per_s));
        row.points.push_back(point);
      }
      rows.push_back(std::move(row));
    }
    Result<DecodeProfile> profile = DecodeProfile::make(std::move(rows));
    if (!profile) return y.error(list, at, profile.error());
    c.decode_profile = std::move(*profile);
  }
  return {};
}

Status parse_planner(const YamlReader& y, const YAML::Node& n, const std::string& path,
                     AutoscaleConfig& c) {
  KVGATE_TRY(y.expect_map(n, path,
                          {"role", "ttft_target", "itl_target", "latency_stat", "correction",
                           "prefill_profile", "decode_profile"}));
  std::optional<std::string> role;
  KVGATE_TRY(read_string(y, n, "role", path, role));
  if (role == "prefill") {
    c.role = PoolRole::kPrefill;
  } else if (role == "decode") {
    c.role = PoolRole::kDecode;
  } else {
    return y.error(role ? n["role"] : n, path + ".role", "expected prefill or decode");
  }
  Nanos ttft = seconds(c.planner.ttft_s), itl = seconds(c.planner.itl_s);
  KVGATE_TRY(read_duration(y, n, "ttft_target", path, ttft));
  KVGATE_TRY(read_duration(y, n, "itl_target", path, itl));
  c.planner.ttft_s = to_seconds(ttft);
  c.planner.itl_s = to_seconds(itl);
  std::optional<std::string> stat;
  KVGATE_TRY(read_string(y, n, "latency_stat", path, stat));
  if (stat) {
    if (*stat == "mean") {
      c.latency_stat = LatencyStat::kMean;
    } else if (*stat == "p50") {
      c.latency_stat = LatencyStat::kP50;
    } else if (*stat == "p90") {
      c.latency_stat = LatencyStat::kP90;
    } else if (*stat == "p99") {
      c.latency_stat = LatencyStat::kP99;
    } else {
      return y.error(n["latency_stat"], path + ".latency_stat", "expected mean, p50, p90 or p99");
    }
  }
  if (const YAML::Node corr = n["correction"]) {
    KVGATE_TRY(y.expect_map(corr, path + ".correction", {"min", "max"}));
    KVGATE_TRY(read_double(y, corr, "min", path + ".correction", c.planner.min_correction));
    KVGATE_TRY(read_double(y, corr, "max", path + ".correction", c.planner.max_correction));
  }
  return parse_profiles(y, n, path, c);
}

Status parse_horizon(const YamlReader& y, const YAML::Node& n, const std::string& path,
                     HorizonConfig& h) {
  KVGATE_TRY(y.expect_map(
      n, path,
      {"ttft_target", "ttft_quantile", "itl_target", "quantile", "band_window", "band_max",
       "headroom", "prefix_hit_rate", "replica", "startup", "correction", "burst", "standby"}));
  Nanos ttft = seconds(h.ttft_s), itl = seconds(h.itl_s);
  KVGATE_TRY(read_duration(y, n, "ttft_target", path, ttft));
  KVGATE_TRY(read_duration(y, n, "itl_target", path, itl));
  h.ttft_s = to_seconds(ttft);
  h.itl_s = to_seconds(itl);
  KVGATE_TRY(read_double(y, n, "ttft_quantile", path, h.ttft_quantile));
  KVGATE_TRY(read_double(y, n, "quantile", path, h.quantile));
  KVGATE_TRY(read_duration(y, n, "band_window", path, h.band_window));
  KVGATE_TRY(read_double(y, n, "band_max", path, h.band_max));
  KVGATE_TRY(read_double(y, n, "headroom", path, h.headroom));
  if (n["prefix_hit_rate"]) {
    double hit = 0;
    KVGATE_TRY(read_double(y, n, "prefix_hit_rate", path, hit));
    h.prefix_hit_rate = hit;
  }
  KVGATE_TRY(read_int(y, n, "standby", path, h.standby));
  if (const YAML::Node r = n["replica"]) {
    const std::string at = path + ".replica";
    KVGATE_TRY(y.expect_map(r, at, {"prefill_tokens_per_s", "itl", "kv_tokens", "max_batch"}));
    KVGATE_TRY(read_double(y, r, "prefill_tokens_per_s", at, h.replica.prefill_tokens_per_s));
    Nanos itl = seconds(h.replica.itl_s);
    KVGATE_TRY(read_duration(y, r, "itl", at, itl));
    h.replica.itl_s = to_seconds(itl);
    KVGATE_TRY(read_double(y, r, "kv_tokens", at, h.replica.kv_tokens));
    KVGATE_TRY(read_int(y, r, "max_batch", at, h.replica.max_batch));
  }
  if (const YAML::Node st = n["startup"]) {
    const std::string at = path + ".startup";
    KVGATE_TRY(y.expect_map(st, at, {"cold", "caches_kept", "caches", "quantile", "margin"}));
    KVGATE_TRY(read_duration(y, st, "cold", at, h.startup_cold));
    KVGATE_TRY(read_duration(y, st, "caches_kept", at, h.startup_caches_kept));
    std::optional<std::string> caches;
    KVGATE_TRY(read_string(y, st, "caches", at, caches));
    if (caches == "kept") {
      h.caches_kept = true;
    } else if (caches == "cold") {
      h.caches_kept = false;
    } else if (caches) {
      return y.error(st["caches"], at + ".caches", "expected kept or cold");
    }
    KVGATE_TRY(read_double(y, st, "quantile", at, h.startup_quantile));
    KVGATE_TRY(read_duration(y, st, "margin", at, h.margin));
  }
  if (const YAML::Node co = n["correction"]) {
    const std::string at = path + ".correction";
    KVGATE_TRY(y.expect_map(co, at, {"enabled", "min", "max", "gain", "deadband", "settle"}));
    KVGATE_TRY(read_bool(y, co, "enabled", at, h.ttft_correction));
    KVGATE_TRY(read_double(y, co, "min", at, h.correction_min));
    KVGATE_TRY(read_double(y, co, "max", at, h.correction_max));
    KVGATE_TRY(read_double(y, co, "gain", at, h.correction_gain));
    KVGATE_TRY(read_double(y, co, "deadband", at, h.correction_deadband));
    KVGATE_TRY(read_duration(y, co, "settle", at, h.settle));
  }
  if (const YAML::Node b = n["burst"]) {
    const std::string at = path + ".burst";
    KVGATE_TRY(y.expect_map(b, at, {"enabled", "threshold", "max_step"}));
    KVGATE_TRY(read_bool(y, b, "enabled", at, h.burst));
    KVGATE_TRY(read_double(y, b, "threshold", at, h.burst_threshold));
    KVGATE_TRY(read_int(y, b, "max_step", at, h.burst_max_step));
  }
  return {};
}

// `shell_keys`: the caller's own keys beside the policy's (kvgate serve's actuator, ...).
Status parse_section(const YamlReader& y, const YAML::Node& n, const std::string& path,
                     std::initializer_list<std::string_view> shell_keys, AutoscaleConfig& c) {
  KVGATE_TRY(y.expect_map(n, path,
                          {"policy", "min_replicas", "max_replicas", "gpus_per_replica", "signal",
                           "target", "tolerance", "panic", "behavior", "forecast", "schedule",
                           "cold_start", "planner", "horizon"},
                          shell_keys));
  std::optional<std::string> policy;
  KVGATE_TRY(read_string(y, n, "policy", path, policy));
  if (policy) {
    std::optional<PolicyKind> p = parse_policy(*policy);
    if (!p)
      return y.error(n["policy"], path + ".policy",
                     "expected target, gpu-utilization, planner or horizon");
    c.policy = *p;
  }
  KVGATE_TRY(read_int(y, n, "min_replicas", path, c.min_replicas));
  KVGATE_TRY(read_int(y, n, "max_replicas", path, c.max_replicas));
  KVGATE_TRY(read_int(y, n, "gpus_per_replica", path, c.gpus_per_replica));
  std::optional<std::string> signal;
  KVGATE_TRY(read_string(y, n, "signal", path, signal));
  if (signal) {
    std::optional<Signal> s = parse_signal(*signal);
    if (!s) return y.error(n["signal"], path + ".signal", "unknown signal '" + *signal + "'");
    c.signal = *s;
  }
  KVGATE_TRY(read_double(y, n, "target", path, c.target));
  KVGATE_TRY(read_double(y, n, "tolerance", path, c.tracking.tolerance));
  if (const YAML::Node p = n["panic"]) {
    const std::string at = path + ".panic";
    KVGATE_TRY(y.expect_map(p, at, {"enabled", "stable_window", "panic_window", "threshold"}));
    c.tracking.panic.enabled = true;  // a panic section turns it on unless it says otherwise
    KVGATE_TRY(read_bool(y, p, "enabled", at, c.tracking.panic.enabled));
    KVGATE_TRY(read_duration(y, p, "stable_window", at, c.tracking.panic.stable_window));
    KVGATE_TRY(read_duration(y, p, "panic_window", at, c.tracking.panic.panic_window));
    KVGATE_TRY(read_double(y, p, "threshold", at, c.tracking.panic.threshold));
  }
  if (const YAML::Node b = n["behavior"]) {
    const std::string at = path + ".behavior";
    KVGATE_TRY(y.expect_map(b, at, {"scale_up", "scale_down"}));
    if (b["scale_up"])
      KVGATE_TRY(parse_rules(y, b["scale_up"], at + ".scale_up", c.behavior.scale_up));
    if (b["scale_down"]) {
      KVGATE_TRY(parse_rules(y, b["scale_down"], at + ".scale_down", c.behavior.scale_down));
    }
  }
  if (const YAML::Node f = n["forecast"])
    KVGATE_TRY(parse_forecast(y, f, path + ".forecast", c.forecast));
  if (const YAML::Node s = n["schedule"])
    KVGATE_TRY(parse_schedule(y, s, path + ".schedule", c.schedule));
  if (const YAML::Node cs = n["cold_start"]) {
    const std::string at = path + ".cold_start";
    KVGATE_TRY(y.expect_map(cs, at, {"aware", "startup_time", "stuck_factor", "young_age"}));
    KVGATE_TRY(read_bool(y, cs, "aware", at, c.cold_start_aware));
    KVGATE_TRY(read_duration(y, cs, "startup_time", at, c.startup_time));
    KVGATE_TRY(read_double(y, cs, "stuck_factor", at, c.stuck_factor));
    KVGATE_TRY(read_duration(y, cs, "young_age", at, c.young_age));
  }
  if (const YAML::Node p = n["planner"]) KVGATE_TRY(parse_planner(y, p, path + ".planner", c));
  if (const YAML::Node h = n["horizon"])
    KVGATE_TRY(parse_horizon(y, h, path + ".horizon", c.horizon));
  return {};
}

}  // namespace

Result<Nanos> parse_duration(std::string_view text) {
  // Built by append: GCC 12 at -O3 warns (-Wrestrict, falsely) on "'" + std::string(...).
  std::string message(1, '\'');
  message.append(text).append("' is not a duration (e.g. 200ms, 15s, 5m, 24h)");
  const Error bad(std::move(message));
  double scale = 1e9;
  std::string_view number = text;
  if (text.ends_with("ms")) {
    scale = 1e6;
    number.remove_suffix(2);
  } else if (text.ends_with("s")) {
    number.remove_suffix(1);
  } else if (text.ends_with("m")) {
    scale = 60e9;
    number.remove_suffix(1);
  } else if (text.ends_with("h")) {
    scale = 3600e9;
    number.remove_suffix(1);
  }
  double v = 0;
  auto [p, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
  if (number.empty() || ec != std::errc() || p != number.data() + number.size() ||
      !std::isfinite(v) || v < 0 || v * scale > 9e18) {
    return bad;
  }
  return static_cast<Nanos>(std::llround(v * scale));
}

Result<AutoscaleConfig> parse_autoscale_node(const YAML::Node& section, const std::string& path,
                                             std::initializer_list<std::string_view> shell_keys,
                                             std::string_view file) {
  const YamlReader y(file);
  try {
    AutoscaleConfig c;
    if (Status s = parse_section(y, section, path, shell_keys, c); !s) return Error(s.error());
    if (c.policy == PolicyKind::kGpuUtilization) c.signal = Signal::kGpuUtilization;
    if (Status s = validate(c); !s) {
      // validate() words "FIELD: message", FIELD relative to the section
      // ("max_replicas: must be >= min_replicas"): the error is at the section's place.
      const std::string_view e = s.error();
      const size_t colon = e.find(": ");
      if (colon == std::string_view::npos) return y.error(section, path, e);
      return y.error(section, path + "." + std::string(e.substr(0, colon)), e.substr(colon + 2));
    }
    return c;
  } catch (const YAML::Exception& e) {
    return y.error(e, path);
  }
}

Result<AutoscaleConfig> parse_autoscale_yaml(std::string_view text) {
  const YamlReader y;
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
    if (root.IsMap() && root["autoscale"]) return parse_autoscale_node(root["autoscale"]);
  } catch (const YAML::Exception& e) {
    return y.error(e, "autoscale");
  }
  return parse_autoscale_node(root);
}

}  // namespace kvgate::scale
