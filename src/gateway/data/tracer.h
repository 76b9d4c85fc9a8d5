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
// goes into the request's record when the hop ends. An untraced request has a null
// RequestTrace and costs nothing more.
//
// Export: when the request ends (after its answer), its record joins the ended requests
// its thread holds (under that thread's own lock: only the flush below ever contends for
// it); once they hold batch_size spans, the thread encodes them as one batch in one go
// (core/trace/otlp_json.h, OtlpJsonBatch: the ExportTraceServiceRequest's JSON; a
// request's spans split between two batches if need be), the records and the encoder's
// code still in that core's caches, and keeps the records for its next requests: records
// never cross threads, so the memory a request writes is not pulled to another core and
// back. A full batch is queued for sending; with export_on() (the gateway: its I/O context
// and upstream client) one coroutine on that context at a time sends the queued batches,
// POST after POST, as the gateway's I/O threads send anything else (Envoy's tracers do the
// same: no thread of the tracer's own in the steady state); without it (a SpanSink of a
// test's, or no context) the tracer's thread sends them, with a blocking client. Never on
// a request's path: no request waits for an encoding or an export. What a thread holds
// short of a batch goes every flush_ms (the tracer's thread encodes every thread's then),
// so that batches stay full however quick the exports. A failed export drops its batch
// (counted) rather than holding memory for a collector that is down. stop() (or the
// destructor) sends what waits, a batch at a time from the tracer's thread, until an
// export fails: the rest is then dropped (counted), so a collector that is down holds the
// shutdown for one export's timeout at most.
//
// Memory: the spans held and queued are at most max_queue (a request whose spans do not
// fit is dropped, counted); a batch being sent holds its body until its POST ends (one at
// a time with export_on, plus the tracer thread's at a flush or stop). Records are
// recycled per thread: up to spare_limit() (a batch's and kThreadSpares more) a thread
// keeps for its next requests (a record that spilled onto the heap is cleared first,
// keeping at most what RequestSpans::clear keeps), tagged with their tracer's id (unique
// in the process): another tracer's (an earlier one, say before a configuration reload)
// are freed, never used.
//
//   auto tracer = std::make_unique<Tracer>(*config.tracing, clock);
//   tracer->export_on(io.get_executor(), upstream);      // the gateway's I/O context
//   RequestTracePtr t = tracer->begin(req);            // null: not traced
//   TracedHop hop(t.get(), "kvgate.upstream", url, up);  // null t: nothing
//   auto sent = co_await upstream.send(host, port, up);
//   hop.end(sent);
//   // t's end hands the request's record to its thread's batch.
//
// Thread-safe: begin, submit and the counters may be used from every I/O thread; one
// request's RequestTrace from one thread at a time. The Tracer must outlive every
// RequestTrace it made, except the spares left with threads (freed, without a look at
// their tracer, by that thread's next begin or submit on another tracer, or at the
// thread's exit), and the context given to export_on must not run its handlers after the
// Tracer is gone (the gateway destroys its context first).
#pragma once

#include <algorithm>
#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <condition_variable>
#include <cstdint>
#include <deque>
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

// Ends a request's trace: hands its record to the thread's batch (Tracer::submit), which
// keeps it for the thread's next request once its spans are sent, rather than freeing it
// here.
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

// One traced request: its spans' record, held by its thread's batch when the request
// ends (and then reused by a later request of the same tracer: Tracer's recycling). Its
// destructor frees the record alone: it never looks at its tracer, which may be gone by
// then.
class RequestTrace {
 public:
  RequestTrace(Tracer& tracer, trace::TraceParent server, trace::SpanId client_parent,
               std::string_view tracestate, Nanos received, int64_t wall_offset);
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
  // The request's end, on the clock's steady time (the gateway's reading when it gave the
  // answer, which its metrics time too); without one, the end is read when the trace ends.
  // A hop the answer came from (end_hop_with_answer) ends there too.
  void set_end(Nanos steady) {
    spans_.end_unix_nanos = wall_at(steady);
    close_answer_hop(spans_.end_unix_nanos);
  }

  // A new client span under the server span, named `name` (a literal that needs no JSON
  // escape: trace::HopSpan::name): its `traceparent` written in `traceparent`,
  // which `request` then sends (hop_headers: it must outlive the send), and the client's
  // `tracestate` put on the request's headers (an earlier attempt's rewritten in place).
  // It starts at `at` (the clock's steady time: a reading the gateway just took, say its
  // pick's), or now when 0; a hop the answer was to come from ends there (a stream broken
  // and migrated).
  HopStart start_hop(std::string_view name, std::string_view endpoint_url,
                     io::UpstreamRequest& request, TraceparentLine& traceparent, Nanos at = 0);
  // Records the hop, ended now: `status` the engine's answer, 0 when the exchange failed
  // (`error`).
  void end_hop(const HopStart& hop, int status, std::string_view error = {});
  // Records the hop whose exchange the answer comes from (the engine answered `status`):
  // its span ends with the answer (set_end, or the trace's end) or when a next hop starts,
  // whichever is first, at a reading the gateway takes then anyway. So it covers the
  // answer's body too, which OpenTelemetry's HTTP client conventions allow (a client span
  // ends after the response head, with or without the body).
  void end_hop_with_answer(const HopStart& hop, int status);

