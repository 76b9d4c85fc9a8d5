// Factories of kvgate's built-in filters, policies and scorers; register_builtins()
// (registry.cc) is their only user. Each parses its PolicyConfig::params with
// ParamReader and rejects unknown keys.
#pragma once

#include <memory>

#include "core/common/result.h"
#include "core/route/config.h"
#include "core/route/policy.h"

namespace kvgate::route {

class Registry;

namespace builtin {

// filters.cc
Result<std::unique_ptr<Filter>> make_healthy_filter(const PolicyConfig&, const Registry&);
Result<std::unique_ptr<Filter>> make_saturation_filter(const PolicyConfig&, const Registry&);

// basic_policies.cc
Result<std::unique_ptr<Policy>> make_random(const PolicyConfig&, const Registry&);
Result<std::unique_ptr<Policy>> make_round_robin(const PolicyConfig&, const Registry&);
Result<std::unique_ptr<Policy>> make_least_request(const PolicyConfig&, const Registry&);
Result<std::unique_ptr<Policy>> make_power_of_two(const PolicyConfig&, const Registry&);

// kv_cost_policy.cc
Result<std::unique_ptr<Policy>> make_kv_cost(const PolicyConfig&, const Registry&);
// kv-cost's default cpu_block_credit: what a block held only in host memory is worth
// against one in GPU memory, 1 - (time to load it back) / (time to compute it), from the
// engine model (engine::host_block_credit: 0.947 for h100-qwen2.5-7b, 0.954 for
// 2xh100-qwen3-32b; docs/engine-model.md). A unit test keeps the two in step.
inline constexpr double kDefaultCpuBlockCredit = 0.95;
// kv-cost's default disk_block_credit: the same for a block held only on disk, whose load
// reads it into host memory and then copies it in (engine::disk_block_credit: 0.41 for
// h100-qwen2.5-7b, 0.49 for 2xh100-qwen3-32b, with the profiles' assumed 5 GB/s of disk
// reads per GPU; docs/engine-model.md). 0.45 lies within 0.05 of both; a unit test keeps
// it so.
inline constexpr double kDefaultDiskBlockCredit = 0.45;

// approx_prefix_policy.cc
Result<std::unique_ptr<Policy>> make_approx_prefix(const PolicyConfig&, const Registry&);

// scorers.cc
Result<std::unique_ptr<Scorer>> make_queue_scorer(const PolicyConfig&, const Registry&);
Result<std::unique_ptr<Scorer>> make_kv_utilization_scorer(const PolicyConfig&, const Registry&);
Result<std::unique_ptr<Scorer>> make_prefix_scorer(const PolicyConfig&, const Registry&);
Result<std::unique_ptr<Policy>> make_scorers(const PolicyConfig&, const Registry&);
Result<std::unique_ptr<Policy>> make_load(const PolicyConfig&, const Registry&);

}  // namespace builtin
}  // namespace kvgate::route
