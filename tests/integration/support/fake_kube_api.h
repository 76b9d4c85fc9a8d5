// A small Kubernetes API server for the discovery tests (there is none on these
// machines): real HTTP on loopback, pods in the core/v1 shape and EndpointSlices in the
// discovery.k8s.io/v1 shape (namespace llm), InferencePools in the
// inference.networking.k8s.io/v1 shape, LIST with metadata.resourceVersion and an
// equality labelSelector (`app=vllm`, `kubernetes.io/service-name=vllm`, terms joined by
// commas) or a fieldSelector `metadata.name=NAME`, GET of one object by name, WATCH as a
// chunked stream of JSON lines {"type": ADDED|MODIFIED|DELETED|BOOKMARK|ERROR, "object":
// ...} of the objects the selector matches (from a resourceVersion; without one, the
// current state as ADDED events first), 410 Gone as a Status object, bearer tokens
// checked. No gtest in here: bench/ uses it too. Knobs let a test drop
// watches, compact history (so an old resourceVersion gets 410), lose a DELETED event, and rotate
// the token. It also serves one Deployment's scale subresource (GET, and PATCH with a
// merge patch of spec.replicas, as `kubectl scale` and the autoscaler's actuator send it);
// the test plays the Deployment controller, reading spec_replicas() and creating or
// deleting pods.
#pragma once

#include <boost/json.hpp>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "io/http_server.h"

