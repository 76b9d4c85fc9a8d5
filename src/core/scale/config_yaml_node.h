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
#include "core/scale/config.h"

namespace kvgate::scale {

Result<AutoscaleConfig> parse_autoscale_node(const YAML::Node& section,
                                             const std::string& path = "autoscale");

// Pieces of the parser that the gateway's `autoscale:` parser shares.
// " (line L, column C)" for a node from a file, "" otherwise.
std::string yaml_location(const YAML::Node& n);
// "PATH: WHAT (line L, column C)".
Error yaml_fail(const YAML::Node& n, const std::string& path, const std::string& what);
// A mapping whose keys are all in `known`; else the first unknown key is the error.
Status expect_map(const YAML::Node& n, const std::string& path,
                  std::initializer_list<std::string_view> known);

}  // namespace kvgate::scale
