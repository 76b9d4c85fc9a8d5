// read_router_section: the one reader of a router's configuration, for every shell.
//
// `kvgate serve` reads a pool's `router:` section with it, `kvgate sim` a policy entry of
// its scenario (whose router keys sit beside the simulator's own), and the admin API the
// body of PATCH/PUT /admin/pools/NAME/policy (JSON is YAML, so the body is read by the
// same code). One key set, one set of defaults (RouterConfig's), documented once in
// docs/router.md:
//
//   policy: kv-cost                 # any policy of docs/router.md
//   params: {overlap_weight: 2}     # the policy's own parameters (null removes one)
//   filters: [saturation]           # names, or {name: .., params: {..}}; [] for none
//   overlap: approx                 # none | precise | approx | both
//   record_decisions: true
//   prefill_tokens_per_second: 10000
//   saturation: {queue_threshold: 5, kv_threshold: 0.8, critical_max_waiting: 50,
//                shed: true, metrics_max_age: 5s}
//   pd: {mode: auto, locality_weight: 64, local_prefill_max_tokens: 0}
//   early_reject: {enabled: false, max_usage: 0.95, decode_seconds_per_token: 0.03,
//                  predict: true}
//   session_affinity: {header: x-session-id, capacity: 100000, idle_ttl: 30m,
//                      max_extra_requests: 8, max_load_ratio: 1.5}
//                                   # the section (or `session_affinity: true`) turns
//                                   # it on; `enabled: false` keeps it off
//   latency_targets: {enabled: false, headroom: 0.1, action: best_effort, forgetting: 0.995,
//                     min_samples: 16, prior_prefill_tokens_per_second: 10000,
//                     prior_tpot: 30ms}
//
// A nested key may also be written dotted at the top (`saturation.shed: false`,
// `params.overlap_weight: 2`). Naming a policy other than the current one starts it from
// its own defaults (its params are cleared before `params` applies). Durations are
// seconds or a string with a unit ("500ms", "5s").
//
// Errors name the file, the place and the field, in the format of every config error
// (core/common/yaml_reader.h): "fleet.yaml:12:14: pools.a.router.saturation.shed: expected
// true or false"; without a file name (the admin API's body) "1:23: saturation.shed: ...".
// The result is validate()d; the policy's own parameters are checked when the router is
// built (Router::create).
#pragma once

#include <yaml-cpp/yaml.h>

#include <initializer_list>
#include <string>
#include <string_view>

#include "core/common/result.h"
#include "core/route/config.h"

namespace kvgate::route {

// Applies the router keys of `section` (a mapping) on top of `config`. Keys listed in
// `shell_keys` belong to the caller and are skipped; any other unknown key is an error.
// `path` prefixes field names in errors, `file` (the shell's config file; empty: none)
// names the file. On error `config` may be partly changed.
Status read_router_section(const YAML::Node& section, const std::string& path, RouterConfig& config,
                           std::initializer_list<std::string_view> shell_keys = {},
                           std::string_view file = {});

}  // namespace kvgate::route
