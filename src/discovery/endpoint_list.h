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

#include <string_view>
#include <vector>

#include "core/common/result.h"
#include "core/discovery/reconciler.h"

namespace kvgate::discovery {

// `kv_events_bind`: the pool binds one SUB socket; endpoints then name a `topic` and no
// publisher.
Result<std::vector<DiscoveredEndpoint>> parse_endpoint_list(std::string_view text,
                                                            std::string_view file,
                                                            bool kv_events_bind);

}  // namespace kvgate::discovery
