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
// With `inference_pool: NAME` the pods and ports come from that InferencePool
// (inference.networking.k8s.io/v1): a second thread GETs the object, then WATCHes it
// (fieldSelector metadata.name=NAME), and each time its spec.selector or
// spec.targetPorts change, the pod watch in progress is interrupted and the pods are
// LISTed and WATCHed again with the new selector, each pod an endpoint per target port.
// Until the pool has been read once no pods are followed. A pool that is missing,
// deleted or malformed (k8s_objects.h says what is refused) is reported as an error
// (and logged once per distinct message); the pods of the last good spec stay followed.
//
// Credentials: a kubeconfig file (`kubeconfig:`), else the pod's service account
// (KUBERNETES_SERVICE_HOST/PORT, token_file, ca_file). The namespace: `namespace:`, else
// the kubeconfig context's, else the service account's, else "default".
// RBAC: get/list/watch on pods or endpointslices, and on inferencepools with an
// inference_pool (deploy/kubernetes/discovery-rbac.yaml).
#pragma once

#include <boost/json/value.hpp>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "discovery/k8s_objects.h"
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
  enum class WatchEnd : uint8_t { kResyncDue, kRewatch, kRelist, kReselect, kFailed, kStopped };
  void run();
  bool list(bool resync);  // false: failed (reported unless a reselection is due)
  WatchEnd watch(std::chrono::steady_clock::time_point resync_at);
  void report(bool resync);
  bool sleep_for(std::chrono::milliseconds d);  // false: stopping
  std::vector<DiscoveredEndpoint> endpoints_of(const boost::json::value& object) const;
  bool pool_mode() const { return !config_.inference_pool.empty(); }

  // inference_pool: the pool's thread, and what the pods' thread takes from it.
  void run_pool();
  // kExpired: a 410, watch again from the pool's current state (no resourceVersion).
  enum class PoolWatchEnd : uint8_t { kRewatch, kExpired, kFailed, kStopped };
  PoolWatchEnd watch_pool(const std::string& resource_version);
  void apply_pool(const boost::json::value& pool);
  void pool_error(const std::string& message);  // to the sink; logged once per message
  std::string pool_fallback();                  // what happens meanwhile, for the errors
  // Waits for the pool's first good spec, then takes the newest if it is not in use yet:
  // whether it was new; nullopt when stopping.
  std::optional<bool> take_target();
  bool reselect_due();  // a newer spec than the one in use

  const KubernetesSourceConfig config_;
  SourceSink& sink_;
  std::string ns_;
  std::string path_;
  std::unique_ptr<io::KubeClient> client_;
  std::unique_ptr<io::KubeClient> pool_client_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
  std::thread pool_thread_;

  // Guarded by mu_: the pool's last good spec and how many there have been.
  std::optional<InferencePoolTarget> target_;
  uint64_t target_generation_ = 0;

  // The pods' thread's.
  std::map<std::string, std::vector<DiscoveredEndpoint>> objects_;  // by object name
  std::string resource_version_;
  uint64_t used_generation_ = 0;  // of the spec path_ and ports_ come from
  std::vector<uint16_t> ports_;

  // The pool's thread's.
  std::string pool_resource_version_;
  std::string last_pool_error_;
};

}  // namespace kvgate::discovery
