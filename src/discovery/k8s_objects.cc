#include "discovery/k8s_objects.h"

#include <fmt/format.h>

#include <boost/json.hpp>
#include <charconv>

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
  const json::object* root = obj(&pod);
  const json::object* meta = obj(root, "metadata");
  const json::object* spec = obj(root, "spec");
  const json::object* status = obj(root, "status");
  const std::string ip = str(status, "podIP");
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
  if (ip.empty() || port == 0) return {};  // not scheduled yet, or not an engine we know
  bool ready_condition = false;
  if (const json::array* conditions = arr(status, "conditions")) {
    for (const json::value& cond : *conditions) {
      if (str(obj(&cond), "type") == "Ready") ready_condition = str(obj(&cond), "status") == "True";
    }
  }
  const json::object* labels = obj(meta, "labels");
  const json::object* annotations = obj(meta, "annotations");
  DiscoveredEndpoint e;
  e.spec.url = fmt::format("http://{}:{}", host_of(ip), port);
  e.ready =
      str(status, "phase") == "Running" && ready_condition && !present(meta, "deletionTimestamp");
  if (auto role = route::parse_role(str(labels, c.role_label))) e.spec.role = *role;
  e.spec.zone = str(labels, c.zone_label);
  e.spec.rack = str(labels, c.rack_label);
  for (const std::string& name : c.labels) {
    if (present(labels, name)) e.spec.labels.emplace_back(name, str(labels, name));
  }
  if (const uint16_t kv = port_number(str(annotations, c.kv_events_port_annotation)); kv != 0) {
    KvEventsAddress k;
    k.publisher = fmt::format("tcp://{}:{}", host_of(ip), kv);
    if (const uint16_t r = port_number(str(annotations, c.kv_replay_port_annotation)); r != 0) {
      k.replay = fmt::format("tcp://{}:{}", host_of(ip), r);
    }
    k.topic = str(annotations, c.kv_topic_annotation);
    e.kv_events = std::move(k);
  }
  return {std::move(e)};
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
      out.push_back(std::move(e));
    }
  }
  return out;
}

std::string list_path(const KubernetesSourceConfig& c, const std::string& ns) {
  if (c.mode == KubernetesSourceConfig::Mode::kPods) {
    return fmt::format("/api/v1/namespaces/{}/pods?labelSelector={}", percent_encode(ns),
                       percent_encode(c.selector));
  }
  return fmt::format("/apis/discovery.k8s.io/v1/namespaces/{}/endpointslices?labelSelector={}",
                     percent_encode(ns), percent_encode("kubernetes.io/service-name=" + c.service));
}

}  // namespace kvgate::discovery
