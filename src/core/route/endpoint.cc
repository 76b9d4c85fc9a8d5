#include "core/route/endpoint.h"

#include <algorithm>

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

bool LoraActivity::active(std::string_view adapter) const {
  return std::find(running.begin(), running.end(), adapter) != running.end() ||
         std::find(waiting.begin(), waiting.end(), adapter) != waiting.end();
}

bool LoraActivity::has_free_slot() const {
  if (max_loras == 0) return true;  // not reported: nothing says it is full
  size_t in_use = running.size();
  for (const std::string& w : waiting) {
    if (std::find(running.begin(), running.end(), w) == running.end()) ++in_use;
  }
  return in_use < max_loras;
}

bool LoraPlaced::has(std::string_view adapter) const {
  return std::find(loaded.begin(), loaded.end(), adapter) != loaded.end();
}

bool LoraPlaced::is_loading(std::string_view adapter) const {
  return std::find(loading.begin(), loading.end(), adapter) != loading.end();
}

std::string_view EndpointSpec::label(std::string_view key) const {
  for (const auto& [k, v] : labels) {
    if (k == key) return v;
  }
  return {};
}

}  // namespace kvgate::route
