#include "gateway/data/tracer.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "core/common/rng.h"
#include "core/trace/otlp_json.h"
#include "io/http_client.h"

namespace kvgate::gateway {
namespace {

// Each I/O thread draws ids from a generator of its own (no lock on the request path),
// seeded from the OS once per thread.
Rng& thread_rng() {
  thread_local Rng rng([] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }());
  return rng;
}

bool succeeded(int status) { return status > 0 && status < 500; }

}  // namespace

RequestTrace::RequestTrace(Tracer& tracer, trace::TraceParent server, trace::SpanId client_parent,
                           std::string tracestate, int64_t start_unix_nanos)
    : tracer_(tracer),
      server_(server),
      client_parent_(client_parent),
      tracestate_(std::move(tracestate)),
      start_unix_nanos_(start_unix_nanos) {
  span_attributes_.reserve(16);  // the routing decision's and the answer's, in one allocation
}

RequestTrace::~RequestTrace() {
  trace::Span s;
  s.trace_id = server_.trace_id;
  s.span_id = server_.span_id;
  s.parent_span_id = client_parent_;
  s.trace_state = std::move(tracestate_);  // the last use
  s.trace_flags = server_.flags;
  s.parent_is_remote = client_parent_ != 0;
  s.name = "kvgate.request";
  s.kind = trace::SpanKind::kServer;
  s.start_unix_nanos = start_unix_nanos_;
  s.end_unix_nanos = tracer_.wall_now();
  s.attributes = std::move(span_attributes_);
  if (http_status_ != 0) {
    s.attributes.push_back({"http.response.status_code", int64_t{http_status_}});
  }
  s.attributes.push_back({"kvgate.hops", int64_t{hops_}});
  if (http_status_ >= 500 || http_status_ == 0) {
    s.status = trace::SpanStatus::kError;
    s.status_message = http_status_ == 0 ? "no answer" : fmt::format("HTTP {}", http_status_);
  }
  tracer_.submit(std::move(s));
}

HopSpan RequestTrace::start_hop(std::string_view name, std::string_view endpoint_url,
                                io::UpstreamHeaders& headers) {
  HopSpan hop;
  hop.span.trace_id = server_.trace_id;
  hop.span.span_id = tracer_.new_span_id();
  hop.span.parent_span_id = server_.span_id;
  hop.span.trace_state = tracestate_;
  hop.span.trace_flags = server_.flags;
  hop.span.name = std::string(name);
  hop.span.kind = trace::SpanKind::kClient;
  hop.span.start_unix_nanos = tracer_.wall_now();
  hop.span.attributes.reserve(3);
  hop.span.attributes.push_back({"server.address", std::string(endpoint_url)});
  hop.span.attributes.push_back({"kvgate.attempt", int64_t{hops_}});
  ++hops_;
  // An earlier attempt's fields go: each hop names its own span as the engine's parent.
  std::erase_if(headers,
                [](const auto& h) { return h.first == "traceparent" || h.first == "tracestate"; });
  headers.emplace_back("traceparent", trace::format_traceparent(
                                          {server_.trace_id, hop.span.span_id, server_.flags}));
  if (!tracestate_.empty()) headers.emplace_back("tracestate", tracestate_);
  return hop;
}

void RequestTrace::end_hop(HopSpan hop, int status, std::string_view error) {
  trace::Span& s = hop.span;
  s.end_unix_nanos = tracer_.wall_now();
  if (status != 0) s.attributes.push_back({"http.response.status_code", int64_t{status}});
  if (!succeeded(status)) {
    s.status = trace::SpanStatus::kError;
    s.status_message = status == 0 ? std::string(error) : fmt::format("HTTP {}", status);
  }
  tracer_.submit(std::move(s));
}

void TracedHop::finish(Result<std::unique_ptr<io::UpstreamExchange>>& result) {
  HopSpan hop = std::move(*span_);
  span_.reset();
  if (result) {
    trace_->end_hop(std::move(hop), (*result)->status());
  } else {
    trace_->end_hop(std::move(hop), 0, result.error());
  }
}

