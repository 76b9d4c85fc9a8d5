// Multi-tenant workloads: several tenants, each sending its own workload with its own
// arrivals, merged in arrival order. What the flow-control studies run (noisy neighbour,
// priorities under overload; docs/flow-control.md).
//
//   workload:
//     kind: tenants
//     tenants:
//       - name: A
//         weight: 1                # fair share (flow control)
//         criticality: standard    # critical | standard | sheddable
//         deadline_ms: 0           # dispatch deadline (x-kvgate-deadline-ms); 0: none
//         workload: {kind: shared_prefix, shared_prefix: {...}, arrivals: {...}}
//       - name: B
//         workload: {...}
//
// Each tenant's workload gets its own seed (its prompts share nothing with the other
// tenants'). The merged workload has one report stage spanning every tenant's arrivals;
// WorkloadRequest::tenant says whose each request is.
#pragma once

#include <yaml-cpp/yaml.h>

#include <memory>
#include <string>
#include <string_view>

#include "core/common/result.h"
#include "workload/workload.h"

namespace kvgate::workload {

// REQUIRES: spec.kind == kTenants.
Result<std::unique_ptr<Workload>> make_tenant_workload(const WorkloadSpec& spec, uint64_t seed,
                                                       const ReadFile& read_file);

// Reads `workload.tenants` into `out` (kind, tenants, tenant_workloads). Errors as
// parse_workload's (workload_yaml.h): `file` names the scenario file (empty: none),
// `where` the list ("workload.tenants").
Status parse_tenants(const YAML::Node& node, const std::string& base_dir, WorkloadSpec& out,
                     std::string_view file, const std::string& where);

}  // namespace kvgate::workload
