#include "discovery/k8s_objects.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cctype>
#include <charconv>
#include <utility>

#include "core/route/data_parallel.h"
#include "discovery/endpoint_list.h"

namespace kvgate::discovery {
namespace json = boost::json;
namespace {

const json::object* obj(const json::value* v) {
  return v && v->is_object() ? &v->as_object() : nullptr;
}
const json::object* obj(const json::object* o, std::string_view key) {
  return o ? obj(o->if_contains(key)) : nullptr;
}
const json::array* arr(const json::object* o, std::string_view key) {
  if (!o) return nullptr;
  const json::value* v = o->if_contains(key);
  return v && v->is_array() ? &v->as_array() : nullptr;
}
std::string str(const json::object* o, std::string_view key) {
  if (!o) return {};
  const json::value* v = o->if_contains(key);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}
bool present(const json::object* o, std::string_view key) {
  if (!o) return false;
  const json::value* v = o->if_contains(key);
  return v && !v->is_null();
}
int64_t integer(const json::object* o, std::string_view key) {
  if (!o) return 0;
  const json::value* v = o->if_contains(key);
  return v && v->is_int64()    ? v->as_int64()
         : v && v->is_uint64() ? static_cast<int64_t>(v->as_uint64())
                               : 0;
}
uint16_t port_number(std::string_view text) {
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 1 || v > 65535) return 0;
  return static_cast<uint16_t>(v);
}
// The ports of a comma-separated annotation ("5557" or "5557,5567"), in order; 0 for an
// entry that is not a port number.
std::vector<uint16_t> port_list(std::string_view text) {
  std::vector<uint16_t> out;
  if (text.empty()) return out;
  size_t at = 0;
  while (true) {
    const size_t comma = text.find(',', at);
    std::string_view item =
        text.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    out.push_back(port_number(item));
    if (comma == std::string_view::npos) break;
    at = comma + 1;
  }
  return out;
}
// A label's key (an optional DNS-subdomain prefix and '/', then a name) and value, as
// far as a selector needs: the characters Kubernetes allows, within its lengths.
bool label_key_ok(std::string_view k) {
  if (k.empty() || k.size() > 253 || k.back() == '/') return false;
  return std::all_of(k.begin(), k.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '/';
  });
}
bool label_value_ok(std::string_view v) {
  if (v.size() > 63) return false;
  return std::all_of(v.begin(), v.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return std::isalnum(c) || c == '-' || c == '_' || c == '.';
  });
}
std::string host_of(const std::string& ip) {
  return ip.find(':') != std::string::npos ? "[" + ip + "]" : ip;
}

std::string percent_encode(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

}  // namespace

std::string object_name(const json::value& object) {
  return str(obj(obj(&object), "metadata"), "name");
}

std::string object_resource_version(const json::value& object) {
  return str(obj(obj(&object), "metadata"), "resourceVersion");
}

std::vector<DiscoveredEndpoint> pod_endpoints(const json::value& pod,
                                              const KubernetesSourceConfig& c) {
  const json::object* spec = obj(obj(&pod), "spec");
  uint16_t port = 0;
  if (const json::array* containers = arr(spec, "containers")) {
    for (const json::value& ct : *containers) {
      if (const json::array* ports = arr(obj(&ct), "ports")) {
        for (const json::value& p : *ports) {
          if (port == 0 && str(obj(&p), "name") == c.port_name) {
            port = static_cast<uint16_t>(integer(obj(&p), "containerPort"));
          }
        }
      }
    }
  }
  if (port == 0) return {};  // not an engine we know
  return pod_endpoints(pod, c, std::vector<uint16_t>{port});
}