Tracer::Tracer(TracingConfig config, const Clock& clock, SpanSink sink)
    : config_(std::move(config)),
      clock_(clock),
      sink_(std::move(sink)),
      exporter_([this] { run(); }) {}

Tracer::~Tracer() { stop(); }

void Tracer::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (exporter_.joinable()) exporter_.join();
}

std::unique_ptr<RequestTrace> Tracer::begin(const io::HttpRequest& req) {
  std::optional<trace::TraceParent> parent;
  if (auto h = req.header("traceparent")) parent = trace::parse_traceparent(*h);
  Rng& rng = thread_rng();
  if (!trace::sampled(parent ? &*parent : nullptr, config_.ratio, rng.uniform())) return nullptr;
  trace::TraceParent server = parent ? trace::child_of(*parent, rng) : trace::start_trace(rng);
  std::string tracestate;
  // tracestate only means something beside the traceparent it came with.
  if (parent) {
    if (auto s = req.header("tracestate")) tracestate = std::string(*s);
  }
  return std::make_unique<RequestTrace>(*this, server, parent ? parent->span_id : 0,
                                        std::move(tracestate), clock_.wall_now());
}

trace::SpanId Tracer::new_span_id() { return trace::new_span_id(thread_rng()); }

void Tracer::submit(trace::Span span) {
  bool full_batch = false;
  {
    std::lock_guard lock(mu_);
    if (stop_ || queue_.size() >= config_.max_queue) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    queue_.push_back(std::move(span));
    full_batch = queue_.size() == config_.batch_size;
  }
  if (full_batch) wake_.notify_one();
}

void Tracer::run() {
  std::vector<trace::Span> batch;
  std::unique_lock lock(mu_);
  while (true) {
    wake_.wait_for(lock, config_.flush,
                   [this] { return stop_ || queue_.size() >= config_.batch_size; });
    // Everything waiting goes, a batch at a time (at stop too: the last spans).
    while (!queue_.empty()) {
      const size_t n = std::min(queue_.size(), config_.batch_size);
      batch.clear();
      for (size_t i = 0; i < n; ++i) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      lock.unlock();
      const bool ok = export_batch(batch);
      lock.lock();
      if (stop_ && !ok) {
        // Stopping and the collector failed: the rest goes too (the drain is bounded by
        // one export's timeout, not one per batch).
        dropped_.fetch_add(queue_.size(), std::memory_order_relaxed);
        queue_.clear();
      }
    }
    if (stop_) return;
  }
}

bool Tracer::export_batch(const std::vector<trace::Span>& batch) {
  const bool ok = sink_ ? sink_(batch) : post_to_collector(batch);
  (ok ? exported_ : dropped_).fetch_add(batch.size(), std::memory_order_relaxed);
  return ok;
}

bool Tracer::post_to_collector(std::span<const trace::Span> batch) {
  // One keep-alive connection to the collector, this thread's only.
  static thread_local io::HttpKeepAliveClient client;
  const std::string body = trace::otlp_json(batch, config_.service_name);
  auto r = client.fetch("POST", config_.collector, body, {{"Content-Type", "application/json"}},
                        std::chrono::milliseconds(5'000));
  if (r && r->status >= 200 && r->status < 300) return true;
  spdlog::warn("tracing: export of {} spans to {} failed: {}", batch.size(), config_.collector,
               r ? fmt::format("HTTP {}", r->status) : r.error());
  return false;
}

std::string Tracer::render_metrics() const {
  return fmt::format(
      "# HELP kvgate_trace_spans_exported_total Spans the collector accepted.\n"
      "# TYPE kvgate_trace_spans_exported_total counter\n"
      "kvgate_trace_spans_exported_total {}\n"
      "# HELP kvgate_trace_spans_dropped_total Spans dropped: the export queue was full, or "
      "the collector refused or did not answer.\n"
      "# TYPE kvgate_trace_spans_dropped_total counter\n"
      "kvgate_trace_spans_dropped_total {}\n",
      spans_exported(), spans_dropped());
}

}  // namespace kvgate::gateway
