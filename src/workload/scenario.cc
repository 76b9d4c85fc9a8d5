#include "workload/scenario.h"

#include <algorithm>
#include <set>
#include <string_view>

#include "core/common/yaml_reader.h"
#include "core/route/config_yaml.h"
#include "core/scale/config_yaml_node.h"
#include "workload/flow_spec.h"
#include "workload/workload_yaml.h"

namespace kvgate::workload {

uint32_t Scenario::engine_count() const {
  uint32_t n = 0;
  for (const EngineGroup& g : engines) n += g.count;
  return n;
}

const PolicySpec* Scenario::policy(std::string_view name) const {
  for (const PolicySpec& p : policies) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

namespace {

Result<engine::Profile> load_profile(const std::string& name, const std::string& base_dir,
                                     const ReadFile& read_file) {
  if (auto builtin = engine::builtin_profile(name)) return std::move(*builtin);
  // Not a built-in: a YAML profile file.
  const std::string path =
      (!name.empty() && name[0] == '/') || base_dir.empty() ? name : base_dir + "/" + name;
  auto text = read_file(path);
  if (!text) {
    std::string known;
    for (auto n : engine::builtin_profile_names())
      known += (known.empty() ? "" : ", ") + std::string(n);
    return Error("profile \"" + name + "\" is neither a built-in (" + known +
                 ") nor a readable file");
  }
  auto p = engine::parse_profile_yaml(*text);
  if (!p) return Error(path + ": " + p.error());
  return std::move(*p);
}

Result<EngineGroup> parse_group(const YamlReader& y, const YAML::Node& n, const std::string& where,
                                const std::string& base_dir, const ReadFile& read_file,
                                const EngineGroup* defaults) {
  EngineGroup g = defaults ? *defaults : EngineGroup{};
  KVGATE_TRY(y.expect_map(
      n, where,
      {"count", "engines", "groups", "profile", "num_gpu_blocks", "block_size", "max_num_seqs",
       "max_num_batched_tokens", "max_model_len", "enable_prefix_caching", "num_host_blocks",
       "host_gbps", "num_disk_blocks", "disk_gbps", "role", "zone", "rack"}));
  KVGATE_TRY(y.read(n, "count", g.count, where));
  KVGATE_TRY(y.read(n, "engines", g.count, where));
  std::string profile;
  KVGATE_TRY(y.read(n, "profile", profile, where));
  if (!profile.empty()) {
    auto p = load_profile(profile, base_dir, read_file);
    if (!p) return y.error(n["profile"], where + ".profile", p.error());
    g.profile = std::move(*p);
  } else if (!defaults) {
    return y.error(n, where + ".profile", "required");
  }
  auto& c = g.config;
  KVGATE_TRY(y.read(n, "num_gpu_blocks", c.num_gpu_blocks, where));
  KVGATE_TRY(y.read(n, "block_size", c.block_size, where));
  KVGATE_TRY(y.read(n, "max_num_seqs", c.max_num_seqs, where));
  KVGATE_TRY(y.read(n, "max_num_batched_tokens", c.max_num_batched_tokens, where));
  KVGATE_TRY(y.read(n, "max_model_len", c.max_model_len, where));
  KVGATE_TRY(y.read(n, "enable_prefix_caching", c.enable_prefix_caching, where));
  KVGATE_TRY(y.read(n, "num_host_blocks", c.num_host_blocks, where));
  double host_gbps = c.host_bytes_per_s / 1e9;
  KVGATE_TRY(y.read(n, "host_gbps", host_gbps, where));
  if (!(host_gbps >= 0) || host_gbps > 1e6) {
    return y.error(n["host_gbps"], where + ".host_gbps", "expected 0 (the profile's) .. 1e6 GB/s");
  }
  c.host_bytes_per_s = host_gbps * 1e9;
  KVGATE_TRY(y.read(n, "num_disk_blocks", c.num_disk_blocks, where));
  double disk_gbps = c.disk_bytes_per_s / 1e9;
  KVGATE_TRY(y.read(n, "disk_gbps", disk_gbps, where));
  if (!(disk_gbps >= 0) || disk_gbps > 1e6) {
    return y.error(n["disk_gbps"], where + ".disk_gbps", "expected 0 (the profile's) .. 1e6 GB/s");
  }
  c.disk_bytes_per_s = disk_gbps * 1e9;
  std::string role;
  KVGATE_TRY(y.read(n, "role", role, where));
  if (!role.empty()) {
    auto r = route::parse_role(role);
    if (!r) return y.error(n["role"], where + ".role", "expected both, prefill or decode");
    g.role = *r;
    c.role = *r == route::Role::kPrefill  ? engine::Role::kPrefill
             : *r == route::Role::kDecode ? engine::Role::kDecode
                                          : engine::Role::kBoth;
  }
  KVGATE_TRY(y.read(n, "zone", g.zone, where));
  KVGATE_TRY(y.read(n, "rack", g.rack, where));
  return g;
}

Nanos millis(double ms) { return static_cast<Nanos>(ms * 1e6); }

// A policy's `lora:` section (PolicySpec::lora_aware, lora_placement).
Status parse_policy_lora(const YamlReader& y, const YAML::Node& l, const std::string& where,
                         PolicySpec& p) {
  KVGATE_TRY(y.expect_map(l, where, {"routing", "placement"}));
  std::string routing = "aware";
  KVGATE_TRY(y.read(l, "routing", routing, where));
  if (routing != "aware" && routing != "load_only") {
    return y.error(l["routing"], where + ".routing", "expected aware or load_only");
  }
  p.lora_aware = routing == "aware";
  const YAML::Node pl = l["placement"];
  if (!pl) return {};
  const std::string wp = where + ".placement";
  KVGATE_TRY(y.expect_map(
      pl, wp,
      {"enabled", "interval_ms", "idle_unload_ms", "replica_demand", "backoff_ms", "max_wait_ms"}));
  route::LoraPlacementConfig& c = p.lora_placement;
  c.enabled = true;  // the section turns it on unless it says otherwise
  KVGATE_TRY(y.read(pl, "enabled", c.enabled, wp));
  double interval = static_cast<double>(c.interval) / 1e6;
  double idle = static_cast<double>(c.idle_unload) / 1e6;
  double backoff = static_cast<double>(c.load_backoff) / 1e6;
  double wait = static_cast<double>(c.max_wait) / 1e6;
  KVGATE_TRY(y.read(pl, "interval_ms", interval, wp));
  KVGATE_TRY(y.read(pl, "idle_unload_ms", idle, wp));
  KVGATE_TRY(y.read(pl, "replica_demand", c.replica_demand, wp));
  KVGATE_TRY(y.read(pl, "backoff_ms", backoff, wp));
  KVGATE_TRY(y.read(pl, "max_wait_ms", wait, wp));
  c.interval = millis(interval);
  c.idle_unload = millis(idle);
  c.load_backoff = millis(backoff);
  c.max_wait = millis(wait);
  if (Status s = c.validate(); !s) return y.error(pl, wp, s.error());
  if (c.enabled && !p.lora_aware) {
    return y.error(pl, wp, "placement needs routing: aware (the router must know adapters)");
  }
  return {};
}

// The scenario's `adapters:` section (workload/adapters.h).
Status parse_adapters(const YamlReader& y, const YAML::Node& n, AdapterSpec& out) {
  const std::string where = "adapters";
  KVGATE_TRY(y.expect_map(n, where,
                          {"count", "popularity", "zipf_s", "base_share", "max_loras", "load_ms",
                           "step_cost", "max_replicas"}));
  KVGATE_TRY(y.read(n, "count", out.count, where));
  std::string popularity = "zipf";
  KVGATE_TRY(y.read(n, "popularity", popularity, where));
  if (popularity == "zipf") {
    out.popularity = AdapterSpec::Popularity::kZipf;
  } else if (popularity == "uniform") {
    out.popularity = AdapterSpec::Popularity::kUniform;
  } else {
    return y.error(n["popularity"], where + ".popularity", "expected zipf or uniform");
  }
  KVGATE_TRY(y.read(n, "zipf_s", out.zipf_s, where));
  KVGATE_TRY(y.read(n, "base_share", out.base_share, where));
  KVGATE_TRY(y.read(n, "max_loras", out.max_loras, where));
  double load_ms = static_cast<double>(out.load_time) / 1e6;
  KVGATE_TRY(y.read(n, "load_ms", load_ms, where));
  KVGATE_TRY(y.read(n, "step_cost", out.step_cost, where));
  KVGATE_TRY(y.read(n, "max_replicas", out.max_replicas, where));
  if (out.count > 100000 || !(out.zipf_s >= 0) || !(out.base_share >= 0) || out.base_share > 1 ||
      out.max_loras < 1 || out.max_loras > 1024 || !(load_ms >= 0) || !(out.step_cost >= 0) ||
      out.max_replicas < 1) {
    return y.error(n, where,
                   "need count <= 100000, zipf_s >= 0, 0 <= base_share <= 1, max_loras 1..1024, "
                   "load_ms >= 0, step_cost >= 0, max_replicas >= 1");
  }
  out.load_time = millis(load_ms);
  return {};
}

Result<PolicySpec> parse_policy(const YamlReader& y, const YAML::Node& n,
                                const std::string& where) {
  PolicySpec p;
  // The router's keys sit beside the simulator's own (name, approx, autoscale, oracle,
  // warmup, flow_control, tenants) and are read by the same reader as `kvgate serve`'s
  // `router:` section.
  if (!n.IsMap()) return y.error(n, where, "expected a mapping");
  if (!n["policy"]) return y.error(n, where + ".policy", "required");
  KVGATE_TRY(route::read_router_section(n, where, p.router,
                                        {"name", "approx", "autoscale", "oracle", "warmup",
                                         "flow_control", "tenants", "lora", "gateway_replicas"},
                                        y.file()));
  if (const YAML::Node f = n["flow_control"]) {
    KVGATE_TRY(parse_flow_control(f, where + ".flow_control", p.flow, y.file()));
  }
  if (const YAML::Node t = n["tenants"]) {
    if (!t.IsSequence()) return y.error(t, where + ".tenants", "expected a list of tenant names");
    for (const auto& name : t) p.tenants.push_back(name.as<std::string>(""));
  }
  KVGATE_TRY(y.read(n, "name", p.name, where));
  if (p.name.empty()) p.name = p.router.policy.name;
  if (const YAML::Node a = n["approx"]) {
    const std::string wa = where + ".approx";
    KVGATE_TRY(
        y.expect_map(a, wa, {"ttl_s", "capacity_pairs", "host_ttl_s", "host_capacity_pairs"}));
    double ttl = to_seconds(p.approx.ttl);
    KVGATE_TRY(y.read(a, "ttl_s", ttl, wa));
    p.approx.ttl = seconds(ttl);
    KVGATE_TRY(y.read(a, "capacity_pairs", p.approx.capacity_pairs, wa));
    // The host tier (kv/approx_index.h): absent or 0, none.
    double host_ttl = to_seconds(p.approx.host_ttl);
    KVGATE_TRY(y.read(a, "host_ttl_s", host_ttl, wa));
    if (!(host_ttl >= 0 && host_ttl <= 1e6)) {
      return y.error(a["host_ttl_s"], wa + ".host_ttl_s", "expected seconds in [0, 1e6]");
    }
    p.approx.host_ttl = seconds(host_ttl);
    KVGATE_TRY(y.read(a, "host_capacity_pairs", p.approx.host_capacity_pairs, wa));
  }
  if (const YAML::Node a = n["autoscale"]) {
    auto c = scale::parse_autoscale_node(a, where + ".autoscale", {}, y.file());
    if (!c) return Error(c.error());
    p.autoscale = std::move(*c);
  }
  if (const YAML::Node o = n["oracle"]) {
    const std::string wo = where + ".oracle";
    KVGATE_TRY(y.expect_map(
        o, wo, {"qps_per_replica", "min_replicas", "max_replicas", "gpus_per_replica"}));
    OracleSpec spec;
    KVGATE_TRY(y.read(o, "qps_per_replica", spec.qps_per_replica, wo));
    KVGATE_TRY(y.read(o, "min_replicas", spec.min_replicas, wo));
    KVGATE_TRY(y.read(o, "max_replicas", spec.max_replicas, wo));
    KVGATE_TRY(y.read(o, "gpus_per_replica", spec.gpus_per_replica, wo));
    if (spec.qps_per_replica <= 0 || spec.min_replicas < 0 || spec.gpus_per_replica < 1 ||
        spec.max_replicas < spec.min_replicas) {
      return y.error(o, wo, "need qps_per_replica > 0 and 0 <= min_replicas <= max_replicas");
    }
    if (p.autoscale) return y.error(n, where, "autoscale and oracle are exclusive");
    p.oracle = spec;
  }
  if (const YAML::Node l = n["lora"]) {
    KVGATE_TRY(parse_policy_lora(y, l, where + ".lora", p));
  }
  if (const YAML::Node g = n["gateway_replicas"]) {
    const std::string wg = where + ".gateway_replicas";
    KVGATE_TRY(y.expect_map(g, wg, {"count", "sync", "lag_ms", "fleet_fairness"}));
    GatewayReplicasSpec spec;
    double lag_ms = 0;
    KVGATE_TRY(y.read(g, "count", spec.count, wg));
    KVGATE_TRY(y.read(g, "sync", spec.sync, wg));
    KVGATE_TRY(y.read(g, "lag_ms", lag_ms, wg));
    KVGATE_TRY(y.read(g, "fleet_fairness", spec.fleet_fairness, wg));
    if (spec.count < 1 || spec.count > 64 || !(lag_ms >= 0) || lag_ms > 600000) {
      return y.error(g, wg, "need count 1..64 and 0 <= lag_ms <= 600000");
    }
    spec.lag = millis(lag_ms);
    p.gateway_replicas = spec;
  }
  if (const YAML::Node w = n["warmup"]) {
    const std::string ww = where + ".warmup";
    KVGATE_TRY(y.expect_map(w, ww, {"enabled", "prefixes", "budget_s", "concurrency"}));
    p.warmup.enabled = true;
    KVGATE_TRY(y.read(w, "enabled", p.warmup.enabled, ww));
    KVGATE_TRY(y.read(w, "prefixes", p.warmup.prefixes, ww));
    double budget = to_seconds(p.warmup.budget);
    KVGATE_TRY(y.read(w, "budget_s", budget, ww));
    p.warmup.budget = seconds(budget);
    KVGATE_TRY(y.read(w, "concurrency", p.warmup.concurrency, ww));
    if (budget < 0 || p.warmup.concurrency < 1) {
      return y.error(w, ww, "need budget_s >= 0 and concurrency >= 1");
    }
  }
  return p;
}

Status parse_scaling(const YamlReader& y, const YAML::Node& n, ScalingSpec& out) {
  const std::string where = "scaling";
  KVGATE_TRY(y.expect_map(n, where,
                          {"control_interval_s", "signal_window_s", "startup", "startup_s", "slo",
                           "new_replica_window_s"}));
  double control = to_seconds(out.control_interval), window = to_seconds(out.signal_window);
  double fixed = 0;
  std::string mode = std::string(engine::startup_mode_name(out.startup));
  KVGATE_TRY(y.read(n, "control_interval_s", control, where));
  KVGATE_TRY(y.read(n, "signal_window_s", window, where));
  KVGATE_TRY(y.read(n, "startup_s", fixed, where));
  KVGATE_TRY(y.read(n, "startup", mode, where));
  auto m = engine::parse_startup_mode(mode);
  if (!m) return y.error(n["startup"], where + ".startup", "expected none, cold or caches-kept");
  if (control <= 0 || window <= 0 || fixed < 0) {
    return y.error(n, where, "need control_interval_s > 0, signal_window_s > 0, startup_s >= 0");
  }
  out.control_interval = seconds(control);
  out.signal_window = seconds(window);
  out.startup = *m;
  out.startup_fixed = seconds(fixed);
  double new_window = to_seconds(out.new_replica_window);
  KVGATE_TRY(y.read(n, "new_replica_window_s", new_window, where));
  if (new_window <= 0) {
    return y.error(n["new_replica_window_s"], where + ".new_replica_window_s", "must be > 0");
  }
  out.new_replica_window = seconds(new_window);
  if (const YAML::Node slo = n["slo"]) {
    KVGATE_TRY(y.expect_map(slo, where + ".slo", {"ttft_s", "itl_s"}));
    KVGATE_TRY(y.read(slo, "ttft_s", out.slo.ttft_s, where + ".slo"));
    KVGATE_TRY(y.read(slo, "itl_s", out.slo.itl_s, where + ".slo"));
    if (out.slo.ttft_s <= 0 || out.slo.itl_s <= 0) {
      return y.error(slo, where + ".slo", "targets must be > 0");
    }
  }
  return {};
}

// The gateway's `retries:`, `circuit_breaker:` and `migration:`, with the key names and
// bounds of `kvgate serve`'s config (gateway/common/config.cc).
Status parse_failure_rules(const YamlReader& y, const YAML::Node& gw, GatewaySpec& out) {
  if (const YAML::Node r = gw["retries"]) {
    KVGATE_TRY(y.expect_map(r, "gateway.retries", {"max_attempts"}));
    KVGATE_TRY(y.read(r, "max_attempts", out.retries.max_attempts, "gateway.retries"));
    if (out.retries.max_attempts < 1 || out.retries.max_attempts > 16) {
      return y.error(r["max_attempts"], "gateway.retries.max_attempts", "must be 1..16");
    }
  }
  if (const YAML::Node b = gw["circuit_breaker"]) {
    const std::string where = "gateway.circuit_breaker";
    KVGATE_TRY(y.expect_map(b, where, {"failures", "open_ms"}));
    KVGATE_TRY(y.read(b, "failures", out.breaker.failures, where));
    if (out.breaker.failures < 1 || out.breaker.failures > 1000) {
      return y.error(b["failures"], where + ".failures", "must be 1..1000");
    }
    double open_ms = to_seconds(out.breaker.open_for) * 1e3;
    KVGATE_TRY(y.read(b, "open_ms", open_ms, where));
    if (open_ms < 1) return y.error(b["open_ms"], where + ".open_ms", "must be >= 1");
    out.breaker.open_for = millis(open_ms);
  }
  if (const YAML::Node m = gw["migration"]) {
    KVGATE_TRY(y.expect_map(m, "gateway.migration", {"max_migrations"}));
    out.max_migrations = 2;  // `migration: {}` turns it on with the gateway's default
    KVGATE_TRY(y.read(m, "max_migrations", out.max_migrations, "gateway.migration"));
    if (out.max_migrations < 0 || out.max_migrations > 16) {
      return y.error(m["max_migrations"], "gateway.migration.max_migrations", "must be 0..16");
    }
  }
  return {};
}

// `endpoint:` of a failure: an engine index, or the simulator's name for it
// ("engine-3"), below `engines`.
Result<uint32_t> parse_failed_engine(const YamlReader& y, const YAML::Node& n,
                                     const std::string& where, uint32_t engines) {
  const YAML::Node v = n["endpoint"];
  if (!v || v.IsNull()) return y.error(n, where + ".endpoint", "required");
  std::string name;
  KVGATE_TRY(y.read(n, "endpoint", name, where));
  std::string_view digits = name;
  if (digits.starts_with("engine-")) digits.remove_prefix(7);
  const bool numeric =
      !digits.empty() && digits.size() <= 9 &&
      std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  const uint32_t index = numeric ? static_cast<uint32_t>(std::stoul(std::string(digits))) : 0;
  if (!numeric || index >= engines) {
    return y.error(v, where + ".endpoint",
                   "expected an engine index below " + std::to_string(engines) +
                       " or its name, engine-0 .. engine-" +
                       std::to_string(engines > 0 ? engines - 1 : 0));
  }
  return index;
}

Status parse_failures(const YamlReader& y, const YAML::Node& n, uint32_t engines,
                      std::vector<FailureSpec>& out) {
  if (!n.IsSequence()) return y.error(n, "failures", "expected a list");
  for (size_t i = 0; i < n.size(); ++i) {
    const YAML::Node f = n[i];
    const std::string where = "failures[" + std::to_string(i) + "]";
    KVGATE_TRY(
        y.expect_map(f, where, {"endpoint", "at", "kind", "duration", "factor", "error_rate"}));
    FailureSpec spec;
    auto engine = parse_failed_engine(y, f, where, engines);
    if (!engine) return Error(engine.error());
    spec.engine = *engine;
    std::string kind;
    KVGATE_TRY(y.read(f, "kind", kind, where));
    if (kind == "fail_stop") {
      spec.kind = FailureSpec::Kind::kFailStop;
    } else if (kind == "slow") {
      spec.kind = FailureSpec::Kind::kSlow;
    } else if (kind == "erroring") {
      spec.kind = FailureSpec::Kind::kErroring;
    } else {
      return y.error(f["kind"] ? f["kind"] : f, where + ".kind",
                     kind.empty() ? "required: fail_stop, slow or erroring"
                                  : "expected fail_stop, slow or erroring");
    }
    if (!f["at"]) return y.error(f, where + ".at", "required (seconds)");
    double at = 0;
    KVGATE_TRY(y.read(f, "at", at, where));
    if (at < 0) return y.error(f["at"], where + ".at", "must be >= 0");
    spec.at = seconds(at);
    if (f["duration"]) {
      double duration = 0;
      KVGATE_TRY(y.read(f, "duration", duration, where));
      if (duration <= 0) return y.error(f["duration"], where + ".duration", "must be > 0");
      spec.duration = seconds(duration);
    }
    if (f["factor"]) {
      if (spec.kind != FailureSpec::Kind::kSlow) {
        return y.error(f["factor"], where + ".factor", "only for kind slow");
      }
      KVGATE_TRY(y.read(f, "factor", spec.factor, where));
      if (spec.factor <= 0) return y.error(f["factor"], where + ".factor", "must be > 0");
    } else if (spec.kind == FailureSpec::Kind::kSlow) {
      return y.error(f, where + ".factor", "required for kind slow (step-time multiplier)");
    }
    if (f["error_rate"]) {
      if (spec.kind != FailureSpec::Kind::kErroring) {
        return y.error(f["error_rate"], where + ".error_rate", "only for kind erroring");
      }
      KVGATE_TRY(y.read(f, "error_rate", spec.error_rate, where));
      if (spec.error_rate < 0 || spec.error_rate > 1) {
        return y.error(f["error_rate"], where + ".error_rate", "must be 0..1");
      }
    }
    out.push_back(spec);
  }
  return {};
}

Result<Scenario> parse_root(const YamlReader& y, const YAML::Node& root,
                            const std::string& base_dir, const ReadFile& read_file) {
  if (!root.IsMap()) return y.error(root, "scenario", "expected a YAML map");
  Scenario s;
  KVGATE_TRY(
      y.expect_map(root, "scenario",
                   {"name", "description", "seed", "cluster", "gateway", "policies", "workload",
                    "max_time_s", "scaling", "autoscale", "failures", "adapters"}));
  KVGATE_TRY(y.read(root, "name", s.name, "scenario"));
  KVGATE_TRY(y.read(root, "seed", s.seed, "scenario"));
  double max_time = 0;
  KVGATE_TRY(y.read(root, "max_time_s", max_time, "scenario"));
  s.max_time = seconds(max_time);

  const YAML::Node cluster = root["cluster"];
  if (!cluster || !cluster.IsMap()) return y.error(cluster ? cluster : root, "cluster", "missing");
  if (const YAML::Node groups = cluster["groups"]) {
    if (!groups.IsSequence() || groups.size() == 0) {
      return y.error(groups, "cluster.groups", "expected a list");
    }
    for (size_t i = 0; i < groups.size(); ++i) {
      auto g = parse_group(y, groups[i], "cluster.groups[" + std::to_string(i) + "]", base_dir,
                           read_file, nullptr);
      if (!g) return Error(g.error());
      s.engines.push_back(std::move(*g));
    }
  } else {
    auto g = parse_group(y, cluster, "cluster", base_dir, read_file, nullptr);
    if (!g) return Error(g.error());
    s.engines.push_back(std::move(*g));
  }
  // Zero engines only for a pool that scales from zero (checked below).
  if (s.engine_count() > 100000) return y.error(cluster, "cluster", "at most 100000 engines");

  if (const YAML::Node gw = root["gateway"]) {
    KVGATE_TRY(y.expect_map(gw, "gateway",
                            {"model", "hop_delay_ms", "scrape_interval_ms", "kv_event_delay_ms",
                             "kv_transfer_ms_per_1k_tokens", "decode_reject_kv_usage", "retries",
                             "circuit_breaker", "migration"}));
    KVGATE_TRY(y.read(gw, "model", s.gateway.model, "gateway"));
    double hop = 1, scrape = 100, kv = 10;
    KVGATE_TRY(y.read(gw, "hop_delay_ms", hop, "gateway"));
    KVGATE_TRY(y.read(gw, "scrape_interval_ms", scrape, "gateway"));
    KVGATE_TRY(y.read(gw, "kv_event_delay_ms", kv, "gateway"));
    if (hop < 0 || scrape <= 0 || kv < 0) {
      return y.error(gw, "gateway", "delays must be >= 0 and scrape_interval_ms > 0");
    }
    s.gateway.hop_delay = millis(hop);
    s.gateway.scrape_interval = millis(scrape);
    s.gateway.kv_event_delay = millis(kv);
    double transfer = 5;
    KVGATE_TRY(y.read(gw, "kv_transfer_ms_per_1k_tokens", transfer, "gateway"));
    KVGATE_TRY(y.read(gw, "decode_reject_kv_usage", s.gateway.decode_reject_kv_usage, "gateway"));
    if (transfer < 0 || s.gateway.decode_reject_kv_usage < 0 ||
        s.gateway.decode_reject_kv_usage > 1) {
      return y.error(gw, "gateway",
                     "kv_transfer_ms_per_1k_tokens >= 0, 0 <= decode_reject_kv_usage <= 1");
    }
    s.gateway.kv_transfer_per_1k_tokens = millis(transfer);
    KVGATE_TRY(parse_failure_rules(y, gw, s.gateway));
  }

  const YAML::Node policies = root["policies"];
  if (!policies || !policies.IsSequence() || policies.size() == 0) {
    return y.error(policies ? policies : root, "policies", "expected a non-empty list");
  }
  std::set<std::string> names;
  for (size_t i = 0; i < policies.size(); ++i) {
    auto p = parse_policy(y, policies[i], "policies[" + std::to_string(i) + "]");
    if (!p) return Error(p.error());
    if (!names.insert(p->name).second) {
      return y.error(policies[i], "policies", "duplicate name \"" + p->name + "\"");
    }
    s.policies.push_back(std::move(*p));
  }

  auto w = workload::parse_workload(root["workload"], base_dir, y.file());
  if (!w) return Error(w.error());
  s.workload = std::move(*w);

  if (const YAML::Node a = root["autoscale"]) {
    auto c = scale::parse_autoscale_node(a, "autoscale", {}, y.file());
    if (!c) return Error(c.error());
    s.autoscale = std::move(*c);
  }
  if (const YAML::Node sc = root["scaling"]) {
    KVGATE_TRY(parse_scaling(y, sc, s.scaling));
  }
  if (const YAML::Node f = root["failures"]) {
    KVGATE_TRY(parse_failures(y, f, s.engine_count(), s.failures));
  }
  if (const YAML::Node a = root["adapters"]) {
    KVGATE_TRY(parse_adapters(y, a, s.adapters));
  }
  const bool scaled = std::any_of(s.policies.begin(), s.policies.end(), [&](const PolicySpec& p) {
    return p.oracle || p.autoscale || s.autoscale;
  });
  if (s.engine_count() == 0 && !scaled) return y.error(cluster, "cluster", "no engines");
  if (scaled && s.engines.size() != 1) {
    return y.error(cluster, "autoscale",
                   "the simulator scales one engine group (cluster without groups)");
  }
  for (size_t i = 0; i < s.policies.size(); ++i) {
    const PolicySpec& p = s.policies[i];
    if (p.oracle && s.workload.arrivals.kind != workload::ArrivalSpec::Kind::kDiurnal) {
      return y.error(policies[i], "policy " + p.name,
                     "an oracle needs diurnal arrivals (a known curve)");
    }
  }
  return s;
}

}  // namespace

Result<Scenario> parse_scenario(const std::string& yaml_text, const std::string& base_dir,
                                const ReadFile& read_file, std::string_view file) {
  const YamlReader y(file);
  try {
    return parse_root(y, YAML::Load(yaml_text), base_dir, read_file);
  } catch (const YAML::Exception& e) {
    return y.error(e);
  }
}

Result<Scenario> load_scenario(const std::string& path, const ReadFile& read_file) {
  auto text = read_file(path);
  if (!text) return Error(text.error());
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  auto s = parse_scenario(*text, dir, read_file, path);
  if (!s) return Error(s.error());
  if (s->name.empty()) s->name = path.substr(slash == std::string::npos ? 0 : slash + 1);
  return s;
}

}  // namespace kvgate::workload
