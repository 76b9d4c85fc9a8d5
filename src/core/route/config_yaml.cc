#include "core/route/config_yaml.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/common/yaml_reader.h"
#include "core/scale/config_yaml.h"

namespace kvgate::route {
namespace {

using Params = std::vector<std::pair<std::string, std::string>>;

Status read_text(const YamlReader& y, const YAML::Node& v, const std::string& field,
                 std::string& out) {
  if (!v.IsScalar() || v.Scalar().empty()) return y.error(v, field, "expected a name");
  out = v.Scalar();
  return {};
}

Status read_number(const YamlReader& y, const YAML::Node& v, const std::string& field,
                   double& out) {
  double x = 0;
  if (!v.IsScalar() || !YAML::convert<double>::decode(v, x) || !std::isfinite(x)) {
    return y.error(v, field, "expected a number");
  }
  out = x;
  return {};
}

Status read_count(const YamlReader& y, const YAML::Node& v, const std::string& field,
                  uint32_t& out) {
  double x = 0;
  if (!v.IsScalar() || !YAML::convert<double>::decode(v, x) || !(x >= 0 && x <= 4e9) ||
      x != std::floor(x)) {
    return y.error(v, field, "expected a whole number");
  }
  out = static_cast<uint32_t>(x);
  return {};
}

Status read_bool(const YamlReader& y, const YAML::Node& v, const std::string& field, bool& out) {
  bool b = false;
  if (!v.IsScalar() || !YAML::convert<bool>::decode(v, b)) {
    return y.error(v, field, "expected true or false");
  }
  out = b;
  return {};
}

Status read_duration(const YamlReader& y, const YAML::Node& v, const std::string& field,
                     Nanos& out) {
  if (!v.IsScalar()) return y.error(v, field, "expected a duration (e.g. 500ms, 5s)");
  Result<Nanos> d = scale::parse_duration(v.Scalar());
  if (!d) return y.error(v, field, d.error());
  if (*d < 0) return y.error(v, field, "must be >= 0");
  out = *d;
  return {};
}

// One parameter of a policy or filter; a null value removes it (back to its default).
Status set_param(const YamlReader& y, const YAML::Node& v, const std::string& field,
                 const std::string& key, Params& params) {
  std::erase_if(params, [&](const auto& p) { return p.first == key; });
  if (v.IsNull()) return {};
  if (!v.IsScalar()) return y.error(v, field, "expected a value");
  params.emplace_back(key, v.Scalar());
  return {};
}

Status read_params(const YamlReader& y, const YAML::Node& v, const std::string& field,
                   Params& params) {
  if (!v.IsMap()) return y.error(v, field, "expected a mapping of parameter to value");
  for (const auto& kv : v) {
    const std::string key = kv.first.Scalar();
    KVGATE_TRY(set_param(y, kv.second, field + "." + key, key, params));
  }
  return {};
}

Status read_filters(const YamlReader& y, const YAML::Node& v, const std::string& field,
                    std::vector<PolicyConfig>& out) {
  if (!v.IsSequence()) return y.error(v, field, "expected a list of filter names");
  std::vector<PolicyConfig> filters;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string ff = field + "[" + std::to_string(i) + "]";
    const YAML::Node f = v[i];
    PolicyConfig pc;
    if (f.IsScalar()) {
      KVGATE_TRY(read_text(y, f, ff, pc.name));
    } else {
      KVGATE_TRY(y.expect_map(f, ff, {"name", "params"}));
      if (!f["name"]) return y.error(f, ff + ".name", "missing");
      KVGATE_TRY(read_text(y, f["name"], ff + ".name", pc.name));
      if (const YAML::Node p = f["params"])
        KVGATE_TRY(read_params(y, p, ff + ".params", pc.params));
    }
    filters.push_back(std::move(pc));
  }
  out = std::move(filters);
  return {};
}

// A key of one of the nested sections (`saturation`, `pd`, `early_reject`,
// `session_affinity`, `latency_targets`, `params`).
Status read_nested(const YamlReader& y, std::string_view section, const std::string& key,
                   const YAML::Node& v, const std::string& field, RouterConfig& c) {
  if (section == "params") return set_param(y, v, field, key, c.policy.params);
  if (section == "saturation") {
    SaturationConfig& s = c.saturation;
    if (key == "queue_threshold") return read_number(y, v, field, s.queue_threshold);
    if (key == "kv_threshold") return read_number(y, v, field, s.kv_threshold);
    if (key == "critical_max_waiting") return read_count(y, v, field, s.critical_max_waiting);
    if (key == "shed") return read_bool(y, v, field, s.shed);
    if (key == "metrics_max_age") return read_duration(y, v, field, s.metrics_max_age);
  } else if (section == "pd") {
    if (key == "mode") {
      if (!v.IsScalar()) return y.error(v, field, "expected auto, off or on");
      auto m = parse_pd_mode(v.Scalar());
      if (!m) return y.error(v, field, "expected auto, off or on");
      c.pd.mode = *m;
      return {};
    }
    if (key == "locality_weight") return read_number(y, v, field, c.pd.locality_weight);
    if (key == "local_prefill_max_tokens") {
      return read_count(y, v, field, c.pd.local_prefill_max_tokens);
    }
  } else if (section == "early_reject") {
    EarlyRejectConfig& e = c.early_reject;
    if (key == "enabled") return read_bool(y, v, field, e.enabled);
    if (key == "max_usage") return read_number(y, v, field, e.max_usage);
    if (key == "decode_seconds_per_token") {
      return read_number(y, v, field, e.decode_seconds_per_token);
    }
    if (key == "predict") return read_bool(y, v, field, e.predict);
  } else if (section == "session_affinity") {
    SessionAffinityConfig& a = c.session_affinity;
    if (key == "enabled") return read_bool(y, v, field, a.enabled);
    if (key == "header") return read_text(y, v, field, a.header);
    if (key == "capacity") return read_count(y, v, field, a.capacity);
    if (key == "idle_ttl") return read_duration(y, v, field, a.idle_ttl);
    if (key == "max_extra_requests") return read_number(y, v, field, a.max_extra_requests);
    if (key == "max_load_ratio") return read_number(y, v, field, a.max_load_ratio);
  } else if (section == "latency_targets") {
    LatencyTargetsConfig& t = c.latency_targets;
    if (key == "enabled") return read_bool(y, v, field, t.enabled);
    if (key == "headroom") return read_number(y, v, field, t.headroom);
    if (key == "action") {
      auto a = v.IsScalar() ? parse_slo_action(v.Scalar()) : std::nullopt;
      if (!a) return y.error(v, field, "expected queue, reject or best_effort");
      t.action = *a;
      return {};
    }
    if (key == "forgetting") return read_number(y, v, field, t.predictor.forgetting);
    if (key == "min_samples") return read_count(y, v, field, t.predictor.min_samples);
    if (key == "prior_prefill_tokens_per_second") {
      return read_number(y, v, field, t.predictor.prior_prefill_tokens_per_second);
    }
    if (key == "prior_tpot") return read_duration(y, v, field, t.predictor.prior_tpot);
  }
  return y.error(v, field, "unknown field");
}

std::string join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

bool is_section(std::string_view key) {
  return key == "params" || key == "saturation" || key == "pd" || key == "early_reject" ||
         key == "session_affinity" || key == "latency_targets";
}

}  // namespace

