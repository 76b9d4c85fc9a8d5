// Small helpers for reading scenario YAML with error messages that name the field.
//
// yaml-cpp throws on a type mismatch; these catch it and return a Result so that a bad
// scenario file is reported, never a crash (DESIGN.md, "Errors").
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

#include "core/common/result.h"

namespace kvgate::workload {

// Reads `node[key]` into `out` when present; leaves `out` unchanged when absent.
template <typename T>
Status read_field(const YAML::Node& node, const char* key, T& out, const std::string& where) {
  try {
    const YAML::Node v = node[key];
    if (v && !v.IsNull()) out = v.as<T>();
    return {};
  } catch (const YAML::Exception& e) {
    return Error(where + "." + key + ": " + e.what());
  }
}

// Fails when `node` has a key not in `known` (catches typos in scenario files).
Status check_keys(const YAML::Node& node, std::initializer_list<const char*> known,
                  const std::string& where);

}  // namespace kvgate::workload
