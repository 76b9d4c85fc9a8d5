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
#pragma once

#include <boost/json/value.hpp>
#include <string>
#include <vector>

#include "core/discovery/reconciler.h"
#include "discovery/discovery_config.h"

namespace kvgate::discovery {

// metadata.name and metadata.resourceVersion ("" when absent).
std::string object_name(const boost::json::value& object);
std::string object_resource_version(const boost::json::value& object);

std::vector<DiscoveredEndpoint> pod_endpoints(const boost::json::value& pod,
                                              const KubernetesSourceConfig& config);
std::vector<DiscoveredEndpoint> slice_endpoints(const boost::json::value& slice,
                                                const KubernetesSourceConfig& config);

// The LIST path (with labelSelector) of the configured objects.
std::string list_path(const KubernetesSourceConfig& config, const std::string& ns);

}  // namespace kvgate::discovery