std::vector<DiscoveredEndpoint> pod_endpoints(const json::value& pod,
                                              const KubernetesSourceConfig& c,
                                              const std::vector<uint16_t>& ports) {
  const json::object* root = obj(&pod);
  const json::object* meta = obj(root, "metadata");
  const json::object* status = obj(root, "status");
  const std::string ip = str(status, "podIP");
  if (ip.empty()) return {};  // not scheduled yet
  bool ready_condition = false;
  if (const json::array* conditions = arr(status, "conditions")) {
    for (const json::value& cond : *conditions) {
      if (str(obj(&cond), "type") == "Ready") ready_condition = str(obj(&cond), "status") == "True";
    }
  }
  const json::object* labels = obj(meta, "labels");
  const json::object* annotations = obj(meta, "annotations");
  const Result<uint32_t> dp_size = pod_data_parallel_size(pod, c);
  if (!dp_size) return {};  // the ranks it serves are unknown (the source reports why)
  const bool ready =
      str(status, "phase") == "Running" && ready_condition && !present(meta, "deletionTimestamp");
  const std::vector<uint16_t> kv = port_list(str(annotations, c.kv_events_port_annotation));
  const std::vector<uint16_t> replay = port_list(str(annotations, c.kv_replay_port_annotation));
  std::vector<DiscoveredEndpoint> out;
  for (size_t i = 0; i < ports.size(); ++i) {
    if (ports[i] == 0) continue;
    DiscoveredEndpoint e;
    e.spec.url = fmt::format("http://{}:{}", host_of(ip), ports[i]);
    e.ready = ready;
    if (auto role = route::parse_role(str(labels, c.role_label))) e.spec.role = *role;
    e.spec.zone = str(labels, c.zone_label);
    e.spec.rack = str(labels, c.rack_label);
    for (const std::string& name : c.labels) {
      if (present(labels, name)) e.spec.labels.emplace_back(name, str(labels, name));
    }
    if (i < kv.size() && kv[i] != 0) {
      KvEventsAddress k;
      k.publisher = fmt::format("tcp://{}:{}", host_of(ip), kv[i]);
      if (i < replay.size() && replay[i] != 0) {
        k.replay = fmt::format("tcp://{}:{}", host_of(ip), replay[i]);
      }
      k.topic = str(annotations, c.kv_topic_annotation);
      e.kv_events = std::move(k);
    }
    append_ranks(std::move(e), *dp_size, out);
  }
  return out;
}

Result<uint32_t> pod_data_parallel_size(const json::value& pod, const KubernetesSourceConfig& c) {
  const json::object* meta = obj(obj(&pod), "metadata");
  const json::object* annotations = obj(meta, "annotations");
  if (c.data_parallel_size_annotation.empty() ||
      !present(annotations, c.data_parallel_size_annotation)) {
    return c.data_parallel_size;
  }
  const std::string text = str(annotations, c.data_parallel_size_annotation);
  uint32_t size = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, size);
  if (text.empty() || ec != std::errc() || p != end || size < 1 ||
      size > route::kMaxDataParallelSize) {
    return Error(fmt::format(
        "pod {}: annotation {}: expected a number of data-parallel ranks, 1 to {}, got '{}' (the "
        "pod is left out)",
        str(meta, "name"), c.data_parallel_size_annotation, route::kMaxDataParallelSize, text));
  }
  return size;
}

std::vector<DiscoveredEndpoint> slice_endpoints(const json::value& slice,
                                                const KubernetesSourceConfig& c) {
  const json::object* root = obj(&slice);
  const std::string type = str(root, "addressType");
  if (type != "IPv4" && type != "IPv6") return {};
  uint16_t port = 0, kv = 0, replay = 0;
  if (const json::array* ports = arr(root, "ports")) {
    for (const json::value& p : *ports) {
      const std::string name = str(obj(&p), "name");
      const auto number = static_cast<uint16_t>(integer(obj(&p), "port"));
      if (name == c.port_name || (ports->size() == 1 && port == 0)) port = number;
      if (name == "kv-events") kv = number;
      if (name == "kv-replay") replay = number;
    }
  }
  std::vector<DiscoveredEndpoint> out;
  if (port == 0) return out;
  if (const json::array* endpoints = arr(root, "endpoints")) {
    for (const json::value& ep : *endpoints) {
      const json::object* o = obj(&ep);
      const json::object* cond = obj(o, "conditions");
      const json::value* ready = cond ? cond->if_contains("ready") : nullptr;
      const json::value* terminating = cond ? cond->if_contains("terminating") : nullptr;
      const bool is_ready = !(ready && ready->is_bool() && !ready->as_bool()) &&
                            !(terminating && terminating->is_bool() && terminating->as_bool());
      // An entry is one backend; its addresses are fungible (the API reference: clients
      // may use the first only), so one endpoint, not one per address.
      const json::array* addresses = arr(o, "addresses");
      if (!addresses || addresses->empty() || !addresses->front().is_string()) continue;
      const std::string ip(addresses->front().as_string());
      DiscoveredEndpoint e;
      e.spec.url = fmt::format("http://{}:{}", host_of(ip), port);
      e.spec.zone = str(o, "zone");
      e.ready = is_ready;
      if (kv != 0) {
        KvEventsAddress k;
        k.publisher = fmt::format("tcp://{}:{}", host_of(ip), kv);
        if (replay != 0) k.replay = fmt::format("tcp://{}:{}", host_of(ip), replay);
        e.kv_events = std::move(k);
      }
      append_ranks(std::move(e), c.data_parallel_size, out);
    }
  }
  return out;
}

