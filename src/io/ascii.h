// ascii: case-insensitive comparison of ASCII text, as HTTP field names and auth schemes
// are compared (RFC 9110: tokens are ASCII). Only 'A'-'Z' fold onto 'a'-'z'; other bytes,
// UTF-8 included, compare as they are. No locale is consulted (std::tolower would read it
// for every character).
//
//   io::iequals("Content-Length", "content-length")  // true
//   io::istarts_with("bearer abc", "Bearer ")        // true
#pragma once

#include <cstddef>
#include <string_view>

namespace kvgate::io {

constexpr char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

// True when `a` and `b` are equal ignoring the case of ASCII letters.
constexpr bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
  }
  return true;
}

// True when `s` begins with `prefix`, ignoring the case of ASCII letters.
constexpr bool istarts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && iequals(s.substr(0, prefix.size()), prefix);
}

static_assert(iequals("Content-Length", "content-LENGTH") && !iequals("a", "b") &&
              !iequals("ab", "a") && iequals("", ""));
static_assert(istarts_with("bEARER x", "Bearer ") && !istarts_with("Bear", "Bearer "));

}  // namespace kvgate::io
