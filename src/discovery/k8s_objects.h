// What a Kubernetes object says about endpoints: a Pod (core/v1) or an EndpointSlice
// (discovery.k8s.io/v1), as the API server serves them in a LIST's items or a WATCH
// event's object. Pure functions of the JSON, unit-tested on objects shaped as the API
// reference documents them.
//
// A Pod gives one endpoint, http://status.podIP:PORT with PORT the container port named
// `port_name`; it is ready while status.phase is Running, its Ready condition is True
// and metadata.deletionTimestamp is unset (a terminating pod drains). Role, zone, rack
// and free-form labels come from its labels (names in the config), the KV events
// publisher/replay ports and topic from its annotations.
//
// An EndpointSlice gives one endpoint per entry of `endpoints`, at its first address
// (an entry's addresses are one backend's, fungible) and the slice port named
// `port_name` (or its only port); ready unless conditions.ready is
// false or conditions.terminating is true (an absent ready condition counts as ready, as
// the API reference says consumers should); the zone from the entry's `zone`; KV event
// ports from slice ports named `kv-events` and `kv-replay`.
//
// An InferencePool (inference.networking.k8s.io/v1, the Gateway API Inference
// Extension's) names its pods by spec.selector.matchLabels and their ports by
// spec.targetPorts[].number: each port of a pod is an endpoint of its own
// (http://PODIP:PORT), as a GIE endpoint picker treats them. Its KV events ports then
// come from the pod's annotations as a comma-separated list, one entry per target port
// in order ("5557,5567"); one entry serves the first port only.
//
// Data-parallel ranks (route/data_parallel.h): every endpoint above becomes
// `data_parallel_size` endpoints, URL#dp0 .. (rank r's KV event ports + r), the size the
// source's, or for a pod its annotation `data_parallel_size_annotation` when present
// (kvgate.io/data-parallel-size: "4"). A pod whose annotation is not a size (1 to
// route::kMaxDataParallelSize) gives no endpoints: routed with a wrong number of ranks it
// would be sent ranks it lacks (vLLM answers 400) or leave ranks idle.
#pragma once

#include <boost/json/value.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "core/common/result.h"
#include "core/discovery/reconciler.h"
#include "discovery/discovery_config.h"

namespace kvgate::discovery {

// metadata.name and metadata.resourceVersion ("" when absent).
std::string object_name(const boost::json::value& object);
std::string object_resource_version(const boost::json::value& object);

std::vector<DiscoveredEndpoint> pod_endpoints(const boost::json::value& pod,
                                              const KubernetesSourceConfig& config);
// The pod's endpoints at the given ports (an InferencePool's targetPorts), one per port
// in order; its named container ports are not consulted.
std::vector<DiscoveredEndpoint> pod_endpoints(const boost::json::value& pod,
                                              const KubernetesSourceConfig& config,
                                              const std::vector<uint16_t>& ports);
// The data-parallel ranks behind each of the pod's endpoints: its annotation's, else the
// source's data_parallel_size. Error: an annotation that is not a size, naming the pod.
Result<uint32_t> pod_data_parallel_size(const boost::json::value& pod,
                                        const KubernetesSourceConfig& config);
std::vector<DiscoveredEndpoint> slice_endpoints(const boost::json::value& slice,
                                                const KubernetesSourceConfig& config);

// The LIST path (with labelSelector) of the configured objects.
std::string list_path(const KubernetesSourceConfig& config, const std::string& ns);
// The LIST path of the pods `selector` (a label selector) picks in `ns`.
std::string pods_list_path(const std::string& ns, const std::string& selector);

// What an InferencePool gives discovery: its pods' label selector (matchLabels as
// `key=value` terms joined by commas, keys sorted) and its target ports, in order.
struct InferencePoolTarget {
  std::string selector;
  std::vector<uint16_t> ports;
  bool operator==(const InferencePoolTarget&) const = default;
};
// Errors name the field at fault: no spec.selector.matchLabels (or an empty one: it would
// select every pod of the namespace), a label that is not a Kubernetes label, no
// spec.targetPorts, a port number outside 1..65535 or given twice, more than 8 ports,
// an appProtocol other than http (kvgate speaks HTTP/1.1 to engines).
Result<InferencePoolTarget> inference_pool_target(const boost::json::value& pool);
// GET of the object, and the WATCH path (a fieldSelector on its name; the caller adds
// watch=1 and the rest).
std::string inference_pool_path(const std::string& ns, const std::string& name);
std::string inference_pool_watch_path(const std::string& ns, const std::string& name);

}  // namespace kvgate::discovery
