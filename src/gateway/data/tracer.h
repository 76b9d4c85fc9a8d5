// Tracer: the gateway's trace context (W3C traceparent, core/trace/) and its span export
// (OTLP over HTTP, JSON), when `tracing:` is configured (docs/tracing.md).
//
// A request is traced when its client's traceparent says sampled, or, without one, at
// the configured ratio. A traced request carries a RequestTrace (ProxyCall::trace): its
// spans in one compact record (core/trace/request_spans.h): the gateway's server span,
// which covers the request and holds the routing decision's attributes, and under it
// one client span per upstream hop (each attempt; the prefill and the decode hop of a
// P/D request), each with a span id of its own, which the engine receives as the parent
// id in the hop's `traceparent` header (`tracestate` passed on as it came). A hop's span
// goes into the request's record when the hop ends; the record goes to the export queue
// once, when the request ends (one lock per request, under which its record is queued,
// one pointer moved, and its thread's spares topped up, usually one more). An untraced
// request has a null RequestTrace and costs nothing more.
//
// Records are recycled: in steady state a traced request neither allocates nor frees
// its record. The exporter puts the records it has sent back on the tracer's free list
// together, under the lock it takes anyway, as they are: it only reads a record, so that
// the record's memory is not taken into the exporter's core's cache only to be taken back
// by the I/O thread that fills it next (a record that grew on the heap is cleared there,
// see Memory). submit, under its one lock, tops up its thread's spares (up to
// kThreadSpares records, usually the one its last begin took) from the free list, and
// begin takes a spare without a lock instead of allocating, clears it
// (RequestSpans::clear, which keeps what its text and hops grew on the heap) and fills it
// anew: nothing of its last request is left. A thread's spares are
// tagged with their tracer's id (unique in the process): another tracer's (an earlier
// one, say before a configuration reload) are freed, never used. Without a spare
// (start-up, more requests begun on a thread than it has spares before one ends), begin
// allocates; past the free list's bound, the exporter frees.
//
// Export: finished requests' records go to a bounded queue (max_queue spans; a request
// whose spans do not fit is dropped, counted and freed); a thread of the tracer's own takes
// the whole queue at once and sends it in batches of at most batch_size spans to the
// collector: full batches as soon as they are there, a partial one (a split request's
// rest included) only every flush_ms, so that batches stay full however quick the
// exports. Each is encoded into one buffer it reuses and posted from it, with a
// blocking HTTP client: never on an I/O thread, never on a request's path. A failed
// export drops its batch (counted) rather than holding memory for a collector that is
// down. stop() (or the destructor) sends what waits, a batch at a time, until an export
// fails: the rest is then dropped (counted), so a collector that is down holds the
// shutdown for one export's timeout at most. A test passes a SpanSink of its own instead
// of the collector.
//
// Memory: the records of at most max_queue spans waiting or being sent, those of the
// requests in progress, the free list's (at most free_limit(): min(max_queue,
// max(kFreeRecords, 2 * batch_size)) records) and up to kThreadSpares spares per thread
// that submitted; a kept record holds at most what RequestSpans::clear keeps on the heap
// (TextBuffer::kKeptHeap bytes, HopList::kKeptMore hops) besides its own ~600 bytes: the
// exporter clears the few that spilled onto the heap (RequestSpans::spilled) before they
// go back on the free list.
//
//   auto tracer = std::make_unique<Tracer>(*config.tracing, clock);
//   RequestTracePtr t = tracer->begin(req);            // null: not traced
//   TracedHop hop(t.get(), "kvgate.upstream", url, up);  // null t: nothing
//   auto sent = co_await upstream.send(host, port, up);
//   hop.end(sent);
//   // t's end queues the request's spans.
//
// Thread-safe: begin, submit and the counters may be used from every I/O thread; one
// request's RequestTrace from one thread at a time. The Tracer must outlive every
// RequestTrace it made, except the spares left with threads (freed, without a look at
// their tracer, by that thread's next begin or submit on another tracer, or at the
// thread's exit).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/common/clock.h"
#include "core/trace/otlp_json.h"
#include "core/trace/request_spans.h"
#include "core/trace/trace_context.h"
#include "gateway/common/config.h"
#include "io/http_types.h"
#include "io/upstream_client.h"

