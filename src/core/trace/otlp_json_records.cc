// The OTLP JSON encoding of the gateway's RequestSpans records (otlp_json.h): the
// exporter's, for every traced request's spans. Written through a raw cursor
// (json_cursor.h): each span's room is made sure of once, from a bound of its text, then
// its pieces are plain stores (literals of constant size, numbers and hex ids written in
// place, a record's trace id once for its spans, strings copied 8 bytes at a time where
// they need no escape, a hop's name, a literal of the gateway's, with no look at all). The
// reference encoder of Span records (otlp_json.cc) is separate, and the tests hold the two
// to the same bytes.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "core/common/short_bytes.h"
#include "core/trace/json_cursor.h"
#include "core/trace/otlp_json.h"

namespace kvgate::trace {
namespace {

// Where the next byte goes in `buffer`, and the end of the room there (the buffer's size,
// not its capacity: the room is made of bytes the string holds, so writing them is
// defined).
struct Cursor {
  std::string& buffer;
  char* p;
  char* end;

  Cursor(std::string& b, size_t at) : buffer(b), p(b.data() + at), end(b.data() + b.size()) {}

  size_t offset() const { return static_cast<size_t>(p - buffer.data()); }

  // At least `n` bytes of room after p: the buffer grows (doubling) when it has less.
  void make_room(size_t n) {
    if (static_cast<size_t>(end - p) >= n) return;
    const size_t at = offset();
    buffer.resize(std::max({buffer.size() * 2, at + n, size_t{4096}}));
    p = buffer.data() + at;
    end = buffer.data() + buffer.size();
  }
};

// The longest text of each part, its strings aside (json_string_bound of each is added to
// it), with about twice the room: counted from the literals below, every number at its
// longest (kIntBound, kDoubleBound) and every optional part there, a hop span (its comma
// before it included) is at most 576 characters, the server span 1259 (its status message
// "no answer" included), a request's opening and end 151 (the service name aside).
constexpr size_t kHopSpanBound = 1024;
constexpr size_t kServerSpanBound = 2048;
constexpr size_t kRequestBound = 256;

size_t hop_span_bound(const RequestSpans& r, const HopSpan& h) {
  return kHopSpanBound + json_string_bound(r.trace_state.size) + json_string_bound(h.name.size()) +
         json_string_bound(h.endpoint.size) + json_string_bound(h.error.size);
}

size_t server_span_bound(const RequestSpans& r) {
  size_t n =
      kServerSpanBound + json_string_bound(r.trace_state.size) + json_string_bound(r.endpoint.size);
  if (r.model) n += json_string_bound(r.model->size);
  if (r.pool) n += json_string_bound(r.pool->size);
  if (r.path) n += json_string_bound(r.path->size);
  return n;
}

}  // namespace

// What OtlpJsonBatch::Kept holds (not in the unnamed namespace: a member of a class with
// a name outside this file).
namespace records_kept {

// The hex digits of the last trace id written: a record's spans (its hops and its server
// span) share it, so it is written once a record, then copied.
class TraceIdDigits {
 public:
  TraceIdDigits() { write(); }
  // The 32 hex digits of `id`.
  const char* of(const TraceId& id) {
    if (!(id == id_)) {
      id_ = id;
      write();
    }
    return digits_;
  }

 private:
  void write() {
    write_hex16(digits_, id_.hi);
    write_hex16(digits_ + 16, id_.lo);
  }

  TraceId id_;  // whose digits digits_ holds
  char digits_[32] = {};
};

// The record's strings that recur from request to request (the model, pool, path and the
// endpoints' URLs are mostly the same few): per kind, the last one written that needed no
// escape, so that the same text again is copied without a look. The test is exact: a
// string written as its own bytes (its JSON text 2 longer than it: an escape only ever
// lengthens) is the same JSON again whenever the same bytes come.
class PlainStrings {
 public:
  enum Kind : size_t { kModel, kPool, kPath, kEndpoint, kHost, kKinds };

  // `v` as a JSON string (as write_json_string writes it).
  char* write(char* p, Kind kind, std::string_view v) {
    std::string& last = last_[kind];
    if (v.size() == last.size() && equal_short(v.data(), last.data(), v.size())) {
      *p++ = '"';
      p = copy_short(p, v.data(), v.size());
      *p++ = '"';
      return p;
    }
    char* const start = p;
    p = write_json_string(p, v);
    if (static_cast<size_t>(p - start) == v.size() + 2) last.assign(v);
    return p;
  }

