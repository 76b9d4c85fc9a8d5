// parse_autoscale_node: the `autoscale:` section from a yaml-cpp node (see config_yaml.h).
//
// Separate from config_yaml.h so that only callers holding yaml-cpp nodes include
// yaml-cpp. `path` prefixes field names in errors ("pools[2].autoscale"), `file` (the
// shell's config file; empty: none) names the file: errors are in the format of every
// config error (core/common/yaml_reader.h),
//   "fleet.yaml:9:19: pools.main.autoscale.behavior.scale_up.policies[0].type: expected
//    pods or percent".
// Keys in `shell_keys` are the caller's, beside the policy's (kvgate serve's `actuator`,
// `interval`, `window`): skipped; any other unknown key is an error.
#pragma once

#include <yaml-cpp/yaml.h>

#include <initializer_list>
#include <string>
#include <string_view>

#include "core/common/result.h"
#include "core/scale/config.h"

namespace kvgate::scale {

Result<AutoscaleConfig> parse_autoscale_node(
    const YAML::Node& section, const std::string& path = "autoscale",
    std::initializer_list<std::string_view> shell_keys = {}, std::string_view file = {});

}  // namespace kvgate::scale
