// parse_endpoint_list: a file source's text (YAML or JSON) in the `endpoints:` schema of
// the gateway config (docs/gateway.md), either the list itself or a mapping with an
// `endpoints:` key:
//
//   endpoints:
//     - http://10.0.0.7:8000
//     - url: http://10.0.0.8:8000
//       role: decode
//       zone: eu-west-1a
//       kv_events: {publisher: tcp://10.0.0.8:5557, replay: tcp://10.0.0.8:5558}
//     - url: http://10.0.0.9:8000   # vLLM --data-parallel-size 4: four endpoints,
//       data_parallel_size: 4        # http://10.0.0.9:8000#dp0 .. #dp3, rank r's KV
//       kv_events: {publisher: tcp://10.0.0.9:5557}  # events on port 5557 + r
//
// or ["http://10.0.0.7:8000", {"url": "http://10.0.0.8:8000", "role": "decode"}].
// Errors name file:line:column: field, e.g.
//   "/etc/kvgate/endpoints.yaml:4:12: endpoints[1].role: expected both, prefill or decode".
// An empty list is valid (the reconciler decides whether to believe it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.h"
#include "core/discovery/reconciler.h"

namespace YAML {
class Node;
}

namespace kvgate {
class YamlReader;
}

namespace kvgate::discovery {

// `kv_events_bind`: the pool binds one SUB socket; endpoints then name a `topic` and no
// publisher.
Result<std::vector<DiscoveredEndpoint>> parse_endpoint_list(std::string_view text,
                                                            std::string_view file,
                                                            bool kv_events_bind);

// Appends the endpoints of `e` serving `size` data-parallel ranks (route/data_parallel.h):
// size <= 1, `e` itself; else one endpoint per rank r, URL `e.spec.url#dpR`, its KV event
// publisher and replay ports + r as vLLM offsets them, the rest (readiness, role, labels,
// topic) as `e`'s. Every source with ranks (the file, DNS, Kubernetes) expands so.
void append_ranks(DiscoveredEndpoint e, uint32_t size, std::vector<DiscoveredEndpoint>& out);

// An endpoint's URL as the `endpoints:` schema takes it: http://host:port, a '/' after it
// or nothing (a data-parallel rank's "#dpN" split off first, route/data_parallel.h).
bool valid_endpoint_url(std::string_view url);
// A KV event publisher or replay address: tcp://host:port.
bool valid_zmq_url(std::string_view url);

// `v`, the `data_parallel_size` of an endpoint or a source at `field` ("endpoints[2]",
// "pools.main.discovery.sources[0]"): 1 to route::kMaxDataParallelSize, and not above 1
// with the pool's kv_events_bind (each rank publishes on its own port). Every reader of
// the key (the gateway's endpoints, the file, DNS and Kubernetes sources) reads it so.
// Throws YamlError naming `field`.data_parallel_size.
uint32_t read_data_parallel_size(const YamlReader& y, const YAML::Node& v, const std::string& field,
                                 bool kv_events_bind);

}  // namespace kvgate::discovery
