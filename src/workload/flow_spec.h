// A policy's `flow_control:` section in a simulator scenario: the same keys as the
// gateway's per-pool `flow_control:` (route::apply_flow_entries), nested maps allowed:
//
//   policies:
//     - name: fair
//       policy: load
//       flow_control: {enabled: true, max_wait: {critical: 60, standard: 60, sheddable: 5},
//                      band_order: strict, input_weight: 1, output_weight: 2}
//       tenants: [B]        # optional: only these tenants send (a baseline run)
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>

#include "core/common/result.h"
#include "core/route/flow_queue.h"

namespace kvgate::workload {

// Errors name the scenario file (`file`; empty: none), the place and `where`, as every
// config error (core/common/yaml_reader.h).
Status parse_flow_control(const YAML::Node& node, const std::string& where,
                          route::FlowQueueConfig& out, std::string_view file = {});

}  // namespace kvgate::workload
