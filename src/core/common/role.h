// Role: what a server does in a disaggregated (prefill/decode) deployment. Shared by the
// engine model (what an engine does) and the router (what it may send an endpoint).
// llm-d labels pods the same way: `llm-d.ai/role` = prefill | decode | both.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kvgate {

enum class Role : uint8_t {
  kBoth,     // aggregated: prefills and decodes its own requests (the default)
  kPrefill,  // prefill only: every request finishes with its first token
  kDecode,   // decode: accepts requests whose prompt KV was transferred (and ordinary ones)
};

constexpr std::string_view to_string(Role role) {
  switch (role) {
    case Role::kPrefill:
      return "prefill";
    case Role::kDecode:
      return "decode";
    case Role::kBoth:
      break;
  }
  return "both";
}

// "both" | "prefill" | "decode" (also "aggregated" for kBoth); nullopt for anything else.
constexpr std::optional<Role> parse_role(std::string_view text) {
  if (text == "both" || text == "aggregated") return Role::kBoth;
  if (text == "prefill") return Role::kPrefill;
  if (text == "decode") return Role::kDecode;
  return std::nullopt;
}

}  // namespace kvgate
