// parse_autoscale_node: the `autoscale:` section from a yaml-cpp node (see config_yaml.h).
//
// Separate from config_yaml.h so that only callers holding yaml-cpp nodes include
// yaml-cpp. `path` prefixes field names in errors ("pools[2].autoscale").
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

#include "core/common/result.h"
#include "core/scale/config.h"

namespace kvgate::scale {

Result<AutoscaleConfig> parse_autoscale_node(const YAML::Node& section,
                                             const std::string& path = "autoscale");

}  // namespace kvgate::scale
