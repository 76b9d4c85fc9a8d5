#include "core/common/yaml_node.h"

namespace kvgate {

std::string yaml_location(const YAML::Node& n) {
  const YAML::Mark m = n.Mark();
  if (m.line < 0) return "";
  return " (line " + std::to_string(m.line + 1) + ", column " + std::to_string(m.column + 1) + ")";
}

Error yaml_fail(const YAML::Node& n, const std::string& path, const std::string& what) {
  return Error(path + ": " + what + yaml_location(n));
}

Status expect_map(const YAML::Node& n, const std::string& path,
                  std::initializer_list<std::string_view> known) {
  if (!n.IsMap()) return yaml_fail(n, path, "expected a mapping");
  for (const auto& kv : n) {
    const std::string key = kv.first.Scalar();
    bool ok = false;
    for (std::string_view k : known) ok = ok || k == key;
    if (!ok) return yaml_fail(kv.first, path + "." + key, "unknown field");
  }
  return {};
}

}  // namespace kvgate
