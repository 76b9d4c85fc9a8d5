// Helpers for reading yaml-cpp nodes into config structs with errors that name the field
// and its place in the file. Shared by every config reader of the core (router,
// autoscaler); the shells add the file name.
#pragma once

#include <yaml-cpp/yaml.h>

#include <initializer_list>
#include <string>
#include <string_view>

#include "core/common/result.h"

namespace kvgate {

// " (line L, column C)" for a node from a file, "" otherwise.
std::string yaml_location(const YAML::Node& n);
// "PATH: WHAT (line L, column C)".
Error yaml_fail(const YAML::Node& n, const std::string& path, const std::string& what);
// A mapping whose keys are all in `known`; else the first unknown key is the error.
Status expect_map(const YAML::Node& n, const std::string& path,
                  std::initializer_list<std::string_view> known);

}  // namespace kvgate
