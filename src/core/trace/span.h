// Span: one finished span with any attributes, ready for export (otlp_json.h).
//
// The general form of a span: the gateway itself records its spans in the compact
// RequestSpans (request_spans.h: a request's server span and its hops, typed attributes,
// no allocation per span), which encodes to the same JSON as the equivalent Spans (the
// tests hold the two encodings to each other). Times are Unix nanoseconds (the OTLP
// fields' unit), read by the caller.
//
//   Span s{.trace_id = tp.trace_id, .span_id = tp.span_id, .name = "kvgate.request",
//          .kind = SpanKind::kServer, .start_unix_nanos = t0};
//   s.attributes.push_back({"kvgate.endpoint", std::string(url)});
//
// A plain value: copy or move it freely.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/trace/trace_context.h"

namespace kvgate::trace {

// OTLP's SpanKind values (trace.proto; 0 is UNSPECIFIED, 4 and 5 PRODUCER and CONSUMER).
enum class SpanKind : int { kInternal = 1, kServer = 2, kClient = 3 };

// OTLP's SpanFlags masks over Span.flags: bits 0-7 the W3C trace flags, bit 8 "whether
// the parent is remote is known", bit 9 "the parent is remote".
inline constexpr uint32_t kSpanFlagsHasIsRemote = 0x100;
inline constexpr uint32_t kSpanFlagsIsRemote = 0x200;

// OTLP's Status.StatusCode values.
enum class SpanStatus : int { kUnset = 0, kOk = 1, kError = 2 };

struct Attribute {
  using Value = std::variant<std::string, int64_t, double, bool>;
  // A literal's view (kvgate's attribute names are fixed words): it must outlive the
  // span's export, and costs no allocation on the request path.
  std::string_view key;
  Value value;
};

struct Span {
  TraceId trace_id;
  SpanId span_id = 0;
  SpanId parent_span_id = 0;           // 0: a root span
  std::string trace_state;             // the W3C tracestate that came with the trace ("": none)
  uint8_t trace_flags = kSampledFlag;  // the W3C trace flags
  // Whether the parent span is another process's (a client's), as OTLP's span flags
  // record it (bits 8 and 9).
  bool parent_is_remote = false;
  std::string name;
  SpanKind kind = SpanKind::kInternal;
  int64_t start_unix_nanos = 0;
  int64_t end_unix_nanos = 0;
  std::vector<Attribute> attributes;
  SpanStatus status = SpanStatus::kUnset;
  std::string status_message;  // with kError
};

}  // namespace kvgate::trace