  // The record (the batch's encoder reads it; a test fills it).
  const trace::RequestSpans& spans() const { return spans_; }
  trace::RequestSpans& spans() { return spans_; }

 private:
  friend struct EndRequestTrace;
  friend class Tracer;

  // The record's server span for a new request: the constructor's work, on a record new
  // or cleared (RequestSpans::clear) since its last request.
  void init(trace::TraceParent server, trace::SpanId client_parent, std::string_view tracestate,
            Nanos received, int64_t wall_offset);
  // A steady reading as this request's wall time; the wall time now.
  int64_t wall_at(Nanos steady) const { return steady + wall_offset_; }
  int64_t wall_now() const;
  trace::HopSpan ended_hop(const HopStart& hop, int status) const;
  // The hop the answer comes from, if one is open, ended at `end_unix_nanos`.
  void close_answer_hop(int64_t end_unix_nanos) {
    if (answer_hop_open_) {
      trace::HopSpan& hop = spans_.hops.back();
      hop.end_unix_nanos = std::max(end_unix_nanos, hop.start_unix_nanos);
      answer_hop_open_ = false;
    }
  }

  Tracer& tracer_;
  // The wall clock's time less the steady clock's, as the tracer last read them when the
  // request began: its spans' times are steady readings moved by this one offset.
  int64_t wall_offset_ = 0;
  // The last hop is the answer's and has no end yet (end_hop_with_answer).
  bool answer_hop_open_ = false;
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
  // `at`: when the hop starts, a steady reading just taken (0: now; RequestTrace::start_hop).
  TracedHop(RequestTrace* trace, std::string_view name, std::string_view endpoint_url,
            io::UpstreamRequest& request, Nanos at = 0)
      : trace_(trace) {
    if (trace_) [[unlikely]] {
      request_ = &request;
      hop_ = trace_->start_hop(name, endpoint_url, request, traceparent_, at);
    }
  }
  ~TracedHop() {
    if (request_) [[unlikely]] {
      request_->hop_headers = {};
    }
  }
  TracedHop(const TracedHop&) = delete;  // the request borrows traceparent_
  TracedHop& operator=(const TracedHop&) = delete;

  // Records the hop, ended now: the engine's status, or the exchange's error. Once (with
  // end_with_answer); later calls do nothing. A hop never ended has no span (it still
  // counts in kvgate.hops).
  void end(Result<std::unique_ptr<io::UpstreamExchange>>& result) {
    if (trace_) [[unlikely]] {
      finish(result, Answer::kNo);
    }
  }
  // Records the hop whose engine's answer is to be the client's: its span ends with the
  // answer or at the next hop's start (RequestTrace::end_hop_with_answer), unless the
  // exchange failed or its status is one the gateway acts on (route::failed_status, by a
  // continuation leg's rule when `continuation`: a migrated stream's), which end it now.
  void end_with_answer(Result<std::unique_ptr<io::UpstreamExchange>>& result,
                       bool continuation = false) {
    if (trace_) [[unlikely]] {
      finish(result, continuation ? Answer::kContinuation : Answer::kYes);
    }
  }

 private:
  enum class Answer { kNo, kYes, kContinuation };
  void finish(Result<std::unique_ptr<io::UpstreamExchange>>& result, Answer answer);

  RequestTrace* trace_;                     // null: not traced, or ended
  io::UpstreamRequest* request_ = nullptr;  // traced: the request that borrows traceparent_
  HopStart hop_;
  TraceparentLine traceparent_;
};

// Where the tracer sends a batch: the ExportTraceServiceRequest's JSON body and how
// many spans it holds; true when it was accepted. Called on the tracer's thread only,
// one batch at a time. Empty: OTLP/HTTP JSON to the configured collector.
using SpanSink = std::function<bool(std::string_view body, size_t spans)>;

class Tracer {
 public:
  // Records a thread keeps for its next begins (taken without a lock) besides a batch's:
  // as many requests as may begin on an I/O thread before one of them ends.
  static constexpr size_t kThreadSpares = 16;

  Tracer(TracingConfig config, const Clock& clock, SpanSink sink = {});
  ~Tracer();  // stop()
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  // Full batches are POSTed to the collector on `executor` (one at a time, through
  // `client`, which must outlive the tracer's use of it) rather than by the tracer's
  // thread. Before the first request; not with a SpanSink.
  void export_on(boost::asio::any_io_executor executor, io::UpstreamClient& client);