 private:
  std::string last_[kKinds];
};

// The host and port of the last hop URL seen (server_address): a batch's hops go to the
// same few endpoints, so the URL is mostly compared, not parsed.
class ServerAddresses {
 public:
  ServerAddress of(std::string_view url) {
    if (url.size() != url_.size() || !equal_short(url.data(), url_.data(), url.size())) {
      url_.assign(url);
      last_ = server_address(url_);  // its host a view into url_
    }
    return last_;
  }

 private:
  std::string url_;
  ServerAddress last_;
};

}  // namespace records_kept

// What the spans of one request keep from one to the next (and a batch's from one batch to
// the next): the digits of the last time's second (UnixNanosWriter), those of the last
// trace id, the last plain strings, the last hop URL's host and port.
struct OtlpJsonBatch::Kept {
  UnixNanosWriter times;
  records_kept::TraceIdDigits trace_id;
  records_kept::PlainStrings strings;
  records_kept::ServerAddresses servers;
};

namespace {

using Kept = OtlpJsonBatch::Kept;
using records_kept::PlainStrings;
using records_kept::ServerAddresses;

// `"<16 hex digits>` (the opening quote and the id; the caller closes it).
char* write_id(char* p, uint64_t id) {
  *p = '"';
  write_hex16(p + 1, id);
  return p + 17;
}

// A span's opening up to its flags: ids, traceState (the record's), parentSpanId (when
// not 0), flags.
char* open_span(char* p, Kept& kept, const RequestSpans& r, SpanId span_id, SpanId parent,
                uint32_t flags) {
  p = copy_literal(p, "{\"traceId\":\"");
  std::memcpy(p, kept.trace_id.of(r.trace_id), 32);
  p = copy_literal(p + 32, "\",\"spanId\":");
  p = write_id(p, span_id);
  *p++ = '"';
  if (r.trace_state.size != 0) {
    p = copy_literal(p, ",\"traceState\":");
    p = write_json_string(p, r.text.view(r.trace_state));
  }
  if (parent != 0) {
    p = copy_literal(p, ",\"parentSpanId\":");
    p = write_id(p, parent);
    *p++ = '"';
  }
  p = copy_literal(p, ",\"flags\":");
  return write_uint(p, flags);
}

// After the name and the kind (and the start time's opening quote: one literal with
// them): the times, then `,"attributes":` without the bracket (the first attribute's
// leading comma is made the bracket). `times` keeps the batch's last second's digits.
char* span_times(char* p, UnixNanosWriter& times, int64_t start, int64_t end) {
  p = times.write(p, start);
  p = copy_literal(p, "\",\"endTimeUnixNano\":\"");
  p = times.write(p, end);
  return copy_literal(p, "\",\"attributes\":");
}

// The attributes' closing bracket, the status and the span's end: UNSET (the status left
// out: proto3 JSON leaves out a field at its default); ERROR with a message (left out when
// empty); ERROR with "HTTP <status>".
char* close_span_unset(char* p) { return copy_literal(p, "]}"); }

char* close_span_error(char* p, std::string_view message) {
  p = copy_literal(p, "],\"status\":{\"code\":2");
  if (!message.empty()) {
    p = copy_literal(p, ",\"message\":");
    p = write_json_string(p, message);
  }
  return copy_literal(p, "}}");
}

char* close_span_http_error(char* p, int32_t status) {
  p = copy_literal(p, "],\"status\":{\"code\":2,\"message\":\"HTTP ");
  p = write_int(p, status);
  return copy_literal(p, "\"}}");
}

// An attribute, its leading comma included, as `open` (a literal: the key and the value's
// opening) then its value.
#define KVGATE_ATTRIBUTE(key, type) ",{\"key\":\"" key "\",\"value\":{\"" type "\":"

template <size_t N>
char* string_attribute(char* p, Kept& kept, PlainStrings::Kind kind, const char (&open)[N],
                       std::string_view v) {
  p = copy_literal(p, open);
  p = kept.strings.write(p, kind, v);
  return copy_literal(p, "}}");
}

template <size_t N>
char* int_attribute(char* p, const char (&open)[N], int64_t v) {
  p = copy_literal(p, open);
  *p++ = '"';
  p = write_int(p, v);
  return copy_literal(p, "\"}}");
}

// {"doubleValue":...} as proto3 JSON has it: a number, or "NaN", "Infinity", "-Infinity".
char* double_attribute_value(char* p, double v) {
  if (std::isfinite(v)) {
    p = copy_literal(p, "{\"doubleValue\":");
    p = write_double(p, v);
    return copy_literal(p, "}");
  }
  if (std::isnan(v)) return copy_literal(p, "{\"doubleValue\":\"NaN\"}");
  return v > 0 ? copy_literal(p, "{\"doubleValue\":\"Infinity\"}")
               : copy_literal(p, "{\"doubleValue\":\"-Infinity\"}");
}

bool succeeded(int32_t status) { return status > 0 && status < 500; }

char* write_hop_span(char* p, Kept& kept, const RequestSpans& r, const HopSpan& h) {
  p = open_span(p, kept, r, h.span_id, r.span_id, r.trace_flags | kSpanFlagsHasIsRemote);
  p = copy_literal(p, ",\"name\":");
  p = write_plain_string(p, h.name);  // a literal of the gateway's: no escape (HopSpan::name)
  p = copy_literal(p, ",\"kind\":3,\"startTimeUnixNano\":\"");
  p = span_times(p, kept.times, h.start_unix_nanos, h.end_unix_nanos);
  char* const first = p;  // the first attribute's comma: the list's opening bracket
  const ServerAddress server = kept.servers.of(r.text.view(h.endpoint));
  p = string_attribute(p, kept, PlainStrings::kHost,
                       KVGATE_ATTRIBUTE("server.address", "stringValue"), server.host);
  *first = '[';
  if (server.port != 0)
    p = int_attribute(p, KVGATE_ATTRIBUTE("server.port", "intValue"), server.port);
  if (h.attempt != 0) {  // the first hop's 0 left out, as proto3's JSON leaves a default
    p = int_attribute(p, KVGATE_ATTRIBUTE("kvgate.attempt", "intValue"), h.attempt);
  }
  if (h.status != 0) {
    p = int_attribute(p, KVGATE_ATTRIBUTE("http.response.status_code", "intValue"), h.status);
  }
  if (succeeded(h.status)) return close_span_unset(p);
  if (h.status == 0) return close_span_error(p, r.text.view(h.error));
  return close_span_http_error(p, h.status);
}

char* write_server_span(char* p, Kept& kept, const RequestSpans& r) {
  const uint32_t flags = r.trace_flags | kSpanFlagsHasIsRemote |
                         (r.parent_span_id != 0 ? kSpanFlagsIsRemote : uint32_t{0});
  p = open_span(p, kept, r, r.span_id, r.parent_span_id, flags);
  p = copy_literal(p, ",\"name\":\"kvgate.request\",\"kind\":2,\"startTimeUnixNano\":\"");
  p = span_times(p, kept.times, r.start_unix_nanos, r.end_unix_nanos);
  // Each attribute opens with a comma; the first one's is then made the list's bracket
  // (there is always one: kvgate.hops).
  char* const first = p;
  if (r.model) {
    p = string_attribute(p, kept, PlainStrings::kModel,
                         KVGATE_ATTRIBUTE("kvgate.model", "stringValue"), r.text.view(*r.model));
  }
  if (r.pool) {
    p = string_attribute(p, kept, PlainStrings::kPool,
                         KVGATE_ATTRIBUTE("kvgate.pool", "stringValue"), r.text.view(*r.pool));
  }
  if (r.path) {
    p = string_attribute(p, kept, PlainStrings::kPath, KVGATE_ATTRIBUTE("url.path", "stringValue"),
                         r.text.view(*r.path));
  }
  if (r.routing) {
    const Routing& g = *r.routing;
    p = string_attribute(p, kept, PlainStrings::kEndpoint,
                         KVGATE_ATTRIBUTE("kvgate.endpoint", "stringValue"),
                         r.text.view(r.endpoint));
    p = int_attribute(p, KVGATE_ATTRIBUTE("kvgate.route_us", "intValue"), g.route_us);
    // The prefix terms when the prompt was keyed (a round-robin pool's is not); the wait
    // and the P/D split when there was one (Routing's comments).
    if (g.prompt_blocks != 0) {
      p = int_attribute(p, KVGATE_ATTRIBUTE("kvgate.matched_blocks", "intValue"), g.matched_blocks);
      p = int_attribute(p, KVGATE_ATTRIBUTE("kvgate.cached_blocks", "intValue"), g.cached_blocks);
      p = int_attribute(p, KVGATE_ATTRIBUTE("kvgate.prompt_blocks", "intValue"), g.prompt_blocks);
    }
    p = int_attribute(p, KVGATE_ATTRIBUTE("kvgate.prefill_tokens", "intValue"), g.prefill_tokens);
    p = copy_literal(p, ",{\"key\":\"kvgate.cost\",\"value\":");
    p = double_attribute_value(p, g.cost);
    p = copy_literal(p, "}");
    if (g.queued_us != 0) {
      p = int_attribute(p, KVGATE_ATTRIBUTE("kvgate.queued_us", "intValue"), g.queued_us);
    }
    if (g.disaggregated) {
      p = copy_literal(p, ",{\"key\":\"kvgate.disaggregated\",\"value\":{\"boolValue\":true}}");
    }
  }
  if (r.http_status != 0) {
    p = int_attribute(p, KVGATE_ATTRIBUTE("http.response.status_code", "intValue"), r.http_status);
  }
  p = int_attribute(p, KVGATE_ATTRIBUTE("kvgate.hops", "intValue"), r.hops_started);
  *first = '[';
  if (r.http_status == 0) return close_span_error(p, "no answer");
  if (r.http_status >= 500) return close_span_http_error(p, r.http_status);
  return close_span_unset(p);
}

#undef KVGATE_ATTRIBUTE

// A request's opening, up to its spans, at c.
void open_request(Cursor& c, std::string_view service_name) {
  c.make_room(kRequestBound + json_string_bound(service_name.size()));
  c.p = copy_literal(
      c.p,
      "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":"
      "{\"stringValue\":");
  c.p = write_json_string(c.p, service_name);
  c.p = copy_literal(c.p, "}}]},\"scopeSpans\":[{\"scope\":{\"name\":\"kvgate\"},\"spans\":[");
}

// The run's spans at c, each after a comma unless it is the request's first (`first`: no
// span before it; false after).
void write_run(Cursor& c, Kept& kept, const SpanRun& run, bool& first) {
  const RequestSpans& r = *run.record;
  const size_t hops = r.hops.size();
  for (size_t k = run.first; k < run.first + run.count; ++k) {
    const bool hop = k < hops;
    // The room for the span (its comma included), then the span without a check.
    c.make_room(hop ? hop_span_bound(r, r.hops[k]) : server_span_bound(r));
    if (!first) *c.p++ = ',';
    first = false;
    c.p = hop ? write_hop_span(c.p, kept, r, r.hops[k]) : write_server_span(c.p, kept, r);
    assert(c.p <= c.end);  // the bound held
  }
}

// The request's end, after its spans.
void close_request(Cursor& c) {
  c.make_room(6);
  c.p = copy_literal(c.p, "]}]}]}");
  assert(c.p <= c.end);
}

// The request for `runs` written at `at` in `buffer` (grown when it needs room); returns
// where it ends.
size_t write_request(std::string& buffer, size_t at, std::span<const SpanRun> runs,
                     std::string_view service_name) {
  Cursor c(buffer, at);
  open_request(c, service_name);
  bool first = true;
  Kept kept;  // the spans' times mostly share their second, a record's spans their trace
  for (const SpanRun& run : runs) write_run(c, kept, run, first);
  close_request(c);
  return c.offset();
}

}  // namespace

void append_otlp_json(std::string& out, std::span<const SpanRun> runs,
                      std::string_view service_name) {
  out.resize(write_request(out, out.size(), runs, service_name));
}

std::string_view write_otlp_json(std::string& scratch, std::span<const SpanRun> runs,
                                 std::string_view service_name) {
  const size_t size = write_request(scratch, 0, runs, service_name);
  return {scratch.data(), size};
}

OtlpJsonBatch::OtlpJsonBatch(std::string service_name)
    : service_name_(std::move(service_name)), kept_(std::make_unique<Kept>()) {}

OtlpJsonBatch::~OtlpJsonBatch() = default;

void OtlpJsonBatch::append(const SpanRun& run) {
  if (run.count == 0) return;
  Cursor c(buffer_, size_);
  bool first = spans_ == 0;
  if (first) open_request(c, service_name_);
  write_run(c, *kept_, run, first);
  size_ = c.offset();
  spans_ += run.count;
}

OtlpJsonBatch::Taken OtlpJsonBatch::take(std::string room) {
  Cursor c(buffer_, size_);
  if (spans_ == 0) open_request(c, service_name_);
  close_request(c);
  // Not shrunk to the request: its size stays the room (a string grown again would have
  // its new bytes zeroed first, a whole batch's each time).
  const size_t size = c.offset();  // (before buffer_, which c points into, moves)
  Taken taken{std::move(buffer_), size};
  buffer_ = std::move(room);
  size_ = 0;
  spans_ = 0;
  return taken;
}

}  // namespace kvgate::trace
