// Parsing a pool's `autoscale:` section (YAML) into an AutoscaleConfig.
//
// The text is passed in; the core reads no files. Unknown keys are errors (a typo must
// not silently fall back to a default), and every error names its place and the field,
// in the format of every config error (core/common/yaml_reader.h; a text has no file):
//   "9:19: autoscale.behavior.scale_up.policies[0].type: expected pods or percent"
// Durations are a number of seconds or a string with a unit: "200ms", "15s", "5m", "24h".
// docs/autoscaler.md lists every field.
//
//   Result<AutoscaleConfig> c = parse_autoscale_yaml(text);  // root has `autoscale:`, or
//                                                              // is the section itself
// A caller that already holds a yaml-cpp node (the gateway's pool config) uses
// parse_autoscale_node in config_yaml_node.h, which keeps the file's line numbers and
// takes its name.
#pragma once

#include <string_view>

#include "core/common/result.h"
#include "core/scale/config.h"

namespace kvgate::scale {

Result<AutoscaleConfig> parse_autoscale_yaml(std::string_view text);

// "250ms", "1.5s", "5m", "24h", or a bare number of seconds.
Result<Nanos> parse_duration(std::string_view text);

}  // namespace kvgate::scale
