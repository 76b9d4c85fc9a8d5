// otlp_json: spans as the body of an OTLP/HTTP export request in the JSON encoding
// (`POST /v1/traces`, `Content-Type: application/json`; opentelemetry-proto's
// ExportTraceServiceRequest, docs/specification.md "JSON Protobuf Encoding").
//
// The JSON encoding's rules that differ from plain proto3 JSON: traceId and spanId are
// lower-case hex strings (not base64), enum values are integers, and 64-bit integers
// (times in Unix nanoseconds, intValue attributes) are decimal strings. An empty
// parentSpanId is left out.
//
//   std::string body = otlp_json(spans, "kvgate");
//   // {"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":
//   //   {"stringValue":"kvgate"}}]},"scopeSpans":[{"scope":{"name":"kvgate"},
//   //   "spans":[{"traceId":"...","spanId":"...",...}]}]}]}
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "core/trace/span.h"

namespace kvgate::trace {

// One ExportTraceServiceRequest holding `spans`, under one resource whose service.name
// is `service_name` and one scope named "kvgate".
std::string otlp_json(std::span<const Span> spans, std::string_view service_name);

}  // namespace kvgate::trace
