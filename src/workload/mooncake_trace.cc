#include "workload/mooncake_trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/json.hpp>

namespace kvgate::workload {
namespace {

Result<int64_t> get_int(const boost::json::object& o, std::string_view key) {
  const boost::json::value* v = o.if_contains(key);
  if (v == nullptr) return Error(fmt::format("missing \"{}\"", key));
  if (v->is_int64()) return v->as_int64();
  if (v->is_uint64()) return static_cast<int64_t>(v->as_uint64());
  if (v->is_double()) return static_cast<int64_t>(v->as_double());
  return Error(fmt::format("\"{}\" is not a number", key));
}

}  // namespace

Result<TraceRecord> parse_trace_line(std::string_view line) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(line, ec);
  if (ec) return Error("not JSON: " + ec.message());
  if (!v.is_object()) return Error("not a JSON object");
  const auto& o = v.get_object();
  TraceRecord r;
  auto ts = get_int(o, "timestamp");
  if (!ts) return Error(ts.error());
  auto in = get_int(o, "input_length");
  if (!in) return Error(in.error());
  auto out = get_int(o, "output_length");
  if (!out) return Error(out.error());
  if (*in < 0 || *out < 0 || *in > (1 << 24) || *out > (1 << 24)) {
    return Error("lengths out of range");
  }
  r.timestamp_ms = *ts;
  r.input_length = static_cast<uint32_t>(*in);
  r.output_length = static_cast<uint32_t>(*out);
  if (const boost::json::value* h = o.if_contains("hash_ids")) {
    if (!h->is_array()) return Error("\"hash_ids\" is not an array");
    for (const auto& id : h->get_array()) {
      if (id.is_int64()) {
        r.hash_ids.push_back(static_cast<uint64_t>(id.as_int64()));
      } else if (id.is_uint64()) {
        r.hash_ids.push_back(id.as_uint64());
      } else {
        return Error("\"hash_ids\" holds a non-integer");
      }
    }
  }
  return r;
}

Result<std::vector<TraceRecord>> parse_trace(std::string_view text, const std::string& name,
                                             uint64_t max_records) {
  std::vector<TraceRecord> records;
  uint64_t line_no = 0;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    const std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    auto r = parse_trace_line(line);
    if (!r) return Error(name + ":" + std::to_string(line_no) + ": " + r.error());
    records.push_back(std::move(*r));
    if (max_records > 0 && records.size() >= max_records) break;
  }
  std::stable_sort(records.begin(), records.end(), [](const TraceRecord& a, const TraceRecord& b) {
    return a.timestamp_ms < b.timestamp_ms;
  });
  return records;
}

}  // namespace kvgate::workload