namespace kvgate::testing {

// A pod as the API serves it. `ready`: phase Running and condition Ready True.
inline boost::json::object make_pod(const std::string& name, const std::string& ip, int port,
                                    bool ready, const boost::json::object& labels = {},
                                    const boost::json::object& annotations = {}) {
  boost::json::object l = labels;
  l["app"] = "vllm";
  l["pod-template-hash"] = "6d8f";
  return boost::json::object{
      {"kind", "Pod"},
      {"apiVersion", "v1"},
      {"metadata",
       {{"name", name},
        {"generateName", "vllm-6d8f-"},
        {"namespace", "llm"},
        {"uid", "uid-" + name},
        {"creationTimestamp", "2026-12-01T10:00:00Z"},
        {"labels", l},
        {"annotations", annotations}}},
      {"spec",
       {{"containers", boost::json::array{{{"name", "vllm"},
                                           {"image", "vllm/vllm-openai:v0.11.0"},
                                           {"ports", boost::json::array{{{"name", "http"},
                                                                         {"containerPort", port},
                                                                         {"protocol", "TCP"}}}}}}},
        {"nodeName", "node-1"},
        {"restartPolicy", "Always"}}},
      {"status",
       {{"phase", ready ? "Running" : "Pending"},
        {"conditions",
         boost::json::array{{{"type", "PodScheduled"}, {"status", "True"}},
                            {{"type", "Ready"}, {"status", ready ? "True" : "False"}}}},
        {"hostIP", "10.0.0.1"},
        {"podIP", ip},
        {"podIPs", boost::json::array{{{"ip", ip}}}}}}};
}

// One entry of an EndpointSlice's `endpoints`: a pod's address and its conditions, as the
// EndpointSlice controller writes them (NotReady: ready and serving false; terminating:
// ready false, serving while its readiness probe still passes, terminating true).
struct SliceEndpoint {
  std::vector<std::string> addresses;
  std::string pod;
  bool ready = true;
  bool serving = true;
  bool terminating = false;
  std::string zone = "z1";
};

// An EndpointSlice of Service `service` as the API serves it: IPv4, the Service's port
// named `http` (and `kv-events` when kv_port is not 0), each entry with addresses,
// conditions, targetRef, nodeName and zone.
inline boost::json::object make_endpoint_slice(const std::string& name,
                                               const std::vector<SliceEndpoint>& endpoints,
                                               int port, const std::string& service = "vllm",
                                               int kv_port = 0) {
  boost::json::array eps;
  for (const SliceEndpoint& e : endpoints) {
    boost::json::array addresses;
    for (const std::string& a : e.addresses) addresses.emplace_back(a);
    eps.push_back(boost::json::object{
        {"addresses", std::move(addresses)},
        {"conditions",
         {{"ready", e.ready}, {"serving", e.serving}, {"terminating", e.terminating}}},
        {"targetRef",
         {{"kind", "Pod"}, {"namespace", "llm"}, {"name", e.pod}, {"uid", "uid-" + e.pod}}},
        {"nodeName", "node-1"},
        {"zone", e.zone}});
  }
  boost::json::array ports{{{"name", "http"}, {"protocol", "TCP"}, {"port", port}}};
  if (kv_port != 0)
    ports.push_back({{"name", "kv-events"}, {"protocol", "TCP"}, {"port", kv_port}});
  return boost::json::object{
      {"kind", "EndpointSlice"},
      {"apiVersion", "discovery.k8s.io/v1"},
      {"metadata",
       {{"name", name},
        {"generateName", service + "-"},
        {"namespace", "llm"},
        {"uid", "uid-" + name},
        {"creationTimestamp", "2026-12-01T10:00:00Z"},
        {"labels",
         {{"kubernetes.io/service-name", service},
          {"endpointslice.kubernetes.io/managed-by", "endpointslice-controller.k8s.io"}}},
        {"ownerReferences", boost::json::array{{{"apiVersion", "v1"},
                                                {"kind", "Service"},
                                                {"name", service},
                                                {"uid", "uid-svc-" + service},
                                                {"controller", true},
                                                {"blockOwnerDeletion", true}}}}}},
      {"addressType", "IPv4"},
      {"endpoints", std::move(eps)},
      {"ports", std::move(ports)}};
}

// An InferencePool (Gateway API Inference Extension, v1) as the API serves it: the pods
// `match_labels` selects, at `ports`, picked by the Service kvgate-epp.
inline boost::json::object make_inference_pool(const std::string& name,
                                               const boost::json::object& match_labels,
                                               const std::vector<int>& ports) {
  boost::json::array target_ports;
  for (const int p : ports) target_ports.push_back(boost::json::object{{"number", p}});
  return boost::json::object{{"kind", "InferencePool"},
                             {"apiVersion", "inference.networking.k8s.io/v1"},
                             {"metadata",
                              {{"name", name},
                               {"namespace", "llm"},
                               {"uid", "uid-" + name},
                               {"generation", 1},
                               {"creationTimestamp", "2026-12-01T10:00:00Z"}}},
                             {"spec",
                              {{"selector", {{"matchLabels", match_labels}}},
                               {"targetPorts", std::move(target_ports)},
                               {"endpointPickerRef",
                                {{"group", ""},
                                 {"kind", "Service"},
                                 {"name", "kvgate-epp"},
                                 {"port", {{"number", 9002}}},
                                 {"failureMode", "FailClose"}}}}},
                             {"status", {{"parents", boost::json::array{}}}}};
}

inline std::string status_json(int code, const std::string& reason, const std::string& message) {
  return boost::json::serialize(boost::json::object{{"kind", "Status"},
                                                    {"apiVersion", "v1"},
                                                    {"metadata", boost::json::object{}},
                                                    {"status", "Failure"},
                                                    {"message", message},
                                                    {"reason", reason},
                                                    {"code", code}});
}

// A kubeconfig for the test API at `server_url` (FakeKubeApi::url()): context `test`,
// namespace llm, the bearer token read from `token_file` (relative: next to the
// kubeconfig).
inline std::string test_kubeconfig(const std::string& server_url,
                                   const std::string& token_file = "token") {
  return "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
         "clusters:\n- name: fake\n  cluster:\n    server: " +
         server_url +
         "\ncontexts:\n- name: test\n  context: {cluster: fake, user: discovery, namespace: "
         "llm}\n"
         "users:\n- name: discovery\n  user:\n    tokenFile: " +
         token_file + "\n";
}

class FakeKubeApi {
 public:
  explicit FakeKubeApi(std::string token) : token_(std::move(token)) {
    io::HttpServerOptions o;
    o.threads = 1;
    auto s = io::HttpServer::start(
        o, [this](io::HttpRequest&& req, std::shared_ptr<io::ResponseStream> stream) {
          handle(std::move(req), std::move(stream));
        });
    if (!s) {
      error_ = s.error();
      return;
    }
    server_ = std::move(*s);
  }
  ~FakeKubeApi() {
    drop_watches();
    if (server_) server_->stop(std::chrono::milliseconds(0));
  }

