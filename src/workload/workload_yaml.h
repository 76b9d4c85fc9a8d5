// Reads a WorkloadSpec from a scenario's `workload:` YAML node.
//
//   workload:
//     kind: shared_prefix            # shared_prefix | chat | trace
//     shared_prefix: {groups: 150, prompts_per_group: 5, system_prompt_tokens: 6000,
//                     question_tokens: 1200, output_tokens: 1000, order: cycle}
//                     # output_tokens_min: 50  -> answer lengths uniform in [50, 1000]
//     arrivals:
//       kind: poisson                # poisson | constant | diurnal
//       stages: [{qps: 15, duration_s: 50, warmup: true}, {qps: 3, duration_s: 20}]
//       # diurnal: {mean_qps, amplitude, period_s, phase, duration_s, stage_s}
//     trace: {path: mooncake.jsonl, block_tokens: 512, time_scale: 1.0, max_requests: 0}
//     chat: {system_prompts, system_prompt_tokens, min_turns, max_turns, user_tokens,
//            output_tokens, think_time_s}
// inference-perf's stage keys (`rate`, `duration`) are accepted as aliases. A relative
// trace path is taken relative to `base_dir` (the scenario file's directory).
//
// Errors are in the format of every config error (core/common/yaml_reader.h), `file`
// naming the scenario file (empty: none) and `where` the section:
//   "sim.yaml:14:9: workload.arrivals.stages[0]: need qps >= 0 and duration_s > 0"
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>

#include "core/common/result.h"
#include "workload/workload.h"

namespace kvgate::workload {

Result<WorkloadSpec> parse_workload(const YAML::Node& node, const std::string& base_dir,
                                    std::string_view file = {},
                                    const std::string& where = "workload");

}  // namespace kvgate::workload
