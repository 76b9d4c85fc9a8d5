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
        } else if (std::isfinite(v)) {
          char buf[32];
          const auto r = fmt::format_to_n(buf, sizeof buf, "{}", v);
          put(out, "{\"doubleValue\":").append(buf, r.out - buf).push_back('}');
        } else {
          // JSON has no NaN or infinity: proto3 JSON spells them as strings.
          out.append(std::isnan(v) ? "{\"doubleValue\":\"NaN\"}"
                     : v > 0       ? "{\"doubleValue\":\"Infinity\"}"
                                   : "{\"doubleValue\":\"-Infinity\"}");
        }
      },
      a.value);
}

void append_attributes(std::string& out, const std::vector<Attribute>& attributes) {
  put(out, "\"attributes\":[");
  for (size_t i = 0; i < attributes.size(); ++i) {
    if (i > 0) out.push_back(',');
    put(out, "{\"key\":");
    append_string(out, attributes[i].key);
    put(out, ",\"value\":");
    append_value(out, attributes[i]);
    out.push_back('}');
  }
  out.push_back(']');
}

void append_span(std::string& out, const Span& s) {
  put(out, "{\"traceId\":\"");
  append_hex(out, s.trace_id);
  put(out, "\",\"spanId\":\"");
  append_hex(out, s.span_id);
  out.push_back('"');
  if (!s.trace_state.empty()) {
    put(out, ",\"traceState\":");
    append_string(out, s.trace_state);
  }
  if (s.parent_span_id != 0) {
    put(out, ",\"parentSpanId\":\"");
    append_hex(out, s.parent_span_id);
    out.push_back('"');
  }
  const uint32_t flags = s.trace_flags | kSpanFlagsHasIsRemote |
                         (s.parent_is_remote ? kSpanFlagsIsRemote : uint32_t{0});
  put(out, ",\"flags\":");
  append_int(out, flags);
  put(out, ",\"name\":");
  append_string(out, s.name);
  put(out, ",\"kind\":");
  append_int(out, static_cast<int>(s.kind));
  put(out, ",\"startTimeUnixNano\":\"");
  append_int(out, s.start_unix_nanos);
  put(out, "\",\"endTimeUnixNano\":\"");
  append_int(out, s.end_unix_nanos);
  put(out, "\",");
  append_attributes(out, s.attributes);
  put(out, ",\"status\":{\"code\":");
  append_int(out, static_cast<int>(s.status));
  if (!s.status_message.empty()) {
    put(out, ",\"message\":");
    append_string(out, s.status_message);
  }
  put(out, "}}");
}

}  // namespace

std::string otlp_json(std::span<const Span> spans, std::string_view service_name) {
  std::string out;
  out.reserve(256 + spans.size() * 400);
  out.append(
      "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":"
      "{\"stringValue\":");
  append_string(out, service_name);
  put(out, "}}]},\"scopeSpans\":[{\"scope\":{\"name\":\"kvgate\"},\"spans\":[");
  for (size_t i = 0; i < spans.size(); ++i) {
    if (i > 0) out.push_back(',');
    append_span(out, spans[i]);
  }
  put(out, "]}]}]}");
  return out;
}

}  // namespace kvgate::trace