Status read_router_section(const YAML::Node& section, const std::string& path, RouterConfig& c,
                           std::initializer_list<std::string_view> shell_keys,
                           std::string_view file) {
  const YamlReader y(file);
  if (!section.IsMap())
    return y.error(section, path.empty() ? "router" : path, "expected a mapping");
  // The policy first: a different policy starts from its own defaults, whatever the
  // order of the keys.
  if (const YAML::Node p = section["policy"]) {
    std::string name;
    KVGATE_TRY(read_text(y, p, join(path, "policy"), name));
    if (name != c.policy.name) c.policy = {std::move(name), {}};
  }
  for (const auto& kv : section) {
    const std::string key = kv.first.Scalar();
    const YAML::Node& v = kv.second;
    const std::string field = join(path, key);
    bool shell = false;
    for (std::string_view k : shell_keys) shell = shell || k == key;
    if (shell || key == "policy") continue;
    if (size_t dot = key.find('.'); dot != std::string::npos) {
      std::string head = key.substr(0, dot);
      if (head == "policy") head = "params";  // `policy.overlap_weight: 2`
      if (!is_section(head)) return y.error(kv.first, field, "unknown field");
      // Naming a session_affinity key turns it on (unless that key is `enabled: false`).
      if (head == "session_affinity") c.session_affinity.enabled = true;
      KVGATE_TRY(read_nested(y, head, key.substr(dot + 1), v, field, c));
    } else if (key == "session_affinity" && v.IsScalar()) {
      // `session_affinity: true` (the defaults) or `false`.
      KVGATE_TRY(read_bool(y, v, field, c.session_affinity.enabled));
    } else if (is_section(key)) {
      if (!v.IsMap()) return y.error(v, field, "expected a mapping");
      // The section turns session affinity on (unless it says `enabled: false`).
      if (key == "session_affinity") c.session_affinity.enabled = true;
      for (const auto& sub : v) {
        const std::string sk = sub.first.Scalar();
        KVGATE_TRY(read_nested(y, key, sk, sub.second, field + "." + sk, c));
      }
    } else if (key == "filters") {
      KVGATE_TRY(read_filters(y, v, field, c.filters));
    } else if (key == "overlap") {
      auto o = v.IsScalar() ? parse_overlap_source(v.Scalar()) : std::nullopt;
      if (!o) return y.error(v, field, "expected none, precise, approx or both");
      c.overlap_source = *o;
    } else if (key == "record_decisions") {
      KVGATE_TRY(read_bool(y, v, field, c.record_decisions));
    } else if (key == "prefill_tokens_per_second") {
      KVGATE_TRY(read_number(y, v, field, c.prefill_tokens_per_second));
    } else {
      return y.error(kv.first, field, "unknown field");
    }
  }
  if (Status s = c.validate(); !s) {
    std::string_view what = s.error();
    if (what.starts_with("router: ")) what.remove_prefix(8);
    return y.error(section, path.empty() ? "router" : path, what);
  }
  return {};
}

}  // namespace kvgate::route
