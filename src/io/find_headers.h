// find_headers: HeaderFields::find of several names in one pass over a request's fields,
// for a handler that reads a handful of optional headers from every request (most carry
// none of them): one pass costs about what one find does.
//
//   const std::string_view names[] = {"x-kvgate-priority", "x-session-id"};
//   std::optional<std::string_view> found[std::size(names)];
//   find_headers(req.fields, names, found);  // found[1]: the first x-session-id, if any
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include "io/ascii.h"
#include "io/http_types.h"

namespace kvgate::io {

// out[i] is the first field named names[i] (case-insensitive, as HeaderFields::find), or
// nullopt; an empty name finds nothing. REQUIRES: out.size() == names.size().
inline void find_headers(const HeaderFields& fields, std::span<const std::string_view> names,
                         std::span<std::optional<std::string_view>> out) {
  for (auto& o : out) o.reset();
  for (size_t i = 0; i < fields.size(); ++i) {
    const std::string_view field = fields.name(i);
    for (size_t k = 0; k < names.size(); ++k) {
      // The size first: most fields are none of the names.
      if (out[k] || field.size() != names[k].size() || field.empty()) continue;
      if (iequals(field, names[k])) out[k] = fields.value(i);
    }
  }
}

}  // namespace kvgate::io