namespace kvgate::gateway {

class Tracer;
class RequestTrace;

// Ends a request's trace: hands its record to the tracer's export queue rather than
// freeing it here.
struct EndRequestTrace {
  void operator()(RequestTrace* trace) const;
};
// A request's trace as the request holds it (ProxyCall::trace): its end records the
// request's spans.
using RequestTracePtr = std::unique_ptr<RequestTrace, EndRequestTrace>;

// A hop in progress (RequestTrace::start_hop .. end_hop): what its span needs at its end.
struct HopStart {
  trace::SpanId span_id = 0;
  std::string_view name;    // a literal's view, needing no JSON escape (trace::HopSpan::name)
  trace::TextRef endpoint;  // the URL, copied into the request's record
  int64_t start_unix_nanos = 0;
  int32_t attempt = 0;
};

// A hop's `traceparent` header line as sent ("traceparent: 00-...-01\r\n"), written in
// place: the upstream request borrows it (io::UpstreamRequest::hop_headers), so a hop
// makes neither a string nor an entry in the request's header vector.
struct TraceparentLine {
  static constexpr std::string_view kName = "traceparent: ";
  static constexpr size_t kSize = kName.size() + trace::kTraceparentSize + 2;  // and CRLF

  std::string_view text() const { return {line, kSize}; }
  std::string_view value() const { return {line + kName.size(), trace::kTraceparentSize}; }

  char line[kSize];  // not initialised until written (a TracedHop of every request has one)
};

// One traced request: its spans' record, queued for export when the request ends (and
// then reused by a later request of the same tracer: Tracer's recycling). Its destructor
// frees the record alone: it never looks at its tracer, which may be gone by then.
class RequestTrace {
 public:
  RequestTrace(Tracer& tracer, trace::TraceParent server, trace::SpanId client_parent,
               std::string_view tracestate, int64_t start_unix_nanos);
  RequestTrace(const RequestTrace&) = delete;
  RequestTrace& operator=(const RequestTrace&) = delete;
  ~RequestTrace() = default;

  // The server span's traceparent: its trace, its span id, the flags.
  trace::TraceParent server() const {
    return {spans_.trace_id, spans_.span_id, spans_.trace_flags};
  }
  // The server span's attributes (each copied into the record; docs/tracing.md).
  void set_model(std::string_view model) { spans_.model = spans_.text.add(model); }
  void set_pool(std::string_view pool) { spans_.pool = spans_.text.add(pool); }
  void set_path(std::string_view path) { spans_.path = spans_.text.add(path); }
  // The first routing decision: the endpoint picked and the decision's numbers.
  void set_routing(std::string_view endpoint_url, const trace::Routing& routing) {
    spans_.endpoint = spans_.text.add(endpoint_url);
    spans_.routing = routing;
  }
  // The answer's HTTP status: 5xx marks the server span failed.
  void set_status(int status) { spans_.http_status = status; }

  // A new client span under the server span, named `name` (a literal that needs no JSON
  // escape: trace::HopSpan::name): its `traceparent` written in `traceparent`,
  // which `request` then sends (hop_headers: it must outlive the send), and the client's
  // `tracestate` put on the request's headers (an earlier attempt's rewritten in place).
  HopStart start_hop(std::string_view name, std::string_view endpoint_url,
                     io::UpstreamRequest& request, TraceparentLine& traceparent);
  // Records the hop: `status` the engine's answer, 0 when the exchange failed (`error`).
  void end_hop(const HopStart& hop, int status, std::string_view error = {});

  // The record (the exporter reads it; a test fills it).
  const trace::RequestSpans& spans() const { return spans_; }
  trace::RequestSpans& spans() { return spans_; }

 private:
  friend struct EndRequestTrace;
  friend class Tracer;

  // The record's server span for a new request: the constructor's work, on a record new
  // or cleared (RequestSpans::clear) since its last request.
  void init(trace::TraceParent server, trace::SpanId client_parent, std::string_view tracestate,
            int64_t start_unix_nanos);

  Tracer& tracer_;
  trace::RequestSpans spans_;
};

// One upstream hop's client span around a send: started (its traceparent line, which it
// holds, lent to the request) when the request is traced, ended with the send's result.
// With a null trace it holds nothing and does nothing (the untraced path tests one
// pointer). `request` must outlive it (it takes its line back at its end: a later send or
// a copy of the request carries none), and it must outlive the send.
//   TracedHop traced(call.trace.get(), "kvgate.relay", endpoint->url, up);
//   auto sent = co_await upstream->send(endpoint->host, endpoint->port, up);
//   traced.end(sent);
class TracedHop {
 public:
  TracedHop(RequestTrace* trace, std::string_view name, std::string_view endpoint_url,
            io::UpstreamRequest& request)
      : trace_(trace) {
    if (trace_) [[unlikely]] {
      request_ = &request;
      hop_ = trace_->start_hop(name, endpoint_url, request, traceparent_);
    }
  }
  ~TracedHop() {
    if (request_) [[unlikely]] {
      request_->hop_headers = {};
    }
  }
  TracedHop(const TracedHop&) = delete;  // the request borrows traceparent_
  TracedHop& operator=(const TracedHop&) = delete;

