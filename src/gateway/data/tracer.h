// Tracer: the gateway's trace context (W3C traceparent, core/trace/) and its span export
// (OTLP over HTTP, JSON), when `tracing:` is configured (docs/tracing.md).
//
// A request is traced when its client's traceparent says sampled, or, without one, at
// the configured ratio. A traced request carries a RequestTrace (ProxyCall::trace): the
// gateway's server span, which covers the request and holds the routing decision's
// attributes, and under it one client span per upstream hop (each attempt; the prefill
// and the decode hop of a P/D request), each with a span id of its own, which the engine
// receives as the parent id in the hop's `traceparent` header (`tracestate` passed on as
// it came). An untraced request has a null RequestTrace and costs nothing more.
//
// Export: finished spans go to a bounded queue (max_queue spans; a span that does not fit
// is dropped and counted); a thread of the tracer's own sends them in batches of at most
// batch_size every flush_ms (or as soon as a batch is full) to the collector, with a
// blocking HTTP client: never on an I/O thread, never on a request's path. A failed
// export drops its batch (counted) rather than holding memory for a collector that is
// down. stop() (or the destructor) sends what waits, a batch at a time, until an export
// fails: the rest is then dropped (counted), so a collector that is down holds the
// shutdown for one export's timeout at most. A test passes a SpanSink of its own instead
// of the collector.
//
//   auto tracer = std::make_unique<Tracer>(*config.tracing, clock);
//   std::unique_ptr<RequestTrace> t = tracer->begin(req);   // null: not traced
//   TracedHop hop(t.get(), "kvgate.upstream", url, up.headers);  // null t: nothing
//   auto sent = co_await upstream.send(host, port, up);
//   hop.end(sent);
//   // ~RequestTrace records the server span.
//
// Thread-safe: begin, start_hop/end_hop (on one request's RequestTrace from one thread at
// a time) and the counters may be used from every I/O thread. The Tracer must outlive
// every RequestTrace it made.
#pragma once

#include <atomic>
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
#include "core/trace/span.h"
#include "core/trace/trace_context.h"
#include "gateway/common/config.h"
#include "io/http_types.h"
#include "io/upstream_client.h"

namespace kvgate::gateway {

class Tracer;

// A hop's client span in progress (RequestTrace::start_hop .. end_hop).
struct HopSpan {
  trace::Span span;
};

// One traced request: its server span, recorded when this goes.
class RequestTrace {
 public:
  RequestTrace(Tracer& tracer, trace::TraceParent server, trace::SpanId client_parent,
               std::string tracestate, int64_t start_unix_nanos);
  ~RequestTrace();
  RequestTrace(const RequestTrace&) = delete;
  RequestTrace& operator=(const RequestTrace&) = delete;

  const trace::TraceParent& server() const { return server_; }
  // An attribute of the server span (the routing decision's, the answer's status).
  // `key` is a literal (trace::Attribute::key).
  void attribute(std::string_view key, trace::Attribute::Value value) {
    span_attributes_.push_back({key, std::move(value)});
  }
  // The answer's HTTP status: 5xx marks the server span failed.
  void set_status(int status) { http_status_ = status; }

  // A new client span under the server span, and its `traceparent` (and the client's
  // `tracestate`) put on `headers`, replacing those of an earlier attempt.
  HopSpan start_hop(std::string_view name, std::string_view endpoint_url,
                    io::UpstreamHeaders& headers);
  // Records the hop: `status` the engine's answer, 0 when the exchange failed (`error`).
  void end_hop(HopSpan hop, int status, std::string_view error = {});

 private:
  Tracer& tracer_;
  trace::TraceParent server_;
  trace::SpanId client_parent_;  // 0: kvgate started the trace
  std::string tracestate_;
  int64_t start_unix_nanos_;
  int http_status_ = 0;
  int hops_ = 0;
  std::vector<trace::Attribute> span_attributes_;
};

// One upstream hop's client span around a send: started (the traceparent put on the
// request's headers) when the request is traced, ended with the send's result. With a
// null trace it holds nothing and does nothing (the untraced path tests one pointer).
//   TracedHop traced(call.trace.get(), "kvgate.relay", endpoint->url, up.headers);
//   auto sent = co_await upstream->send(endpoint->host, endpoint->port, up);
//   traced.end(sent);
class TracedHop {
 public:
  TracedHop(RequestTrace* trace, std::string_view name, std::string_view endpoint_url,
            io::UpstreamHeaders& headers)
      : trace_(trace) {
    if (trace_) [[unlikely]] {
      span_ = trace_->start_hop(name, endpoint_url, headers);
    }
  }
  // Records the hop: the engine's status, or the exchange's error. Once; later calls do
  // nothing.
  void end(Result<std::unique_ptr<io::UpstreamExchange>>& result) {
    if (span_) [[unlikely]] {
      finish(result);
    }
  }

 private:
  void finish(Result<std::unique_ptr<io::UpstreamExchange>>& result);

  RequestTrace* trace_;
  std::optional<HopSpan> span_;
};

// Where the exporter sends a batch: true when it was accepted. Called on the exporter
// thread only, one batch at a time. Empty: OTLP/HTTP JSON to the configured collector.
using SpanSink = std::function<bool(std::span<const trace::Span> batch)>;

class Tracer {
 public:
  Tracer(TracingConfig config, const Clock& clock, SpanSink sink = {});
  ~Tracer();  // stop()
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  // Sends what waits (until an export fails) and stops the exporter; a span submitted
  // afterwards is dropped (counted). Idempotent; not concurrent with itself.
  void stop();

  // The request's trace, or null when it is not sampled.
  std::unique_ptr<RequestTrace> begin(const io::HttpRequest& req);

  // A finished span for export; dropped (and counted) when the queue is full or the
  // tracer stopped.
  void submit(trace::Span span);

  int64_t wall_now() const { return clock_.wall_now(); }
  trace::SpanId new_span_id();

  uint64_t spans_exported() const { return exported_.load(std::memory_order_relaxed); }
  uint64_t spans_dropped() const { return dropped_.load(std::memory_order_relaxed); }
  // kvgate_trace_spans_exported_total, kvgate_trace_spans_dropped_total.
  std::string render_metrics() const;

 private:
  void run();  // the exporter thread
  bool export_batch(const std::vector<trace::Span>& batch);
  bool post_to_collector(std::span<const trace::Span> batch);

  // Constant after construction.
  const TracingConfig config_;
  const Clock& clock_;
  const SpanSink sink_;

  std::atomic<uint64_t> exported_{0};
  std::atomic<uint64_t> dropped_{0};

  // State below is protected by mu_.
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<trace::Span> queue_;
  bool stop_ = false;

  std::thread exporter_;  // last: started when the rest is ready
};

}  // namespace kvgate::gateway