  // Empty unless the server could not start (then port() is 0).
  const std::string& error() const { return error_; }
  uint16_t port() const { return server_ ? server_->port() : 0; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port()); }

  // ADDED (new name) or MODIFIED; a Pod, an EndpointSlice or an InferencePool (by its kind).
  void upsert(boost::json::object object) {
    std::lock_guard lock(mu_);
    Collection& c = collection_of(object);
    const std::string name = name_of(object);
    const bool known = c.objects.contains(name);
    object["metadata"].as_object()["resourceVersion"] = std::to_string(++rv_);
    c.objects[name] = object;
    emit_locked(c, known ? "MODIFIED" : "ADDED", object);
  }
  void remove(const std::string& name, const std::string& kind = "Pod") {
    std::lock_guard lock(mu_);
    Collection& c = collections_.at(kind);
    auto it = c.objects.find(name);
    if (it == c.objects.end()) return;
    boost::json::object object = it->second;
    c.objects.erase(it);
    object["metadata"].as_object()["resourceVersion"] = std::to_string(++rv_);
    emit_locked(c, "DELETED", object);
  }
  // Changed without an event reaching anyone (a watch that missed it).
  void upsert_silently(boost::json::object object) {
    std::lock_guard lock(mu_);
    const std::string name = name_of(object);
    object["metadata"].as_object()["resourceVersion"] = std::to_string(++rv_);
    collection_of(object).objects[name] = object;
  }
  // Gone without a DELETED event reaching anyone (a watch that missed it).
  void remove_silently(const std::string& name, const std::string& kind = "Pod") {
    std::lock_guard lock(mu_);
    collections_.at(kind).objects.erase(name);
    ++rv_;
  }
  void bookmark() {
    std::lock_guard lock(mu_);
    ++rv_;
    for (auto& [kind, c] : collections_) {
      boost::json::object o{{"kind", kind},
                            {"apiVersion", c.api_version},
                            {"metadata", {{"resourceVersion", std::to_string(rv_)}}}};
      const std::string line = event_line("BOOKMARK", o);
      for (auto& w : c.watches) w.stream->write(line);
    }
  }
  // Closes every watch mid-stream (no final chunk): a broken connection.
  void drop_watches() {
    std::lock_guard lock(mu_);
    for (auto& [kind, c] : collections_) {
      for (auto& w : c.watches) w.stream->abort();
      c.watches.clear();
    }
  }
  // Ends every watch cleanly (the server's timeoutSeconds).
  void end_watches() {
    std::lock_guard lock(mu_);
    for (auto& [kind, c] : collections_) {
      for (auto& w : c.watches) w.stream->finish();
      c.watches.clear();
    }
  }
  // Forgets history: a WATCH from an older resourceVersion gets an ERROR event with a
  // 410 Status; with `http_410` the answer is an HTTP 410 instead.
  void compact(bool http_410 = false) {
    std::lock_guard lock(mu_);
    compacted_ = rv_;
    for (auto& [kind, c] : collections_) c.history.clear();
    http_410_ = http_410;
  }
  void set_token(std::string token) {
    std::lock_guard lock(mu_);
    token_ = std::move(token);
  }

  // The Deployment `name` in namespace llm, with its scale subresource.
  void add_deployment(const std::string& name, int32_t replicas) {
    std::lock_guard lock(mu_);
    deployment_ = name;
    spec_replicas_ = replicas;
  }
  int32_t spec_replicas() {
    std::lock_guard lock(mu_);
    return spec_replicas_;
  }
  // status.replicas: the pods the controller has created.
  void set_status_replicas(int32_t n) {
    std::lock_guard lock(mu_);
    status_replicas_ = n;
  }
  // The spec.replicas of every PATCH, in order.
  std::vector<int32_t> scale_patches() {
    std::lock_guard lock(mu_);
    return scale_patches_;
  }

