#include "core/trace/otlp_json.h"

#include <fmt/format.h>

#include <cmath>
#include <iterator>
#include <type_traits>

namespace kvgate::trace {
namespace {

void append_string(std::string& out, std::string_view s) {
  out.push_back('"');
  for (char c : s) {
    switch (c) {
      case '"':
        out.append("\\\"");
        break;
      case '\\':
        out.append("\\\\");
        break;
      case '\n':
        out.append("\\n");
        break;
      case '\r':
        out.append("\\r");
        break;
      case '\t':
        out.append("\\t");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

void append_value(std::string& out, const Attribute& a) {
  std::visit(
      [&out](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          out.append("{\"stringValue\":");
          append_string(out, v);
          out.push_back('}');
        } else if constexpr (std::is_same_v<T, bool>) {
          out.append(v ? "{\"boolValue\":true}" : "{\"boolValue\":false}");
        } else if constexpr (std::is_same_v<T, int64_t>) {
          fmt::format_to(std::back_inserter(out), "{{\"intValue\":\"{}\"}}", v);
        } else {
          // JSON has no NaN or infinity: such a value is sent as 0.
          fmt::format_to(std::back_inserter(out), "{{\"doubleValue\":{}}}",
                         std::isfinite(v) ? v : 0.0);
        }
      },
      a.value);
}

void append_attributes(std::string& out, const std::vector<Attribute>& attributes) {
  out.append("\"attributes\":[");
  for (size_t i = 0; i < attributes.size(); ++i) {
    if (i > 0) out.push_back(',');
    out.append("{\"key\":");
    append_string(out, attributes[i].key);
    out.append(",\"value\":");
    append_value(out, attributes[i]);
    out.push_back('}');
  }
  out.push_back(']');
}

void append_span(std::string& out, const Span& s) {
  out.append("{\"traceId\":\"").append(to_hex(s.trace_id));
  out.append("\",\"spanId\":\"").append(to_hex(s.span_id)).push_back('"');
  if (s.parent_span_id != 0) {
    out.append(",\"parentSpanId\":\"").append(to_hex(s.parent_span_id)).push_back('"');
  }
  out.append(",\"name\":");
  append_string(out, s.name);
  fmt::format_to(std::back_inserter(out),
                 ",\"kind\":{},\"startTimeUnixNano\":\"{}\",\"endTimeUnixNano\":\"{}\",",
                 static_cast<int>(s.kind), s.start_unix_nanos, s.end_unix_nanos);
  append_attributes(out, s.attributes);
  fmt::format_to(std::back_inserter(out), ",\"status\":{{\"code\":{}", static_cast<int>(s.status));
  if (!s.status_message.empty()) {
    out.append(",\"message\":");
    append_string(out, s.status_message);
  }
  out.append("}}");
}

}  // namespace

std::string otlp_json(std::span<const Span> spans, std::string_view service_name) {
  std::string out;
  out.reserve(256 + spans.size() * 400);
  out.append(
      "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":"
      "{\"stringValue\":");
  append_string(out, service_name);
  out.append("}}]},\"scopeSpans\":[{\"scope\":{\"name\":\"kvgate\"},\"spans\":[");
  for (size_t i = 0; i < spans.size(); ++i) {
    if (i > 0) out.push_back(',');
    append_span(out, spans[i]);
  }
  out.append("]}]}]}");
  return out;
}

}  // namespace kvgate::trace
