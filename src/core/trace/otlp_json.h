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
// left out: parentSpanId of a root span, traceState when there is none, the status when
// it is UNSET (a collector reads a span without one as UNSET), a status message when
// there is none.
//
// Span.flags carries the W3C trace flags and whether the parent is remote (bits 8, 9:
// kSpanFlagsHasIsRemote always set, kSpanFlagsIsRemote for a span whose parent is the
// client's).
//
// Two inputs, one encoding: Span records (span.h, any attributes), and the gateway's
// compact RequestSpans records (request_spans.h), whose spans are encoded exactly as the
// equivalent Spans would be (the tests compare the bytes), straight from their typed
// fields. The records' encoder is the exporter's, run for every traced request: it writes
// through a raw cursor (json_cursor.h) into room it makes once per span from a bound of
// the span's text (its fixed text, and 6 characters per byte of its strings), in a buffer
// the caller keeps between batches: kvgate's attribute keys and the JSON around them are
// literals copied as a few stores, numbers written in place two digits (or eight) at a
// time, times as the digits of the batch's last second (kept) and 9 of nanoseconds
// (UnixNanosWriter), ids 8 hex digits at a time, strings copied 8 bytes at a time where
// they need no escape.
//
//   std::string body = otlp_json(spans, "kvgate");
//   // {"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":
//   //   {"stringValue":"kvgate"}}]},"scopeSpans":[{"scope":{"name":"kvgate"},
//   //   "spans":[{"traceId":"...","spanId":"...",...}]}]}]}
//
//   std::string scratch;  // the exporter's, kept between batches
//   const SpanRun runs[] = {{&record, 0, record.span_count()}};
//   std::string_view json = write_otlp_json(scratch, runs, "kvgate");
#pragma once

#include <cstddef>
#include <memory>
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

// The same request for the spans of `runs`, written at the start of `scratch`; returns it
// (a view into `scratch`). `scratch` grows when the request needs more room than it has,
// and is never shrunk: its bytes after the request are left as they are, so a buffer kept
// between batches is neither reallocated nor cleared once it is as large as a batch needs.
std::string_view write_otlp_json(std::string& scratch, std::span<const SpanRun> runs,
                                 std::string_view service_name);

// The same request, appended to `out` (which then ends with it, nothing after).
void append_otlp_json(std::string& out, std::span<const SpanRun> runs,
                      std::string_view service_name);

// The same request written a run at a time: each I/O thread of the gateway encodes the
// requests it ended into a batch of its own once they make one (their records still in
// that core's cache), and sends it whole. take() returns the same bytes as write_otlp_json
// of the runs appended since the last take() (the tests hold them to it). What the
// encoding keeps from span to span (the last second's digits, the last trace id's, the
// strings that recur) it keeps from batch to batch too.
//
//   OtlpJsonBatch batch("kvgate");
//   batch.append({&record, 0, record.span_count()});
//   if (batch.spans() >= 512) post(batch.take().text());
//
// Not thread-safe: one thread at a time.
class OtlpJsonBatch {
 public:
  explicit OtlpJsonBatch(std::string service_name);
  ~OtlpJsonBatch();
  OtlpJsonBatch(const OtlpJsonBatch&) = delete;
  OtlpJsonBatch& operator=(const OtlpJsonBatch&) = delete;

  // The run's spans after those appended (the request opened with the first).
  void append(const SpanRun& run);
  // Spans appended since the last take().
  size_t spans() const { return spans_; }
  bool empty() const { return spans_ == 0; }

  // A request taken: its text at the start of `buffer`, the bytes after it left as they
  // were. Given back to take() as room, the whole of `buffer` (its size, not just the
  // request's) is written over: a buffer is never shrunk, so that once it is as large as a
  // batch needs it is neither grown, cleared nor reallocated again.
  struct Taken {
    std::string buffer;
    size_t size = 0;  // the request's bytes
    std::string_view text() const { return {buffer.data(), size}; }
  };

  // The request, closed (with no span appended: a request with none); the batch starts
  // anew, writing into `room` next (a buffer taken before).
  Taken take(std::string room = {});

  // What the encoding keeps from span to span (defined with the encoder).
  struct Kept;

 private:
  std::string service_name_;
  std::string buffer_;  // the request from its start; its size is the room to write in
  size_t size_ = 0;     // the bytes written in buffer_
  size_t spans_ = 0;
  std::unique_ptr<Kept> kept_;
};

}  // namespace kvgate::trace
