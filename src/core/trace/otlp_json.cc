#include "core/trace/otlp_json.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <type_traits>

namespace kvgate::trace {
namespace {

// A literal, its length known at compile time (no strlen per call).
template <size_t N>
std::string& put(std::string& out, const char (&literal)[N]) {
  return out.append(literal, N - 1);
}

// The length of the valid UTF-8 sequence that starts at s[i] (a byte >= 0x80), or 0
// when none does (a stray continuation byte, an overlong form, a surrogate, a code point
// beyond U+10FFFF, a truncated sequence).
size_t utf8_length(std::string_view s, size_t i) {
  const auto byte = [s](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  size_t n = 0;
  unsigned char lo = 0x80;  // the second byte's range
  unsigned char hi = 0xbf;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;  // overlong
    if (c == 0xed) hi = 0x9f;  // surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;  // overlong
    if (c == 0xf4) hi = 0x8f;  // beyond U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size() || byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xbf) return 0;
  }
  return n;
}

// Whether any of the 8 bytes of `w` needs a look of its own: a control byte (< 0x20), a
// byte >= 0x80 (UTF-8 to check), '"' or '\\' (the bit tricks of "Bit Twiddling Hacks").
constexpr uint64_t kOnes = 0x0101010101010101ull;
constexpr uint64_t kHighs = 0x8080808080808080ull;
bool needs_look(uint64_t w) {
  const auto has_zero = [](uint64_t x) { return (x - kOnes) & ~x & kHighs; };
  const uint64_t below_space = (w - kOnes * 0x20) & ~w & kHighs;
  return ((w & kHighs) | below_space | has_zero(w ^ (kOnes * '"')) |
          has_zero(w ^ (kOnes * '\\'))) != 0;
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
      if (!needs_look(w)) {
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

// `literal` copied to `p` (without its NUL); returns the end.
template <size_t N>
char* copy_literal(char* p, const char (&literal)[N]) {
  std::memcpy(p, literal, N - 1);
  return p + N - 1;
}

// A double's AnyValue: {"doubleValue":...}.
void append_double_value(std::string& out, double v) {
  if (std::isfinite(v)) {
    char buf[32];
    const auto r = fmt::format_to_n(buf, sizeof buf, "{}", v);
    put(out, "{\"doubleValue\":").append(buf, r.out - buf).push_back('}');
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

// What a span opens with, both encodings' (Span, RequestSpans).
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

// The attributes' closing bracket, the status without a message, the span's end.
void close_span(std::string& out, SpanStatus status) {
  put(out, "],\"status\":{\"code\":");
  append_int(out, static_cast<int>(status));
  put(out, "}}");
}

// The same, with a status message (left out when empty).
void close_span(std::string& out, SpanStatus status, std::string_view message) {
  put(out, "],\"status\":{\"code\":");
  append_int(out, static_cast<int>(status));
  if (!message.empty()) {
    put(out, ",\"message\":");
    append_string(out, message);
  }
  put(out, "}}");
}

// An ERROR status whose message is "HTTP <status>".
void close_span_http_error(std::string& out, int status) {
  put(out, "],\"status\":{\"code\":");
  append_int(out, static_cast<int>(SpanStatus::kError));
  put(out, ",\"message\":\"HTTP ");
  append_int(out, status);
  put(out, "\"}}");
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

// RequestSpans' attributes: kvgate's own keys, which need no escaping, written with the
// value's opening as one literal.
#define KVGATE_ATTRIBUTE(key, type) "{\"key\":\"" key "\",\"value\":{\"" type "\":"

template <size_t N>
void string_attribute(std::string& out, const char (&open)[N], std::string_view v) {
  put(out, open);
  append_string(out, v);
  put(out, "}}");
}

template <size_t N>
void int_attribute(std::string& out, const char (&open)[N], int64_t v) {
  put(out, open).push_back('"');
  append_int(out, v);
  put(out, "\"}}");
}

bool succeeded(int32_t status) { return status > 0 && status < 500; }

void append_hop_span(std::string& out, const RequestSpans& r, const HopSpan& h) {
  open_span(out, {.trace_id = r.trace_id,
                  .span_id = h.span_id,
                  .trace_state = r.text.view(r.trace_state),
                  .parent_span_id = r.span_id,
                  .flags = r.trace_flags | kSpanFlagsHasIsRemote,
                  .name = h.name,
                  .kind = SpanKind::kClient,
                  .start_unix_nanos = h.start_unix_nanos,
                  .end_unix_nanos = h.end_unix_nanos});
  string_attribute(out, KVGATE_ATTRIBUTE("server.address", "stringValue"), r.text.view(h.endpoint));
  out.push_back(',');
  int_attribute(out, KVGATE_ATTRIBUTE("kvgate.attempt", "intValue"), h.attempt);
  if (h.status != 0) {
    out.push_back(',');
    int_attribute(out, KVGATE_ATTRIBUTE("http.response.status_code", "intValue"), h.status);
  }
  if (succeeded(h.status)) {
    close_span(out, SpanStatus::kUnset);
  } else if (h.status == 0) {
    close_span(out, SpanStatus::kError, r.text.view(h.error));
  } else {
    close_span_http_error(out, h.status);
  }
}

void append_server_span(std::string& out, const RequestSpans& r) {
  open_span(out, {.trace_id = r.trace_id,
                  .span_id = r.span_id,
                  .trace_state = r.text.view(r.trace_state),
                  .parent_span_id = r.parent_span_id,
                  .flags = r.trace_flags | kSpanFlagsHasIsRemote |
                           (r.parent_span_id != 0 ? kSpanFlagsIsRemote : uint32_t{0}),
                  .name = "kvgate.request",
                  .kind = SpanKind::kServer,
                  .start_unix_nanos = r.start_unix_nanos,
                  .end_unix_nanos = r.end_unix_nanos});
  // Each attribute but the last (kvgate.hops, always there) is followed by a comma.
  if (r.model) {
    string_attribute(out, KVGATE_ATTRIBUTE("kvgate.model", "stringValue"), r.text.view(*r.model));
    out.push_back(',');
  }
  if (r.pool) {
    string_attribute(out, KVGATE_ATTRIBUTE("kvgate.pool", "stringValue"), r.text.view(*r.pool));
    out.push_back(',');
  }
  if (r.path) {
    string_attribute(out, KVGATE_ATTRIBUTE("url.path", "stringValue"), r.text.view(*r.path));
    out.push_back(',');
  }
  if (r.routing) {
    const Routing& g = *r.routing;
    string_attribute(out, KVGATE_ATTRIBUTE("kvgate.endpoint", "stringValue"),
                     r.text.view(r.endpoint));
    out.push_back(',');
    int_attribute(out, KVGATE_ATTRIBUTE("kvgate.route_us", "intValue"), g.route_us);
    out.push_back(',');
    int_attribute(out, KVGATE_ATTRIBUTE("kvgate.matched_blocks", "intValue"), g.matched_blocks);
    out.push_back(',');
    int_attribute(out, KVGATE_ATTRIBUTE("kvgate.cached_blocks", "intValue"), g.cached_blocks);
    out.push_back(',');
    int_attribute(out, KVGATE_ATTRIBUTE("kvgate.prompt_blocks", "intValue"), g.prompt_blocks);
    out.push_back(',');
    int_attribute(out, KVGATE_ATTRIBUTE("kvgate.prefill_tokens", "intValue"), g.prefill_tokens);
    put(out, ",{\"key\":\"kvgate.cost\",\"value\":");
    append_double_value(out, g.cost);
    put(out, "},");
    int_attribute(out, KVGATE_ATTRIBUTE("kvgate.queued_us", "intValue"), g.queued_us);
    out.append(g.disaggregated
                   ? ",{\"key\":\"kvgate.disaggregated\",\"value\":{\"boolValue\":true}},"
                   : ",{\"key\":\"kvgate.disaggregated\",\"value\":{\"boolValue\":false}},");
  }
  if (r.http_status != 0) {
    int_attribute(out, KVGATE_ATTRIBUTE("http.response.status_code", "intValue"), r.http_status);
    out.push_back(',');
  }
  int_attribute(out, KVGATE_ATTRIBUTE("kvgate.hops", "intValue"), r.hops_started);
  if (r.http_status == 0) {
    close_span(out, SpanStatus::kError, "no answer");
  } else if (r.http_status >= 500) {
    close_span_http_error(out, r.http_status);
  } else {
    close_span(out, SpanStatus::kUnset);
  }
}

#undef KVGATE_ATTRIBUTE

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

void append_otlp_json(std::string& out, std::span<const SpanRun> runs,
                      std::string_view service_name) {
  open_request(out, service_name);
  bool first = true;
  for (const SpanRun& run : runs) {
    const RequestSpans& r = *run.record;
    const size_t hops = r.hops.size();
    for (size_t k = run.first; k < run.first + run.count; ++k) {
      if (!first) out.push_back(',');
      first = false;
      if (k < hops) {
        append_hop_span(out, r, r.hops[k]);
      } else {
        append_server_span(out, r);
      }
    }
  }
  close_request(out);
}

}  // namespace kvgate::trace
