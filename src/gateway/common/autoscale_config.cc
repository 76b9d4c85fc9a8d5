#include "gateway/common/autoscale_config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <charconv>

#include "core/common/yaml_reader.h"
#include "core/scale/config_yaml.h"
#include "core/scale/config_yaml_node.h"

namespace kvgate::gateway {
namespace {

Result<std::string> text(const YamlReader& y, const YAML::Node& n, const std::string& field) {
  if (!n.IsScalar()) return y.error(n, field, "expected a string");
  return n.Scalar();
}

// A duration ("1s", "250ms", a number of seconds) as milliseconds within [lo, hi].
Result<std::chrono::milliseconds> millis(const YamlReader& y, const YAML::Node& n,
                                         const std::string& field, std::chrono::milliseconds lo,
                                         std::chrono::milliseconds hi) {
  if (!n.IsScalar()) return y.error(n, field, "expected a duration");
  Result<Nanos> d = scale::parse_duration(n.Scalar());
  if (!d) return y.error(n, field, d.error());
  auto ms = std::chrono::milliseconds(*d / kMillisecond);
  if (ms < lo || ms > hi) {
    return y.error(n, field,
                   fmt::format("{} ms is outside [{}, {}] ms", ms.count(), lo.count(), hi.count()));
  }
  return ms;
}

Status local_section(const YamlReader& y, const YAML::Node& n, const std::string& path,
                     LocalReplicaConfig& c) {
  using std::chrono::milliseconds;
  if (Status s = y.expect_map(n, path,
                              {"kind", "command", "host", "health_path", "startup_timeout",
                               "drain_timeout", "stop_grace", "restart_crashed", "log_output"});
      !s) {
    return s;
  }
  const YAML::Node cmd = n["command"];
  if (!cmd) return y.error(n, path + ".command", "missing (the replica's command line)");
  if (cmd.IsSequence()) {
    for (size_t i = 0; i < cmd.size(); ++i) {
      auto a = text(y, cmd[i], fmt::format("{}.command[{}]", path, i));
      if (!a) return Error(a.error());
      c.command.push_back(std::move(*a));
    }
  } else {
    auto line = text(y, cmd, path + ".command");
    if (!line) return Error(line.error());
    auto argv = split_command(*line);
    if (!argv) return y.error(cmd, path + ".command", argv.error());
    c.command = std::move(*argv);
  }
  if (c.command.empty()) return y.error(cmd, path + ".command", "empty");
  bool has_port = false;
  for (const std::string& a : c.command) has_port = has_port || a.find("{port}") != a.npos;
  if (!has_port) {
    return y.error(cmd, path + ".command",
                   "must contain {port} (the port the replica listens on, picked by kvgate)");
  }
  if (const YAML::Node v = n["host"]) {
    auto h = text(y, v, path + ".host");
    if (!h) return Error(h.error());
    if (h->empty()) return y.error(v, path + ".host", "empty");
    c.host = *h;
  }
  if (const YAML::Node v = n["health_path"]) {
    auto h = text(y, v, path + ".health_path");
    if (!h) return Error(h.error());
    if (!h->starts_with("/")) return y.error(v, path + ".health_path", "must start with /");
    c.health_path = *h;
  }
  struct Timeout {
    const char* key;
    milliseconds* out;
  };
  for (Timeout t :
       {Timeout{"startup_timeout", &c.startup_timeout}, Timeout{"drain_timeout", &c.drain_timeout},
        Timeout{"stop_grace", &c.stop_grace}}) {
    if (const YAML::Node v = n[t.key]) {
      auto ms = millis(y, v, path + "." + t.key, milliseconds(0), std::chrono::hours(24));
      if (!ms) return Error(ms.error());
      *t.out = *ms;
    }
  }
  for (auto [key, out] :
       {std::pair{"restart_crashed", &c.restart_crashed}, std::pair{"log_output", &c.log_output}}) {
    if (const YAML::Node v = n[key]) {
      bool b = false;
      if (!v.IsScalar() || !YAML::convert<bool>::decode(v, b)) {
        return y.error(v, path + "." + key, "expected true or false");
      }
      *out = b;
    }
  }
  return {};
}

Status kubernetes_section(const YamlReader& y, const YAML::Node& n, const std::string& path,
                          KubernetesReplicaConfig& c) {
  if (Status s = y.expect_map(
          n, path, {"kind", "namespace", "deployment", "statefulset", "api_server", "kubeconfig"});
      !s) {
    return s;
  }
  const YAML::Node d = n["deployment"];
  const YAML::Node ss = n["statefulset"];
  if (bool(d) == bool(ss)) {
    return y.error(n, path, "name exactly one of deployment: NAME or statefulset: NAME");
  }
  auto name = text(y, d ? d : ss, path + (d ? ".deployment" : ".statefulset"));
  if (!name) return Error(name.error());
  if (name->empty()) return y.error(d ? d : ss, path, "empty name");
  c.target.name = *name;
  c.target.kind = d ? io::KubeKind::kDeployment : io::KubeKind::kStatefulSet;
  if (const YAML::Node v = n["namespace"]) {
    auto ns = text(y, v, path + ".namespace");
    if (!ns) return Error(ns.error());
    c.target.ns = *ns;
  }
  if (const YAML::Node v = n["api_server"]) {
    auto a = text(y, v, path + ".api_server");
    if (!a) return Error(a.error());
    if (!a->starts_with("http://")) {
      return y.error(v, path + ".api_server", "expected http://host:port (a kubectl proxy)");
    }
    c.api_server = *a;
  }
  if (const YAML::Node v = n["kubeconfig"]) {
    if (n["api_server"]) {
      return y.error(v, path + ".kubeconfig", "give api_server or kubeconfig, not both");
    }
    auto k = text(y, v, path + ".kubeconfig");
    if (!k) return Error(k.error());
    if (k->empty()) return y.error(v, path + ".kubeconfig", "empty path");
    c.kubeconfig = *k;
  }
  return {};
}

}  // namespace

std::string_view actuator_name(ActuatorKind kind) {
  switch (kind) {
    case ActuatorKind::kNone:
      return "none";
    case ActuatorKind::kLocal:
      return "local";
    case ActuatorKind::kKubernetes:
      return "kubernetes";
  }
  return "none";
}

Result<std::vector<std::string>> split_command(std::string_view command) {
  std::vector<std::string> out;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (char ch : command) {
    if (quote) {
      if (ch == quote) {
        quote = 0;
      } else {
        word += ch;
      }
    } else if (ch == '\'' || ch == '"') {
      quote = ch;
      in_word = true;
    } else if (ch == ' ' || ch == '\t' || ch == '\n') {
      if (in_word) out.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else {
      word += ch;
      in_word = true;
    }
  }
  if (quote) return Error(fmt::format("unterminated {} quote", quote));
  if (in_word) out.push_back(std::move(word));
  return out;
}

Result<PoolAutoscaleConfig> parse_pool_autoscale(const YAML::Node& section, const std::string& path,
                                                 std::string_view file) {
  const YamlReader y(file);
  try {
    if (!section.IsMap()) return y.error(section, path, "expected a mapping");
    PoolAutoscaleConfig c;
    // The core parses the policy part and skips our keys (the same nodes: its errors
    // have the file's lines).
    auto parsed =
        scale::parse_autoscale_node(section, path, {"actuator", "interval", "window"}, file);
    if (!parsed) return Error(parsed.error());
    c.policy = std::move(*parsed);
    if (const YAML::Node v = section["interval"]) {
      auto ms =
          millis(y, v, path + ".interval", std::chrono::milliseconds(50), std::chrono::hours(1));
      if (!ms) return Error(ms.error());
      c.interval = *ms;
    }
    if (const YAML::Node v = section["window"]) {
      auto ms =
          millis(y, v, path + ".window", std::chrono::milliseconds(100), std::chrono::hours(24));
      if (!ms) return Error(ms.error());
      c.window = ms->count() * kMillisecond;
    }
    if (const YAML::Node a = section["actuator"]) {
      const std::string at = path + ".actuator";
      if (!a.IsMap()) return y.error(a, at, "expected a mapping");
      if (!a["kind"]) return y.error(a, at + ".kind", "missing (local, kubernetes or none)");
      auto kind = text(y, a["kind"], at + ".kind");
      if (!kind) return Error(kind.error());
      if (*kind == "local") {
        c.actuator = ActuatorKind::kLocal;
        if (Status s = local_section(y, a, at, c.local); !s) return Error(s.error());
      } else if (*kind == "kubernetes") {
        c.actuator = ActuatorKind::kKubernetes;
        if (Status s = kubernetes_section(y, a, at, c.kubernetes); !s) return Error(s.error());
      } else if (*kind == "none") {
        c.actuator = ActuatorKind::kNone;
        if (Status s = y.expect_map(a, at, {"kind"}); !s) return Error(s.error());
      } else {
        return y.error(a["kind"], at + ".kind",
                       fmt::format("expected local, kubernetes or none, got '{}'", *kind));
      }
    }
    return c;
  } catch (const YAML::Exception& e) {
    return y.error(e, path);
  }
}

}  // namespace kvgate::gateway