std::string pods_list_path(const std::string& ns, const std::string& selector) {
  return fmt::format("/api/v1/namespaces/{}/pods?labelSelector={}", percent_encode(ns),
                     percent_encode(selector));
}

std::string list_path(const KubernetesSourceConfig& c, const std::string& ns) {
  if (c.mode == KubernetesSourceConfig::Mode::kPods) return pods_list_path(ns, c.selector);
  return fmt::format("/apis/discovery.k8s.io/v1/namespaces/{}/endpointslices?labelSelector={}",
                     percent_encode(ns), percent_encode("kubernetes.io/service-name=" + c.service));
}

Result<InferencePoolTarget> inference_pool_target(const json::value& pool) {
  const json::object* root = obj(&pool);
  if (!root) return Error("not a JSON object");
  const json::object* spec = obj(root, "spec");
  if (!spec) return Error("spec: missing");
  const json::object* match = obj(obj(spec, "selector"), "matchLabels");
  if (!match || match->empty()) {
    return Error(
        "spec.selector.matchLabels: missing or empty (it would select every pod of the "
        "namespace)");
  }
  std::vector<std::pair<std::string, std::string>> terms;
  for (const auto& kv : *match) {
    const std::string key(kv.key().data(), kv.key().size());
    if (!kv.value().is_string()) {
      return Error(fmt::format("spec.selector.matchLabels.{}: expected a string", key));
    }
    const json::string& value = kv.value().as_string();
    std::string text(value.data(), value.size());
    if (!label_key_ok(key) || !label_value_ok(text)) {
      return Error(
          fmt::format("spec.selector.matchLabels.{}: '{}' is not a Kubernetes label", key, text));
    }
    terms.emplace_back(key, std::move(text));
  }
  std::sort(terms.begin(), terms.end());
  InferencePoolTarget t;
  for (const auto& [key, value] : terms) {
    if (!t.selector.empty()) t.selector += ',';
    t.selector += key + "=" + value;
  }
  const json::array* ports = arr(spec, "targetPorts");
  if (!ports || ports->empty()) {
    return Error("spec.targetPorts: missing or empty (the pool names no port of its pods)");
  }
  if (ports->size() > 8) {
    return Error(fmt::format("spec.targetPorts: {} ports (at most 8)", ports->size()));
  }
  for (size_t i = 0; i < ports->size(); ++i) {
    const json::object* p = obj(&(*ports)[i]);
    const json::value* number = p ? p->if_contains("number") : nullptr;
    int64_t n = 0;
    if (number && number->is_int64()) n = number->as_int64();
    if (number && number->is_uint64()) n = -1;  // beyond int64: out of range anyway
    if (n < 1 || n > 65535) {
      return Error(fmt::format("spec.targetPorts[{}].number: expected a port, 1 to 65535", i));
    }
    const auto port = static_cast<uint16_t>(n);
    if (std::find(t.ports.begin(), t.ports.end(), port) != t.ports.end()) {
      return Error(fmt::format("spec.targetPorts[{}].number: {} given twice", i, port));
    }
    t.ports.push_back(port);
  }
  const std::string protocol = str(spec, "appProtocol");
  if (!protocol.empty() && protocol != "http") {
    return Error(fmt::format(
        "spec.appProtocol: '{}' is not supported (kvgate speaks HTTP/1.1 to engines)", protocol));
  }
  return t;
}

std::string inference_pool_path(const std::string& ns, const std::string& name) {
  return fmt::format("/apis/inference.networking.k8s.io/v1/namespaces/{}/inferencepools/{}",
                     percent_encode(ns), percent_encode(name));
}

std::string inference_pool_watch_path(const std::string& ns, const std::string& name) {
  return fmt::format(
      "/apis/inference.networking.k8s.io/v1/namespaces/{}/inferencepools?fieldSelector={}",
      percent_encode(ns), percent_encode("metadata.name=" + name));
}

}  // namespace kvgate::discovery
