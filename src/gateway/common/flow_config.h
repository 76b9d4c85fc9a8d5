// A pool's `flow_control:` section in the gateway config (docs/flow-control.md):
//
//   pools:
//     chat:
//       flow_control:
//         enabled: true
//         shed_sheddable: false          # true: sheddable requests are refused, not queued
//         band_order: strict             # strict | weighted
//         band_weights: {critical: 16, standard: 4, sheddable: 1}
//         starvation_bound_s: 0          # a band waiting this long goes next (0: off)
//         max_requests: 10000            # queued requests in the pool
//         max_tokens: 0                  # queued prompt + expected output tokens (0: none)
//         tenant_max_requests: 0
//         tenant_max_tokens: 0
//         max_wait_s: {critical: 30, standard: 30, sheddable: 30}   # or one number; 0: none
//         input_weight: 1                # VTC: counter cost of a prompt token
//         output_weight: 2               # ... and of an output token
//         default_output_tokens: 256     # charged when a request sets no max_tokens
//         targets_first: false           # true: requests with a TTFT target leave first in
//                                        # their band, due first first
//         prefill_threshold: 0           # prompt tokens routed to an endpoint without a
//                                        # first token at which it has no room (0: off)
//
// Errors are in the format of every config error (core/common/yaml_reader.h):
//   "f.yaml:7:7: pools.main.flow_control.max_request: unknown field".
#pragma once

#include <yaml-cpp/yaml.h>

#include <string_view>

#include "core/common/result.h"
#include "core/route/flow_queue.h"

namespace kvgate::gateway {

Result<route::FlowQueueConfig> parse_pool_flow(const YAML::Node& node, std::string_view field,
                                               std::string_view file);

}  // namespace kvgate::gateway
