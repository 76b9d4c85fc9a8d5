#include "core/engine/engine_config.h"

namespace kvgate::engine {

std::string_view role_name(Role role) {
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
  if (text == "both") return Role::kBoth;
  if (text == "prefill") return Role::kPrefill;
  if (text == "decode") return Role::kDecode;
  return std::nullopt;
}

}  // namespace kvgate::engine
