#include "discovery/discovery_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <functional>
#include <set>

#include "core/common/yaml_reader.h"
#include "discovery/endpoint_list.h"

namespace kvgate::discovery {
namespace {

constexpr int64_t kDay = 24LL * 3600 * 1000;

// A duration in whole milliseconds, within [lo, hi].
milliseconds millis(const YamlReader& y, const YAML::Node& n, std::string_view field, int64_t lo,
                    int64_t hi) {
  return milliseconds(y.integer(n, field, lo, hi));
}

EndpointTemplate endpoint_template(const YamlReader& y, const YAML::Node& n,
                                   const std::string& field) {
  y.only_keys(n, field, {"role", "zone", "rack", "labels", "kv_events_port", "kv_replay_port"});
  EndpointTemplate t;
  if (auto v = n["role"]) {
    auto role = route::parse_role(y.text(v, field + ".role"));
    if (!role) y.fail(v, field + ".role", "expected both, prefill or decode");
    t.role = *role;
  }
  if (auto v = n["zone"]) t.zone = y.text(v, field + ".zone");
  if (auto v = n["rack"]) t.rack = y.text(v, field + ".rack");
  if (auto v = n["labels"]) {
    if (!v.IsMap()) y.fail(v, field + ".labels", "expected a mapping");
    for (const auto& kv : v) {
      t.labels.emplace_back(kv.first.Scalar(), y.text(kv.second, field + ".labels"));
    }
  }
  if (auto v = n["kv_events_port"]) {
    t.kv_events_port = static_cast<uint16_t>(y.integer(v, field + ".kv_events_port", 1, 65535));
  }
  if (auto v = n["kv_replay_port"]) {
    t.kv_replay_port = static_cast<uint16_t>(y.integer(v, field + ".kv_replay_port", 1, 65535));
  }
  return t;
}

FileSourceConfig file_source(const YamlReader& y, const YAML::Node& n, const std::string& f,
                             bool bind) {
  y.only_keys(n, f, {"kind", "name", "path", "reread_ms", "settle_ms"});
  FileSourceConfig c;
  c.kv_events_bind = bind;
  if (!n["path"]) y.fail(n, f + ".path", "missing");
  c.path = y.path(n["path"], f + ".path");
  // The directory is what the source watches: without it `serve` could not start, so the
  // config is refused here, by `serve --check` and `serve` alike. The file itself may be
  // missing at start (a sidecar writes it later): the pool starts empty and fills then.
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::path(c.path).parent_path();
  if (dir.empty()) dir = ".";
  if (!std::filesystem::is_directory(dir, ec)) {
    y.fail(n["path"], f + ".path", "directory " + dir.string() + " does not exist");
  }
  if (auto v = n["reread_ms"]) c.reread = millis(y, v, f + ".reread_ms", 100, kDay);
  if (auto v = n["settle_ms"]) c.settle = millis(y, v, f + ".settle_ms", 0, 10'000);
  return c;
}

DnsSourceConfig dns_source(const YamlReader& y, const YAML::Node& n, const std::string& f,
                           bool bind) {
  y.only_keys(n, f,
              {"kind", "name", "hostname", "record", "port", "interval_ms", "min_interval_ms",
               "timeout_ms", "server", "endpoint", "data_parallel_size"});
  DnsSourceConfig c;
  if (!n["hostname"]) y.fail(n, f + ".hostname", "missing");
  c.name = y.text(n["hostname"], f + ".hostname");
  if (c.name.empty()) y.fail(n["hostname"], f + ".hostname", "empty");
  if (auto v = n["record"]) {
    std::string r = y.text(v, f + ".record");
    if (r == "a" || r == "A") {
      c.record = DnsSourceConfig::Record::kA;
    } else if (r == "aaaa" || r == "AAAA") {
      c.record = DnsSourceConfig::Record::kAAAA;
    } else if (r == "srv" || r == "SRV") {
      c.record = DnsSourceConfig::Record::kSrv;
    } else {
      y.fail(v, f + ".record", fmt::format("expected a, aaaa or srv, got '{}'", r));
    }
  }
  if (auto v = n["port"]) c.port = static_cast<uint16_t>(y.integer(v, f + ".port", 1, 65535));
  if (c.record != DnsSourceConfig::Record::kSrv && c.port == 0) {
    y.fail(n, f + ".port", "required for A and AAAA records (SRV records carry their port)");
  }
  if (auto v = n["interval_ms"]) c.interval = millis(y, v, f + ".interval_ms", 100, kDay);
  if (auto v = n["min_interval_ms"]) {
    c.min_interval = millis(y, v, f + ".min_interval_ms", 100, kDay);
  }
  if (c.min_interval > c.interval) c.min_interval = c.interval;
  if (auto v = n["timeout_ms"]) c.timeout = millis(y, v, f + ".timeout_ms", 100, 60'000);
  if (auto v = n["server"]) {
    c.server = y.text(v, f + ".server");
    const size_t colon = c.server.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == c.server.size() ||
        c.server.find_first_not_of("0123456789.:") != std::string::npos ||
        c.server.find(':') != colon) {
      y.fail(v, f + ".server", fmt::format("expected IPV4:PORT, got '{}'", c.server));
    }
  }
  if (auto v = n["endpoint"]) c.endpoint = endpoint_template(y, v, f + ".endpoint");
  if (bind && c.endpoint.kv_events_port != 0) {
    y.fail(n["endpoint"], f + ".endpoint.kv_events_port",
           "not used with the pool's kv_events_bind (engines connect to the gateway)");
  }
  if (auto v = n["data_parallel_size"])
    c.data_parallel_size = read_data_parallel_size(y, v, f, bind);
  return c;
}

KubernetesSourceConfig kubernetes_source(const YamlReader& y, const YAML::Node& n,
                                         const std::string& f, bool bind) {
  y.only_keys(n, f,
              {"kind",
               "name",
               "mode",
               "namespace",
               "selector",
               "inference_pool",
               "service",
               "port_name",
               "role_label",
               "zone_label",
               "rack_label",
               "labels",
               "kv_events_port_annotation",
               "kv_replay_port_annotation",
               "kv_topic_annotation",
               "data_parallel_size",
               "data_parallel_size_annotation",
               "resync_ms",
               "timeout_ms",
               "watch_timeout_ms",
               "backoff_ms",
               "kubeconfig",
               "token_file",
               "ca_file",
               "namespace_file"});
  KubernetesSourceConfig c;
  using Mode = KubernetesSourceConfig::Mode;
  if (auto v = n["mode"]) {
    c.mode = y.choice<Mode>(v, f + ".mode",
                            {{"pods", Mode::kPods}, {"endpointslices", Mode::kEndpointSlices}});
  }
  const auto str = [&](const char* key, std::string& out) {
    if (auto v = n[key]) out = y.text(v, f + "." + key);
  };
  str("namespace", c.ns);
  str("selector", c.selector);
  str("inference_pool", c.inference_pool);
  str("service", c.service);
  str("port_name", c.port_name);
  str("role_label", c.role_label);
  str("zone_label", c.zone_label);
  str("rack_label", c.rack_label);
  str("kv_events_port_annotation", c.kv_events_port_annotation);
  str("kv_replay_port_annotation", c.kv_replay_port_annotation);
  str("kv_topic_annotation", c.kv_topic_annotation);
  str("data_parallel_size_annotation", c.data_parallel_size_annotation);
  if (auto v = n["data_parallel_size"])
    c.data_parallel_size = read_data_parallel_size(y, v, f, bind);
  if (auto v = n["inference_pool"]) {
    // The pool's spec gives the pods and their ports: the keys that would say it again
    // are refused rather than silently ignored.
    const std::string& name = c.inference_pool;
    if (name.empty() || name.size() > 253 ||
        name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-.") != std::string::npos) {
      y.fail(v, f + ".inference_pool",
             fmt::format("expected an InferencePool's name (lowercase letters, digits, '-' and "
                         "'.'), got '{}'",
                         name));
    }
    if (c.mode != Mode::kPods) {
      y.fail(n["mode"], f + ".mode",
             "an inference_pool selects pods: not with mode endpointslices");
    }
    for (const char* key : {"selector", "service", "port_name"}) {
      if (auto k = n[key]) {
        const bool port = std::string_view(key) == "port_name";
        y.fail(k, f + "." + key,
               fmt::format(
                   "not with inference_pool (the InferencePool's {})",
                   port ? "spec.targetPorts give the ports" : "spec.selector selects the pods"));
      }
    }
  }
  if (c.mode == Mode::kPods && c.selector.empty() && c.inference_pool.empty()) {
    y.fail(n, f + ".selector", "required with mode pods (e.g. app=vllm), or an inference_pool");
  }
  if (c.mode == Mode::kEndpointSlices && c.service.empty()) {
    y.fail(n, f + ".service", "required with mode endpointslices");
  }
  if (c.port_name.empty()) y.fail(n["port_name"], f + ".port_name", "empty");
  if (auto v = n["labels"]) {
    if (!v.IsSequence()) y.fail(v, f + ".labels", "expected a list of pod label names");
    for (size_t i = 0; i < v.size(); ++i) {
      c.labels.push_back(y.text(v[i], fmt::format("{}.labels[{}]", f, i)));
    }
  }
  if (auto v = n["resync_ms"]) c.resync = millis(y, v, f + ".resync_ms", 100, kDay);
  if (auto v = n["timeout_ms"]) c.timeout = millis(y, v, f + ".timeout_ms", 100, 600'000);
  if (auto v = n["watch_timeout_ms"]) {
    c.watch_timeout = millis(y, v, f + ".watch_timeout_ms", 1'000, 3'600'000);
  }
  if (auto v = n["backoff_ms"]) c.backoff = millis(y, v, f + ".backoff_ms", 10, 600'000);
  if (auto v = n["kubeconfig"]) c.kubeconfig = y.path(v, f + ".kubeconfig");
  if (auto v = n["token_file"]) c.token_file = y.path(v, f + ".token_file");
  if (auto v = n["ca_file"]) c.ca_file = y.path(v, f + ".ca_file");
  if (auto v = n["namespace_file"]) c.namespace_file = y.path(v, f + ".namespace_file");
  if (bind) {
    y.fail(n, f,
           "kv_events_bind pools are not supported with Kubernetes discovery yet; "
           "give the engines' publisher ports through annotations instead");
  }
  return c;
}

// The registry of source kinds: name -> parser of its keys.
using SourceParser = std::function<decltype(SourceConfig::params)(
    const YamlReader&, const YAML::Node&, const std::string&, bool)>;
const std::vector<std::pair<std::string_view, SourceParser>>& registry() {
  static const std::vector<std::pair<std::string_view, SourceParser>> kinds = {
      {"file", file_source},
      {"dns", dns_source},
      {"kubernetes", kubernetes_source},
  };
  return kinds;
}

}  // namespace

std::vector<std::string_view> source_kinds() {
  std::vector<std::string_view> out;
  for (const auto& [name, parser] : registry()) out.push_back(name);
  return out;
}

Result<DiscoveryConfig> parse_discovery(const YAML::Node& n, std::string_view file,
                                        const std::string& field, const std::filesystem::path& dir,
                                        bool kv_events_bind) {
  const YamlReader y(file, dir.string());
  try {
    y.only_keys(n, field,
                {"sources", "grace_ms", "hold_empty", "hold_empty_max_ms", "drain_timeout_ms"});
    DiscoveryConfig c;
    if (auto v = n["grace_ms"]) c.grace = millis(y, v, field + ".grace_ms", 0, kDay);
    if (auto v = n["hold_empty"]) c.hold_empty = y.boolean(v, field + ".hold_empty");
    if (auto v = n["hold_empty_max_ms"]) {
      c.hold_empty_max = millis(y, v, field + ".hold_empty_max_ms", 0, kDay);
    }
    if (auto v = n["drain_timeout_ms"]) {
      c.drain_timeout = millis(y, v, field + ".drain_timeout_ms", 0, kDay);
    }
    YAML::Node sources = n["sources"];
    if (!sources || !sources.IsSequence() || sources.size() == 0) {
      y.fail(sources ? sources : n, field + ".sources", "expected a non-empty list of sources");
    }
    if (sources.size() > 32) y.fail(sources, field + ".sources", "at most 32 sources");
    std::set<std::string> names;
    for (size_t i = 0; i < sources.size(); ++i) {
      const std::string sf = fmt::format("{}.sources[{}]", field, i);
      const YAML::Node& s = sources[i];
      if (!s.IsMap()) y.fail(s, sf, "expected a mapping");
      if (!s["kind"]) y.fail(s, sf + ".kind", "missing");
      SourceConfig sc;
      sc.kind = y.text(s["kind"], sf + ".kind");
      const SourceParser* parser = nullptr;
      for (const auto& [name, p] : registry()) {
        if (name == sc.kind) parser = &p;
      }
      if (!parser) {
        y.fail(s["kind"], sf + ".kind",
               fmt::format("unknown source kind '{}' (expected {})", sc.kind,
                           fmt::join(source_kinds(), ", ")));
      }
      sc.params = (*parser)(y, s, sf, kv_events_bind);
      sc.name = sc.kind;
      if (auto v = s["name"]) sc.name = y.text(v, sf + ".name");
      if (sc.name.empty()) y.fail(s["name"], sf + ".name", "empty");
      if (!names.insert(sc.name).second) {
        y.fail(s, sf + ".name",
               fmt::format("source name '{}' used twice (give each a name)", sc.name));
      }
      c.sources.push_back(std::move(sc));
    }
    return c;
  } catch (const YamlError& e) {
    return Error(e.message);
  } catch (const YAML::Exception& e) {
    return y.error(e);
  }
}

}  // namespace kvgate::discovery
