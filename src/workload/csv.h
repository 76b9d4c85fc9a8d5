// csv_field: one field of the CSV files that `kvgate sim` and `kvgate bench` write, as
// RFC 4180 wants it. A field holding a comma, a double quote, CR or LF is enclosed in
// double quotes, with each double quote inside doubled; any other field is written as it
// is. Every text field of every CSV goes through it (run and policy names, tenants: a run
// named "on, late_binding any" is one field); numbers need not.
//
//   out += fmt::format("{},{:.4f}\n", csv_field(run.policy), ttft);
#pragma once

#include <string>
#include <string_view>

namespace kvgate::workload {

inline std::string csv_field(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
  std::string out;
  out.reserve(text.size() + 2);
  out += '"';
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

}  // namespace kvgate::workload
