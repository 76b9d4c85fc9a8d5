// The OTLP JSON encoding of Span records (otlp_json.h), appended piece by piece to a
// std::string: the general encoder, and the reference the tests hold the encoder of the
// gateway's records (otlp_json_records.cc) to, byte for byte.
#include "core/trace/otlp_json.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/trace/json_cursor.h"

namespace kvgate::trace {
namespace {

// A literal, its length known at compile time (no strlen per call).
template <size_t N>
std::string& put(std::string& out, const char (&literal)[N]) {
  return out.append(literal, N - 1);
}

// A JSON string: runs of bytes that need no escape (printable ASCII, valid UTF-8) are
// copied at once, printable ASCII scanned 8 bytes at a time; the rest escaped one byte at
// a time.
void append_string(std::string& out, std::string_view s) {
  out.push_back('"');
  const char* const p = s.data();
  size_t run = 0;  // where the run of bytes copied as they are began
  size_t i = 0;
  while (i < s.size()) {
    if (i + 8 <= s.size()) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      if (!json_needs_look(w)) {
        i += 8;
        continue;
      }
    }
    const auto c = static_cast<unsigned char>(p[i]);
    if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
      ++i;
      continue;
    }
    if (c >= 0x80) {
      if (const size_t n = utf8_length(s, i); n > 0) {
        i += n;
        continue;
      }
    }
    out.append(p + run, i - run);
    switch (c) {
      case '"':
        put(out, "\\\"");
        break;
      case '\\':
        put(out, "\\\\");
        break;
      case '\n':
        put(out, "\\n");
        break;
      case '\r':
        put(out, "\\r");
        break;
      case '\t':
        put(out, "\\t");
        break;
      default:
        if (c >= 0x80) {
          // A protobuf string is UTF-8: a collector refuses the whole request otherwise.
          put(out, "\xef\xbf\xbd");  // U+FFFD
        } else {
          static constexpr char kDigits[] = "0123456789abcdef";
          const char esc[] = {'\\', 'u', '0', '0', kDigits[c >> 4], kDigits[c & 0xf]};
          out.append(esc, sizeof esc);
        }
    }
    run = ++i;
  }
  out.append(p + run, s.size() - run);
  out.push_back('"');
}

// An integer in decimal.
void append_int(std::string& out, int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, static_cast<size_t>(r.ptr - buf));
}

// A double's AnyValue: {"doubleValue":...}.
void append_double_value(std::string& out, double v) {
  if (std::isfinite(v)) {
    char buf[kDoubleBound];
    const char* const end = write_double(buf, v);  // {fmt}'s "{}"
    put(out, "{\"doubleValue\":").append(buf, static_cast<size_t>(end - buf)).push_back('}');
  } else {
    // JSON has no NaN or infinity: proto3 JSON spells them as strings.
    out.append(std::isnan(v) ? "{\"doubleValue\":\"NaN\"}"
               : v > 0       ? "{\"doubleValue\":\"Infinity\"}"
                             : "{\"doubleValue\":\"-Infinity\"}");
  }
}

void append_value(std::string& out, const Attribute& a) {
  std::visit(
      [&out](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          put(out, "{\"stringValue\":");
          append_string(out, v);
          out.push_back('}');
        } else if constexpr (std::is_same_v<T, bool>) {
          out.append(v ? "{\"boolValue\":true}" : "{\"boolValue\":false}");
        } else if constexpr (std::is_same_v<T, int64_t>) {
          put(out, "{\"intValue\":\"");
          append_int(out, v);
          put(out, "\"}");
        } else {
          append_double_value(out, v);
        }
      },
      a.value);
}

// What a span opens with.
struct SpanHead {
  TraceId trace_id;
  SpanId span_id = 0;
  std::string_view trace_state;
  SpanId parent_span_id = 0;
  uint32_t flags = 0;  // OTLP's: the W3C flags and bits 8-9
  std::string_view name;
  SpanKind kind = SpanKind::kInternal;
  int64_t start_unix_nanos = 0;
  int64_t end_unix_nanos = 0;
};