  int lists() {
    std::lock_guard lock(mu_);
    return lists_;
  }
  // GETs of one object by name.
  int gets() {
    std::lock_guard lock(mu_);
    return gets_;
  }
  int watches() {
    std::lock_guard lock(mu_);
    return watch_count_;
  }
  int unauthorized() {
    std::lock_guard lock(mu_);
    return unauthorized_;
  }
  std::vector<std::string> watch_queries() {
    std::lock_guard lock(mu_);
    return watch_queries_;
  }
  std::string last_token() {
    std::lock_guard lock(mu_);
    return last_token_;
  }

 private:
  // What a LIST or WATCH asks for: every label (labelSelector), the name (fieldSelector).
  struct Filter {
    std::vector<std::pair<std::string, std::string>> labels;
    std::string name;  // empty: any
  };
  // A watch and what its selectors ask for.
  struct Watch {
    std::shared_ptr<io::ResponseStream> stream;
    Filter filter;
  };
  // One resource in namespace llm: its objects by name, their events, its watches.
  struct Collection {
    std::string path;         // of the LIST and WATCH
    std::string list_kind;    // PodList, EndpointSliceList
    std::string api_version;  // v1, discovery.k8s.io/v1
    std::map<std::string, boost::json::object> objects;
    std::vector<std::pair<int64_t, boost::json::object>> history;  // (rv, event), in order
    std::vector<Watch> watches;
  };

