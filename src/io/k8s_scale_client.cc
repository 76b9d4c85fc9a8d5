#include "io/k8s_scale_client.h"

#include <boost/json.hpp>
#include <cstdlib>
#include <utility>

#include "env/file.h"
#include "io/k8s_client.h"

namespace kvgate::io {

namespace json = boost::json;

namespace {

using env::read_file;

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// One call through the shared client (k8s_client.h), its own connection; a status other
// than 2xx is an error carrying the API server's own explanation (a Status object's
// "message").
Result<KubeReply> perform(const KubeConfig& c, const KubeClient::Request& request) {
  KubeClient client(c);
  Result<KubeReply> reply = client.send(request);
  if (!reply) return reply;
  if (reply->status < 200 || reply->status >= 300) {
    std::string message = reply->body.substr(0, 200);
    boost::system::error_code ec;
    json::value v = json::parse(reply->body, ec);
    if (!ec && v.is_object()) {
      if (const json::value* m = v.as_object().if_contains("message"); m && m->is_string()) {
        message = std::string(m->as_string());
      }
    }
    return Error("kubernetes: " + request.method + " " + request.target + " -> " +
                 std::to_string(reply->status) + ": " + message);
  }
  return reply;
}

Result<ScaleState> parse_scale(const std::string& body) {
  boost::system::error_code ec;
  json::value v = json::parse(body, ec);
  if (ec || !v.is_object()) return Error("kubernetes: scale response is not a JSON object");
  ScaleState s;
  const auto read = [](const json::value& root, const char* section, int32_t& out) {
    const json::value* sec = root.as_object().if_contains(section);
    if (sec == nullptr || !sec->is_object()) return;
    const json::value* r = sec->as_object().if_contains("replicas");
    if (r != nullptr && r->is_int64()) out = static_cast<int32_t>(r->as_int64());
  };
  read(v, "spec", s.spec_replicas);
  read(v, "status", s.status_replicas);
  return s;
}

}  // namespace

std::string scale_path(const KubeTarget& t) {
  return "/apis/apps/v1/namespaces/" + t.ns + "/" +
         (t.kind == KubeKind::kDeployment ? "deployments" : "statefulsets") + "/" + t.name +
         "/scale";
}

Result<KubeConfig> in_cluster_config(const InClusterPaths& paths) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || *host == '\0') {
    return Error("not running in a pod: KUBERNETES_SERVICE_HOST is unset");
  }
  KubeConfig c;
  c.host = host;
  if (port != nullptr && *port != '\0') {
    char* end = nullptr;
    const long p = std::strtol(port, &end, 10);
    if (*end != '\0' || p <= 0 || p > 65535) {
      return Error(std::string("KUBERNETES_SERVICE_PORT: not a port: ") + port);
    }
    c.port = static_cast<uint16_t>(p);
  }
  Result<std::string> ca = read_file(paths.ca);
  if (!ca) return Error("service account CA: " + ca.error());
  c.ca_pem = std::move(*ca);
  Result<std::string> token = read_file(paths.token);
  if (!token) return Error("service account token: " + token.error());
  c.token_file = paths.token;
  return c;
}

Result<std::string> in_cluster_namespace(const InClusterPaths& paths) {
  Result<std::string> ns = read_file(paths.ns);
  if (!ns) return Error("service account namespace: " + ns.error());
  return trim(std::move(*ns));
}

KubeScaleClient::KubeScaleClient(KubeConfig config) : config_(std::move(config)) {}

Result<ScaleState> KubeScaleClient::get_scale(const KubeTarget& target) const {
  Result<KubeReply> r = perform(config_, {.method = "GET", .target = scale_path(target)});
  if (!r) return Error(r.error());
  return parse_scale(r->body);
}

Result<ScaleState> KubeScaleClient::set_replicas(const KubeTarget& target, int32_t replicas) const {
  if (replicas < 0) return Error("kubernetes: replicas must be >= 0");
  const std::string body = "{\"spec\":{\"replicas\":" + std::to_string(replicas) + "}}";
  Result<KubeReply> r = perform(config_, {.method = "PATCH",
                                          .target = scale_path(target),
                                          .body = body,
                                          .content_type = "application/merge-patch+json"});
  if (!r) return Error(r.error());
  return parse_scale(r->body);
}

Status KubeScaleClient::set_pod_deletion_cost(const std::string& ns, const std::string& pod,
                                              int32_t cost) const {
  json::object patch{
      {"metadata",
       json::object{{"annotations", json::object{{"controller.kubernetes.io/pod-deletion-cost",
                                                  std::to_string(cost)}}}}}};
  Result<KubeReply> r = perform(config_, {.method = "PATCH",
                                          .target = "/api/v1/namespaces/" + ns + "/pods/" + pod,
                                          .body = json::serialize(patch),
                                          .content_type = "application/merge-patch+json"});
  if (!r) return Error(r.error());
  return {};
}

}  // namespace kvgate::io
