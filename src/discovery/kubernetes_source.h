// KubernetesSource: endpoints from the Kubernetes API, the way an InferencePool's pods
// or a Service's EndpointSlices are found (k8s_objects.h says what an object gives).
//
// LIST, then WATCH from the list's metadata.resourceVersion with allowWatchBookmarks
// (bookmarks move the resourceVersion on without changes), re-WATCHing from the last
// resourceVersion seen when the server ends a watch. A 410 Gone (a LIST or WATCH answer,
// or an ERROR event whose Status has code 410), any other ERROR event or a broken
// connection means LIST again (after `backoff` when it was a failure). Every `resync` a
// full LIST replaces the set even when the watch looks healthy; the reconciler counts
// each difference it finds (a watch that missed a DELETED shows up there). The token is
// read again for every request, so a rotated service-account token is picked up.
//
// Credentials: a kubeconfig file (`kubeconfig:`), else the pod's service account
// (KUBERNETES_SERVICE_HOST/PORT, token_file, ca_file). The namespace: `namespace:`, else
// the kubeconfig context's, else the service account's, else "default".
// RBAC: get/list/watch on pods or endpointslices (deploy/kubernetes/discovery-rbac.yaml).
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "discovery/source.h"
#include "io/k8s_client.h"

namespace kvgate::discovery {

class KubernetesSource : public EndpointSource {
 public:
  KubernetesSource(KubernetesSourceConfig config, SourceSink& sink);
  ~KubernetesSource() override;
  Status start() override;
  void stop() override;

  // What start() would refuse, with the same message, without starting: loads the
  // credentials start() loads (the kubeconfig file and the CA file it names, or the
  // service account's CA and token files with KUBERNETES_SERVICE_HOST set). Nothing is
  // sent to the API server: an unreachable one is not an error at start either.
  [[nodiscard]] static Status check(const KubernetesSourceConfig& config);

 private:
  enum class WatchEnd : uint8_t { kResyncDue, kRewatch, kRelist, kFailed, kStopped };
  void run();
  bool list(bool resync);  // false: failed (reported)
  WatchEnd watch(std::chrono::steady_clock::time_point resync_at);
  void report(bool resync);
  bool sleep_for(std::chrono::milliseconds d);  // false: stopping

  const KubernetesSourceConfig config_;
  SourceSink& sink_;
  std::string ns_;
  std::string path_;
  std::unique_ptr<io::KubeClient> client_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;

  // The thread's.
  std::map<std::string, std::vector<DiscoveredEndpoint>> objects_;  // by object name
  std::string resource_version_;
};

}  // namespace kvgate::discovery
