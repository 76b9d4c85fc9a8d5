#include "core/route/endpoint.h"

namespace kvgate::route {

std::string_view to_string(Role role) {
  switch (role) {
    case Role::kBoth:
      return "both";
    case Role::kPrefill:
      return "prefill";
    case Role::kDecode:
      return "decode";
  }
  return "both";
}

std::optional<Role> parse_role(std::string_view text) {
  if (text == "both" || text == "aggregated") return Role::kBoth;
  if (text == "prefill") return Role::kPrefill;
  if (text == "decode") return Role::kDecode;
  return std::nullopt;
}

std::string_view to_string(Health health) {
  switch (health) {
    case Health::kHealthy:
      return "healthy";
    case Health::kUnhealthy:
      return "unhealthy";
    case Health::kDraining:
      return "draining";
  }
  return "healthy";
}

std::string_view EndpointSpec::label(std::string_view key) const {
  for (const auto& [k, v] : labels) {
    if (k == key) return v;
  }
  return {};
}

}  // namespace kvgate::route
