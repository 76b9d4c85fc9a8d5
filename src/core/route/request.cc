#include "core/route/request.h"

namespace kvgate::route {

std::string_view to_string(Criticality c) {
  switch (c) {
    case Criticality::kCritical:
      return "critical";
    case Criticality::kStandard:
      return "standard";
    case Criticality::kSheddable:
      return "sheddable";
  }
  return "standard";
}

std::optional<Criticality> parse_criticality(std::string_view text) {
  if (text == "critical") return Criticality::kCritical;
  if (text == "standard") return Criticality::kStandard;
  if (text == "sheddable") return Criticality::kSheddable;
  return std::nullopt;
}

Criticality criticality_from_priority(int priority) {
  if (priority > 0) return Criticality::kCritical;
  if (priority < 0) return Criticality::kSheddable;
  return Criticality::kStandard;
}

}  // namespace kvgate::route