  static std::string name_of(const boost::json::object& o) {
    return std::string(o.at("metadata").as_object().at("name").as_string());
  }
  Collection& collection_of(const boost::json::object& o) {
    return collections_.at(std::string(o.at("kind").as_string()));
  }
  // Whether `o`'s labels hold every key=value and its name is the one asked for.
  static bool matches(const boost::json::object& o, const Filter& filter) {
    if (!filter.name.empty() && name_of(o) != filter.name) return false;
    const boost::json::value* labels = o.at("metadata").as_object().if_contains("labels");
    for (const auto& [key, value] : filter.labels) {
      if (!labels || !labels->is_object()) return false;
      const boost::json::value* v = labels->as_object().if_contains(key);
      if (!v || !v->is_string() || v->as_string() != value) return false;
    }
    return true;
  }
  static std::string percent_decode(const std::string& encoded) {
    std::string text;
    for (size_t i = 0; i < encoded.size(); ++i) {
      if (encoded[i] == '%' && i + 2 < encoded.size()) {
        text += static_cast<char>(std::stoi(encoded.substr(i + 1, 2), nullptr, 16));
        i += 2;
      } else {
        text += encoded[i];
      }
    }
    return text;
  }
  // The selectors of a query, as they arrive percent-encoded: a labelSelector of equality
  // terms `key=value[,key=value]`, a fieldSelector `metadata.name=NAME`, or both. Anything
  // else (set-based selectors, other fields, neither) is not served here.
  static std::optional<Filter> filter_of(const std::string& query) {
    const std::string labels = percent_decode(param(query, "labelSelector"));
    const std::string fields = percent_decode(param(query, "fieldSelector"));
    if (labels.empty() && fields.empty()) return std::nullopt;
    Filter f;
    if (!fields.empty()) {
      const std::string prefix = "metadata.name=";
      if (!fields.starts_with(prefix) || fields.size() == prefix.size() ||
          fields.find(',') != std::string::npos) {
        return std::nullopt;
      }
      f.name = fields.substr(prefix.size());
    }
    if (labels.empty()) return f;
    if (labels.find_first_of("!() ") != std::string::npos) return std::nullopt;
    size_t at = 0;
    while (true) {
      const size_t comma = labels.find(',', at);
      const std::string term =
          labels.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
      const size_t eq = term.find('=');
      if (eq == std::string::npos || eq == 0 || term.find('=', eq + 1) != std::string::npos) {
        return std::nullopt;
      }
      f.labels.emplace_back(term.substr(0, eq), term.substr(eq + 1));
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
    return f;
  }
  static std::string event_line(const std::string& type, const boost::json::object& o) {
    return boost::json::serialize(boost::json::object{{"type", type}, {"object", o}}) + "\n";
  }
  void emit_locked(Collection& c, const std::string& type, const boost::json::object& o) {
    boost::json::object event{{"type", type}, {"object", o}};
    c.history.emplace_back(rv_, event);
    const std::string line = boost::json::serialize(event) + "\n";
    for (auto& w : c.watches) {
      if (matches(o, w.filter)) w.stream->write(line);
    }
  }
  static std::string param(const std::string& query, const std::string& key) {
    size_t at = 0;
    while (at <= query.size()) {
      size_t amp = query.find('&', at);
      std::string kv = query.substr(at, amp == std::string::npos ? std::string::npos : amp - at);
      if (kv.starts_with(key + "=")) return kv.substr(key.size() + 1);
      if (amp == std::string::npos) break;
      at = amp + 1;
    }
    return {};
  }

  void handle(io::HttpRequest&& req, std::shared_ptr<io::ResponseStream> stream) {
    std::lock_guard lock(mu_);
    auto auth = req.header("authorization");
    last_token_ = auth ? std::string(auth->substr(std::min<size_t>(7, auth->size()))) : "";
    if (!auth || *auth != "Bearer " + token_) {
      ++unauthorized_;
      stream->respond(
          {401, "application/json", {}, status_json(401, "Unauthorized", "Unauthorized")});
      return;
    }
    if (!deployment_.empty() &&
        req.path == "/apis/apps/v1/namespaces/llm/deployments/" + deployment_ + "/scale") {
      scale_locked(req, *stream);
      return;
    }
    // GET of one object by name.
    for (auto& [kind, col] : collections_) {
      if (req.method != "GET" || !req.path.starts_with(col.path + "/")) continue;
      ++gets_;
      const std::string name = req.path.substr(col.path.size() + 1);
      auto it = col.objects.find(name);
      if (it == col.objects.end()) {
        stream->respond({404,
                         "application/json",
                         {},
                         status_json(404, "NotFound", kind + " \"" + name + "\" not found")});
        return;
      }
      stream->respond({200, "application/json", {}, boost::json::serialize(it->second)});
      return;
    }
    Collection* c = nullptr;
    for (auto& [kind, col] : collections_) {
      if (req.path == col.path) c = &col;
    }
    const std::optional<Filter> filter = filter_of(req.query);
    if (c == nullptr || !filter) {
      stream->respond(
          {404,
           "application/json",
           {},
           status_json(404, "NotFound", "the server could not find the requested resource")});
      return;
    }
    if (param(req.query, "watch") != "1") {
      ++lists_;
      boost::json::array items;
      for (const auto& [name, object] : c->objects) {
        if (!matches(object, *filter)) continue;
        boost::json::object item = object;  // list items carry no kind/apiVersion
        item.erase("kind");
        item.erase("apiVersion");
        items.push_back(std::move(item));
      }
      stream->respond({200,
                       "application/json",
                       {},
                       boost::json::serialize(boost::json::object{
                           {"kind", c->list_kind},
                           {"apiVersion", c->api_version},
                           {"metadata", {{"resourceVersion", std::to_string(rv_)}}},
                           {"items", std::move(items)}})});
      return;
    }
    ++watch_count_;
    watch_queries_.push_back(req.path + "?" + req.query);
    if (param(req.query, "resourceVersion").empty()) {
      // No resourceVersion: the current state as ADDED events, then what follows (never
      // too old).
      stream->start(200, "application/json");
      for (const auto& [name, object] : c->objects) {
        if (matches(object, *filter)) stream->write(event_line("ADDED", object));
      }
      c->watches.push_back({std::move(stream), *filter});
      return;
    }
    const int64_t from = std::stoll("0" + param(req.query, "resourceVersion"));
    if (from < compacted_) {
      const std::string message = "too old resource version: " + std::to_string(from) + " (" +
                                  std::to_string(compacted_) + ")";
      if (http_410_) {
        stream->respond({410, "application/json", {}, status_json(410, "Expired", message)});
        return;
      }
      stream->start(200, "application/json");
      stream->write(boost::json::serialize(boost::json::object{
                        {"type", "ERROR"},
                        {"object", boost::json::parse(status_json(410, "Expired", message))}}) +
                    "\n");
      stream->finish();
      return;
    }
    stream->start(200, "application/json");
    for (const auto& [rv, event] : c->history) {
      if (rv > from && matches(event.at("object").as_object(), *filter)) {
        stream->write(boost::json::serialize(event) + "\n");
      }
    }
    c->watches.push_back({std::move(stream), *filter});
  }

  // GET or PATCH of the scale subresource; the answer is an autoscaling/v1 Scale.
  void scale_locked(const io::HttpRequest& req, io::ResponseStream& stream) {
    if (req.method == "PATCH") {
      auto type = req.header("content-type");
      if (!type || *type != "application/merge-patch+json") {
        stream.respond({415,
                        "application/json",
                        {},
                        status_json(415, "UnsupportedMediaType", "unsupported patch type")});
        return;
      }
      boost::system::error_code ec;
      boost::json::value v = boost::json::parse(req.body, ec);
      const boost::json::value* r = nullptr;
      if (!ec && v.is_object()) {
        if (const auto* spec = v.as_object().if_contains("spec"); spec && spec->is_object()) {
          r = spec->as_object().if_contains("replicas");
        }
      }
      if (r == nullptr || !r->is_int64() || r->as_int64() < 0) {
        stream.respond({422,
                        "application/json",
                        {},
                        status_json(422, "Invalid", "spec.replicas: Invalid value")});
        return;
      }
      spec_replicas_ = static_cast<int32_t>(r->as_int64());
      scale_patches_.push_back(spec_replicas_);
    } else if (req.method != "GET") {
      stream.respond({405,
                      "application/json",
                      {},
                      status_json(405, "MethodNotAllowed", "method not allowed")});
      return;
    }
    stream.respond({200,
                    "application/json",
                    {},
                    boost::json::serialize(
                        boost::json::object{{"kind", "Scale"},
                                            {"apiVersion", "autoscaling/v1"},
                                            {"metadata",
                                             {{"name", deployment_},
                                              {"namespace", "llm"},
                                              {"resourceVersion", std::to_string(rv_)}}},
                                            {"spec", {{"replicas", spec_replicas_}}},
                                            {"status",
                                             {{"replicas", status_replicas_},
                                              {"selector", "app=vllm,pod-template-hash=6d8f"}}}})});
  }

  std::mutex mu_;
  std::string deployment_;  // empty: none
  int32_t spec_replicas_ = 0;
  int32_t status_replicas_ = 0;
  std::vector<int32_t> scale_patches_;
  std::string token_;
  std::map<std::string, Collection> collections_{
      {"Pod", {"/api/v1/namespaces/llm/pods", "PodList", "v1", {}, {}, {}}},
      {"EndpointSlice",
       {"/apis/discovery.k8s.io/v1/namespaces/llm/endpointslices",
        "EndpointSliceList",
        "discovery.k8s.io/v1",
        {},
        {},
        {}}},
      {"InferencePool",
       {"/apis/inference.networking.k8s.io/v1/namespaces/llm/inferencepools",
        "InferencePoolList",
        "inference.networking.k8s.io/v1",
        {},
        {},
        {}}}};
  int64_t rv_ = 1000;
  int64_t compacted_ = 0;
  bool http_410_ = false;
  int lists_ = 0;
  int gets_ = 0;
  int watch_count_ = 0;
  int unauthorized_ = 0;
  std::vector<std::string> watch_queries_;
  std::string last_token_;
  std::string error_;
  std::unique_ptr<io::HttpServer> server_;
};

}  // namespace kvgate::testing