  // Records the hop: the engine's status, or the exchange's error. Once; later calls do
  // nothing. A hop never ended has no span (it still counts in kvgate.hops).
  void end(Result<std::unique_ptr<io::UpstreamExchange>>& result) {
    if (trace_) [[unlikely]] {
      finish(result);
    }
  }

 private:
  void finish(Result<std::unique_ptr<io::UpstreamExchange>>& result);

  RequestTrace* trace_;                     // null: not traced, or ended
  io::UpstreamRequest* request_ = nullptr;  // traced: the request that borrows traceparent_
  HopStart hop_;
  TraceparentLine traceparent_;
};

// Where the exporter sends a batch: the ExportTraceServiceRequest's JSON body and how
// many spans it holds; true when it was accepted. Called on the exporter thread only,
// one batch at a time. Empty: OTLP/HTTP JSON to the configured collector.
using SpanSink = std::function<bool(std::string_view body, size_t spans)>;

class Tracer {
 public:
  // The free list's bound, unless max_queue is lower or 2 * batch_size higher.
  static constexpr size_t kFreeRecords = 1024;
  // Cleared records a thread keeps for its next begins (taken without a lock): as many
  // requests as may begin on an I/O thread before one of them ends.
  static constexpr size_t kThreadSpares = 16;

  Tracer(TracingConfig config, const Clock& clock, SpanSink sink = {});
  ~Tracer();  // stop()
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  // Sends what waits (until an export fails) and stops the exporter; a request submitted
  // afterwards is dropped (its spans counted). Idempotent; not concurrent with itself.
  void stop();

  // The request's trace, or null when it is not sampled: one of this thread's spare
  // records when it has one of this tracer's, else a new one.
  RequestTracePtr begin(const io::HttpRequest& req);

  // A finished request's spans for export (its end, EndRequestTrace, submits it; a test
  // may submit one of its own); dropped (counted, freed) when they do not fit in the
  // queue or the tracer stopped. Under the same lock, this thread's spares are topped up
  // from the free list.
  void submit(std::unique_ptr<RequestTrace> trace);

  int64_t wall_now() const { return clock_.wall_now(); }
  trace::SpanId new_span_id();

  uint64_t spans_exported() const { return exported_.load(std::memory_order_relaxed); }
  uint64_t spans_dropped() const { return dropped_.load(std::memory_order_relaxed); }
  // kvgate_trace_spans_exported_total, kvgate_trace_spans_dropped_total.
  std::string render_metrics() const;

  // Records on the free list now, and its bound (tests).
  size_t free_records() const;
  size_t free_limit() const { return free_limit_; }

 private:
  void run();  // the exporter thread
  // Encodes `batch` (`spans` spans) into `body` and sends it; counts the outcome.
  bool export_batch(std::span<const trace::SpanRun> batch, size_t spans, std::string& body);
  bool post_to_collector(std::string_view body, size_t spans);

  // Constant after construction.
  const TracingConfig config_;
  const Clock& clock_;
  const SpanSink sink_;
  const uint64_t id_;  // unique in the process: the tag of this tracer's spares
  const size_t free_limit_;

  std::atomic<uint64_t> exported_{0};
  std::atomic<uint64_t> dropped_{0};

  // State below is protected by mu_.
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::vector<std::unique_ptr<RequestTrace>> queue_;
  size_t queued_spans_ = 0;  // the spans of queue_
  // The spans the exporter took from the queue and has not yet put in a batch: they
  // count against max_queue as if they still waited there.
  size_t held_spans_ = 0;
  // Sent records, for reuse (at most free_limit_; its room reserved at the start:
  // putting records back never allocates).
  std::vector<std::unique_ptr<RequestTrace>> free_;
  bool stop_ = false;

  std::thread exporter_;  // last: started when the rest is ready
};

}  // namespace kvgate::gateway
