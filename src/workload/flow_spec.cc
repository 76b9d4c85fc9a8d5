#include "workload/flow_spec.h"

#include <utility>
#include <vector>

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
                          route::FlowQueueConfig& out) {
  if (!node.IsMap()) return Error(where + ": expected a map");
  std::vector<std::pair<std::string, std::string>> entries;
  flatten(node, "", entries);
  if (Status s = route::apply_flow_entries(entries, out); !s)
    return Error(where + ": " + s.error());
  if (Status s = out.validate(); !s) return Error(where + ": " + s.error());
  return {};
}

}  // namespace kvgate::workload
