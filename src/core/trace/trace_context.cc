#include "core/trace/trace_context.h"

#include <bit>
#include <cstring>

namespace kvgate::trace {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // upper case is invalid in traceparent
}

// Exactly `s.size()` lower-case hex digits (at most 16) into `out`.
bool read_hex(std::string_view s, uint64_t& out) {
  uint64_t v = 0;
  for (char c : s) {
    const int d = hex_digit(c);
    if (d < 0) return false;
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  out = v;
  return true;
}

// The two hex digits of a byte (the flags).
void write_hex2(char* out, uint8_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  out[0] = kDigits[v >> 4];
  out[1] = kDigits[v & 0xf];
}

}  // namespace

std::optional<TraceParent> parse_traceparent(std::string_view v) {
  // version "-" trace-id "-" parent-id "-" flags: 2 + 1 + 32 + 1 + 16 + 1 + 2 = 55.
  if (v.size() < 55 || v[2] != '-' || v[35] != '-' || v[52] != '-') return std::nullopt;
  uint64_t version = 0;
  if (!read_hex(v.substr(0, 2), version) || version == 0xff) return std::nullopt;
  // Version 00 is exactly 55 characters; a later version may append "-..." fields.
  if (version == 0 && v.size() != 55) return std::nullopt;
  if (version != 0 && v.size() > 55 && v[55] != '-') return std::nullopt;
  TraceParent p;
  uint64_t flags = 0;
  if (!read_hex(v.substr(3, 16), p.trace_id.hi) || !read_hex(v.substr(19, 16), p.trace_id.lo) ||
      !read_hex(v.substr(36, 16), p.span_id) || !read_hex(v.substr(53, 2), flags)) {
    return std::nullopt;
  }
  if (!p.trace_id.valid() || p.span_id == 0) return std::nullopt;
  p.flags = static_cast<uint8_t>(flags);
  return p;
}

void write_traceparent(char* out, const TraceParent& p) {
  // "00-" trace-id "-" parent-id "-" flags.
  out[0] = '0';
  out[1] = '0';
  out[2] = '-';
  write_hex16(out + 3, p.trace_id.hi);
  write_hex16(out + 19, p.trace_id.lo);
  out[35] = '-';
  write_hex16(out + 36, p.span_id);
  out[52] = '-';
  write_hex2(out + 53, p.flags);
}

std::string format_traceparent(const TraceParent& p) {
  std::string out(kTraceparentSize, '-');
  write_traceparent(out.data(), p);
  return out;
}

void append_hex(std::string& out, const TraceId& id) {
  char buf[32];
  write_hex16(buf, id.hi);
  write_hex16(buf + 16, id.lo);
  out.append(buf, sizeof buf);
}

void append_hex(std::string& out, SpanId id) {
  char buf[16];
  write_hex16(buf, id);
  out.append(buf, sizeof buf);
}

std::string to_hex(const TraceId& id) {
  std::string out;
  append_hex(out, id);
  return out;
}

std::string to_hex(SpanId id) {
  std::string out;
  append_hex(out, id);
  return out;
}

TraceId new_trace_id(Rng& rng) {
  TraceId id;
  while (!id.valid()) id = {rng.next(), rng.next()};
  return id;
}

SpanId new_span_id(Rng& rng) {
  SpanId id = 0;
  while (id == 0) id = rng.next();
  return id;
}

TraceParent start_trace(Rng& rng) {
  return TraceParent{new_trace_id(rng), new_span_id(rng), kSampledFlag};
}

TraceParent child_of(const TraceParent& parent, Rng& rng) {
  return TraceParent{parent.trace_id, new_span_id(rng), parent.flags};
}

bool sampled(const TraceParent* parent, double ratio, double u) {
  if (parent) return parent->is_sampled();
  return u < ratio;
}

}  // namespace kvgate::trace
