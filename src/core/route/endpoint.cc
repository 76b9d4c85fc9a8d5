#include "core/route/endpoint.h"

namespace kvgate::route {

std::string_view to_string(Health health) {
  switch (health) {
    case Health::kHealthy:
      return "healthy";
    case Health::kUnhealthy:
      return "unhealthy";
    case Health::kDraining:
      return "draining";
    case Health::kStandby:
      return "standby";
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