// A span up to its attributes' opening bracket: ids, traceState, parentSpanId, flags,
// name, kind, times.
void open_span(std::string& out, const SpanHead& h) {
  // {"traceId":"<32>","spanId":"<16>", written in one piece.
  char ids[96];
  char* p = copy_literal(ids, "{\"traceId\":\"");
  write_hex16(p, h.trace_id.hi);
  write_hex16(p + 16, h.trace_id.lo);
  p = copy_literal(p + 32, "\",\"spanId\":\"");
  write_hex16(p, h.span_id);
  p += 16;
  *p++ = '"';
  out.append(ids, static_cast<size_t>(p - ids));
  if (!h.trace_state.empty()) {
    put(out, ",\"traceState\":");
    append_string(out, h.trace_state);
  }
  if (h.parent_span_id != 0) {
    char parent[40];
    char* q = copy_literal(parent, ",\"parentSpanId\":\"");
    write_hex16(q, h.parent_span_id);
    q += 16;
    *q++ = '"';
    out.append(parent, static_cast<size_t>(q - parent));
  }
  put(out, ",\"flags\":");
  append_int(out, h.flags);
  put(out, ",\"name\":");
  append_string(out, h.name);
  put(out, ",\"kind\":");
  append_int(out, static_cast<int>(h.kind));
  put(out, ",\"startTimeUnixNano\":\"");
  append_int(out, h.start_unix_nanos);
  put(out, "\",\"endTimeUnixNano\":\"");
  append_int(out, h.end_unix_nanos);
  put(out, "\",\"attributes\":[");
}

// The attributes' closing bracket, the status (left out when UNSET, its default; its
// message left out when empty), the span's end.
void close_span(std::string& out, SpanStatus status, std::string_view message) {
  if (status == SpanStatus::kUnset && message.empty()) {
    put(out, "]}");
    return;
  }
  put(out, "],\"status\":{\"code\":");
  append_int(out, static_cast<int>(status));
  if (!message.empty()) {
    put(out, ",\"message\":");
    append_string(out, message);
  }
  put(out, "}}");
}

void append_span(std::string& out, const Span& s) {
  open_span(out, {.trace_id = s.trace_id,
                  .span_id = s.span_id,
                  .trace_state = s.trace_state,
                  .parent_span_id = s.parent_span_id,
                  .flags = s.trace_flags | kSpanFlagsHasIsRemote |
                           (s.parent_is_remote ? kSpanFlagsIsRemote : uint32_t{0}),
                  .name = s.name,
                  .kind = s.kind,
                  .start_unix_nanos = s.start_unix_nanos,
                  .end_unix_nanos = s.end_unix_nanos});
  for (size_t i = 0; i < s.attributes.size(); ++i) {
    if (i > 0) out.push_back(',');
    put(out, "{\"key\":");
    append_string(out, s.attributes[i].key);
    put(out, ",\"value\":");
    append_value(out, s.attributes[i]);
    out.push_back('}');
  }
  close_span(out, s.status, s.status_message);
}

// An ExportTraceServiceRequest's opening, up to its spans' opening bracket.
void open_request(std::string& out, std::string_view service_name) {
  put(out,
      "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":"
      "{\"stringValue\":");
  append_string(out, service_name);
  put(out, "}}]},\"scopeSpans\":[{\"scope\":{\"name\":\"kvgate\"},\"spans\":[");
}

void close_request(std::string& out) { put(out, "]}]}]}"); }

}  // namespace

std::string otlp_json(std::span<const Span> spans, std::string_view service_name) {
  std::string out;
  out.reserve(256 + spans.size() * 400);
  open_request(out, service_name);
  for (size_t i = 0; i < spans.size(); ++i) {
    if (i > 0) out.push_back(',');
    append_span(out, spans[i]);
  }
  close_request(out);
  return out;
}

}  // namespace kvgate::trace