  // Sends what waits (until an export fails) and stops the tracer's thread; a request
  // submitted afterwards is dropped (its spans counted). Idempotent; not concurrent with
  // itself.
  void stop();

  // The request's trace, or null when it is not sampled: one of this thread's spare
  // records when it has one of this tracer's, else a new one. `received`: when the request
  // came, on the clock's steady time (the server span's start); now when not given.
  RequestTracePtr begin(const io::HttpRequest& req, Nanos received);
  RequestTracePtr begin(const io::HttpRequest& req) { return begin(req, clock_.now()); }

  // A finished request's spans, held by this thread's batch (its end, EndRequestTrace,
  // submits it; a test may submit one of its own) and encoded with the others once they
  // make a batch; dropped (counted) when they do not fit in max_queue or the tracer
  // stopped. A record whose spans went (or were dropped) is kept in this thread's spares
  // (or freed).
  void submit(std::unique_ptr<RequestTrace> trace);

  // The clock's steady time, which spans are timed by (RequestTrace::wall_offset_).
  Nanos steady_now() const { return clock_.now(); }
  // The wall clock's time less the steady clock's, read together at the start and again
  // at every flush_ms (the tracer's thread): a span's wall times are steady readings moved
  // by the offset its request began with, so the request's own readings serve (its
  // receipt, its answer) and its spans' durations are the steady clock's even when the
  // wall clock is stepped meanwhile.
  int64_t wall_offset() const { return wall_offset_.load(std::memory_order_relaxed); }
  // That offset as the clock reads it now.
  static int64_t read_wall_offset(const Clock& clock) { return clock.wall_now() - clock.now(); }
  trace::SpanId new_span_id();

  uint64_t spans_exported() const { return exported_.load(std::memory_order_relaxed); }
  uint64_t spans_dropped() const { return dropped_.load(std::memory_order_relaxed); }
  // kvgate_trace_spans_exported_total, kvgate_trace_spans_dropped_total.
  std::string render_metrics() const;

  // The records a thread keeps for its next requests, at most: a batch's (a record has at
  // least one span) and kThreadSpares more.
  size_t spare_limit() const { return config_.batch_size + kThreadSpares; }

  // One thread's ended requests not yet in a batch (the thread adds to it; the flush takes
  // it).
  struct ThreadBatch;

 private:
  // A batch ready to send: its JSON body and how many spans it holds.
  struct Body {
    trace::OtlpJsonBatch::Taken json;  // json.text(): the body; its buffer is reused
    size_t spans = 0;
  };

  void run();  // the tracer's thread: flushes, sends without export_on, stops
  ThreadBatch& thread_batch();
  // The next `n` spans of `tb`'s held records (n <= tb.spans) as a batch, under tb's
  // lock; the records wholly in it move to `done`.
  Body encode(ThreadBatch& tb, size_t n, std::vector<std::unique_ptr<RequestTrace>>& done);
  // A record whose spans are in a batch (or dropped) kept in this thread's spares, or freed.
  void recycle(std::unique_ptr<RequestTrace> trace);
  // `body` onto the send queue (and the sender started when export_on is used).
  void enqueue(Body body);
  // Sends one batch from the calling thread (the sink, or a blocking POST); counts it.
  bool deliver(const Body& body);
  bool post_to_collector(std::string_view body, size_t spans);
  // `spans` no longer waiting, counted as dropped.
  void drop(size_t spans);
  // The export_on sender: sends the queued batches one after another until none is left.
  boost::asio::awaitable<void> send_queued();
  // A buffer for the next batch: a sent body's, or none.
  std::string take_room();
  void give_back(std::string room);

  // Constant after construction (export_on's before the first request).
  const TracingConfig config_;
  const Clock& clock_;
  const SpanSink sink_;
  const uint64_t id_;  // unique in the process: the tag of this tracer's spares and batches
  std::optional<boost::asio::any_io_executor> executor_;
  io::UpstreamClient* client_ = nullptr;
  std::string collector_host_;
  uint16_t collector_port_ = 0;
  std::string collector_target_;

  std::atomic<uint64_t> exported_{0};
  std::atomic<uint64_t> dropped_{0};
  // Spans in open and queued batches (against max_queue); a batch leaves it when its
  // sending starts.
  std::atomic<size_t> waiting_spans_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> wall_offset_;

  // State below is protected by mu_ (taken after a ThreadBatch's lock, never before).
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::vector<std::shared_ptr<ThreadBatch>> threads_;  // every thread's batch
  std::deque<Body> queue_;                             // full batches to send, in order
  std::vector<std::string> rooms_;                     // sent bodies' buffers, for reuse
  bool sending_ = false;                               // export_on's sender is running
  bool stop_ = false;
  bool drained_ = false;  // stopped and sent what waited: the tracer's thread is done

  std::thread thread_;  // last: started when the rest is ready
};

}  // namespace kvgate::gateway
