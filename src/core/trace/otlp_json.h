// otlp_json: spans as the body of an OTLP/HTTP export request in the JSON encoding
// (`POST /v1/traces`, `Content-Type: application/json`; opentelemetry-proto's
// ExportTraceServiceRequest, docs/specification.md "JSON Protobuf Encoding").
//
// The JSON encoding's rules that differ from plain proto3 JSON: traceId, spanId and
// parentSpanId are lower-case hex strings (not base64), enum values (kind, status code)
// are integers. As in proto3 JSON: field names are lowerCamelCase, 64-bit integers
// (times in Unix nanoseconds, intValue attributes) are decimal strings, a 32-bit one
// (flags) a number, a double that is not finite "NaN", "Infinity" or "-Infinity", and
// strings valid UTF-8 (an invalid byte is sent as U+FFFD). Fields at their default are
// left out: parentSpanId of a root span, traceState when there is none, a status
// message when there is none.
//
// Span.flags carries the W3C trace flags and whether the parent is remote (bits 8, 9:
// kSpanFlagsHasIsRemote always set, kSpanFlagsIsRemote for a span whose parent is the
// client's).
//
// Two inputs, one encoding: Span records (span.h, any attributes), and the gateway's
// compact RequestSpans records (request_spans.h), whose spans are encoded exactly as the
// equivalent Spans would be, straight from their typed fields (kvgate's attribute keys
// written as literals), appended to a buffer the caller reuses between batches.
//
//   std::string body = otlp_json(spans, "kvgate");
//   // {"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":
//   //   {"stringValue":"kvgate"}}]},"scopeSpans":[{"scope":{"name":"kvgate"},
//   //   "spans":[{"traceId":"...","spanId":"...",...}]}]}]}
//
//   body.clear();  // its capacity stays
//   const SpanRun runs[] = {{&record, 0, record.span_count()}};
//   append_otlp_json(body, runs, "kvgate");
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "core/trace/request_spans.h"
#include "core/trace/span.h"

namespace kvgate::trace {

// One ExportTraceServiceRequest holding `spans`, under one resource whose service.name
// is `service_name` and one scope named "kvgate".
std::string otlp_json(std::span<const Span> spans, std::string_view service_name);

// Spans [first, first + count) of one record, in its order (RequestSpans::span_count():
// its hops as they ended, then its server span). A batch may take a record's spans in
// more than one run (the rest in the next batch).
struct SpanRun {
  const RequestSpans* record = nullptr;
  size_t first = 0;
  size_t count = 0;
};

// The same request for the spans of `runs`, appended to `out`.
void append_otlp_json(std::string& out, std::span<const SpanRun> runs,
                      std::string_view service_name);

}  // namespace kvgate::trace
