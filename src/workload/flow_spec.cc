#include "workload/flow_spec.h"

#include <utility>
#include <vector>

#include "core/common/yaml_reader.h"

namespace kvgate::workload {
namespace {

void flatten(const YAML::Node& node, const std::string& prefix,
             std::vector<std::pair<std::string, std::string>>& out) {
  for (const auto& kv : node) {
    const std::string key = prefix + kv.first.as<std::string>("");
    if (kv.second.IsMap()) {
      flatten(kv.second, key + ".", out);
    } else {
      out.emplace_back(key, kv.second.as<std::string>(""));
    }
  }
}

}  // namespace

Status parse_flow_control(const YAML::Node& node, const std::string& where,
                          route::FlowQueueConfig& out, std::string_view file) {
  const YamlReader y(file);
  if (!node.IsMap()) return y.error(node, where, "expected a mapping");
  std::vector<std::pair<std::string, std::string>> entries;
  flatten(node, "", entries);
  if (Status s = route::apply_flow_entries(entries, out); !s)
    return y.error(node, where, s.error());
  if (Status s = out.validate(); !s) return y.error(node, where, s.error());
  return {};
}

}  // namespace kvgate::workload
