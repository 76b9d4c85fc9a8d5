// parse_autoscale_node: the `autoscale:` section from a yaml-cpp node (see config_yaml.h).
//
// Separate from config_yaml.h so that only callers holding yaml-cpp nodes include
// yaml-cpp. `path` prefixes field names in errors ("pools[2].autoscale").
#pragma once

#include <yaml-cpp/yaml.h>

#include <initializer_list>
#include <string>
#include <string_view>

#include "core/common/result.h"
#include "core/common/yaml_node.h"
#include "core/scale/config.h"

namespace kvgate::scale {

Result<AutoscaleConfig> parse_autoscale_node(const YAML::Node& section,
                                             const std::string& path = "autoscale");

// The node helpers (core/common/yaml_node.h), under the names the gateway's `autoscale:`
// parser uses.
using kvgate::expect_map;
using kvgate::yaml_fail;
using kvgate::yaml_location;

}  // namespace kvgate::scale
