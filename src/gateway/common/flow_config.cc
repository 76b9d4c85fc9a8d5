#include "gateway/common/flow_config.h"

#include <fmt/format.h>

#include <string>
#include <utility>
#include <vector>

#include "core/common/yaml_reader.h"

namespace kvgate::gateway {

Result<route::FlowQueueConfig> parse_pool_flow(const YAML::Node& node, std::string_view field,
                                               std::string_view file) {
  const YamlReader y(file);
  if (!node.IsMap()) return y.error(node, field, "expected a mapping");
  route::FlowQueueConfig c;
  c.enabled = true;  // a section means flow control, unless it says enabled: false
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>("");
    const YAML::Node& v = kv.second;
    // The YAML keys carry units where the core's do not.
    std::string core_key = key;
    if (key == "starvation_bound_s") core_key = "starvation_bound";
    if (key == "max_wait_s") core_key = "max_wait";
    std::vector<std::pair<std::string, std::string>> entries;
    if (v.IsMap() && (core_key == "band_weights" || core_key == "max_wait")) {
      for (const auto& b : v) {
        entries.emplace_back(core_key + "." + b.first.as<std::string>(""),
                             b.second.as<std::string>(""));
      }
    } else if (v.IsScalar()) {
      if (key == "starvation_bound" || key == "max_wait" || key == "band_weights") {
        return y.error(kv.first, fmt::format("{}.{}", field, key), "unknown field");
      }
      entries.emplace_back(core_key, v.as<std::string>(""));
    } else {
      return y.error(v, fmt::format("{}.{}", field, key), "expected a value");
    }
    if (Status s = route::apply_flow_entries(entries, c); !s) {
      return y.error(v, fmt::format("{}.{}", field, key), s.error());
    }
  }
  if (Status s = c.validate(); !s) {
    return y.error(node, field, s.error());
  }
  return c;
}

}  // namespace kvgate::gateway
