// KubeScaleClient: a client of a Kubernetes Deployment's or StatefulSet's scale
// subresource: reads and sets its size. `kvgate serve`'s actuator of kind kubernetes acts
// through it when its pools run on Kubernetes.
//
// It talks to the API server's scale subresource, as `kubectl scale` and the HPA do:
//   GET   /apis/apps/v1/namespaces/NS/{deployments|statefulsets}/NAME/scale
//   PATCH (same path), Content-Type: application/merge-patch+json, {"spec":{"replicas":N}}
// authenticated with a bearer token and verifying the server against a CA bundle. In a
// pod, in_cluster_config() reads both from the service account's standard paths and the
// address from KUBERNETES_SERVICE_HOST/PORT; the token file is re-read on every call,
// because projected service-account tokens rotate. The RBAC it needs is in
// deploy/kubernetes/autoscaler-rbac.yaml (get and patch on deployments/scale and
// statefulsets/scale).
//
//   auto config = in_cluster_config();            // Result<KubeConfig>
//   KubeScaleClient k8s(*config);
//   Status s = k8s.set_replicas({"llm", KubeKind::kDeployment, "qwen-decode"}, 6);
//
// Calls block the calling thread for one HTTPS round trip (at most `timeout`); run them
// off the gateway's I/O threads. Thread-safe: each call uses its own connection.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "core/common/result.h"

namespace kvgate::io {

enum class KubeKind : uint8_t { kDeployment, kStatefulSet };

struct KubeTarget {
  std::string ns;
  KubeKind kind = KubeKind::kDeployment;
  std::string name;
};

// The API path of the target's scale subresource.
std::string scale_path(const KubeTarget& target);

struct KubeConfig {
  std::string host;  // DNS name or IPv4 address
  uint16_t port = 443;
  bool tls = true;         // false only for a local `kubectl proxy` (http://127.0.0.1:8001)
  std::string ca_pem;      // CA bundle the server certificate must chain to (tls)
  std::string token;       // bearer token; empty = none (kubectl proxy adds its own)
  std::string token_file;  // when set, the token is read from here on every call
  std::chrono::milliseconds timeout{10'000};
};

struct InClusterPaths {
  std::string token = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  std::string ca = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
  std::string ns = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
};

// From KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT and the service account files.
// Errors say what is missing ("not running in a pod: KUBERNETES_SERVICE_HOST is unset").
Result<KubeConfig> in_cluster_config(const InClusterPaths& paths = {});
// The pod's own namespace, from the service account (a default for KubeTarget::ns).
Result<std::string> in_cluster_namespace(const InClusterPaths& paths = {});

struct ScaleState {
  int32_t spec_replicas = 0;    // what was asked for
  int32_t status_replicas = 0;  // what the controller has created so far
};

class KubeScaleClient {
 public:
  explicit KubeScaleClient(KubeConfig config);

  // Errors carry the HTTP status and the API server's message, e.g.
  // "kubernetes: PATCH /apis/apps/v1/... -> 403: deployments.apps \"x\" is forbidden: ...".
  Result<ScaleState> get_scale(const KubeTarget& target) const;
  // REQUIRES: replicas >= 0.
  Result<ScaleState> set_replicas(const KubeTarget& target, int32_t replicas) const;

  // Marks a pod as cheap to delete (annotation controller.kubernetes.io/pod-deletion-cost,
  // honoured by ReplicaSets since Kubernetes 1.22): set it on the drained replicas before
  // lowering a Deployment's replicas, and the ReplicaSet removes those pods rather than
  // others. StatefulSets ignore it (they remove the highest ordinals).
  Status set_pod_deletion_cost(const std::string& ns, const std::string& pod, int32_t cost) const;

 private:
  KubeConfig config_;  // constant after construction
};

}  // namespace kvgate::io
