#include "gateway/data/tracer.h"

#include <fmt/format.h>
#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <chrono>
#include <cstring>
#include <iterator>
#include <memory>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "core/common/rng.h"
#include "core/trace/json_cursor.h"
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

// The value of header `name` (as the gateway itself spells it) in `headers`, added empty
// when absent: an earlier attempt's is rewritten in place.
std::string& header_value(io::UpstreamHeaders& headers, std::string_view name) {
  for (auto& [key, value] : headers) {
    if (key == name) return value;
  }
  return headers
      .emplace_back(std::piecewise_construct, std::forward_as_tuple(name), std::forward_as_tuple())
      .second;
}

// Tracers' ids, the tags of their spares: never reused (an address could be, by a later
// tracer).
std::atomic<uint64_t> next_tracer_id{1};

// A thread's spare records: cleared records of one tracer, for the thread's next begins on
// it. Freed at the thread's exit (RequestTrace's destructor does not look at its tracer).
struct SpareRecords {
  uint64_t tracer = 0;  // their tracer's id; 0: none yet
  size_t count = 0;     // records[0, count) are there
  std::unique_ptr<RequestTrace> records[Tracer::kThreadSpares];

  // Ready for the records of tracer `id`: another tracer's are freed, never used.
  void belong_to(uint64_t id) {
    if (tracer == id) return;
    for (size_t i = 0; i < count; ++i) records[i].reset();
    count = 0;
    tracer = id;
  }
};

SpareRecords& thread_spares() {
  thread_local SpareRecords spares;
  return spares;
}

// An empty vector with room for `n` records.
std::vector<std::unique_ptr<RequestTrace>> with_room(size_t n) {
  std::vector<std::unique_ptr<RequestTrace>> v;
  v.reserve(n);
  return v;
}

}  // namespace

RequestTrace::RequestTrace(Tracer& tracer, trace::TraceParent server, trace::SpanId client_parent,
                           std::string_view tracestate, int64_t start_unix_nanos)
    : tracer_(tracer) {
  init(server, client_parent, tracestate, start_unix_nanos);
}

void RequestTrace::init(trace::TraceParent server, trace::SpanId client_parent,
                        std::string_view tracestate, int64_t start_unix_nanos) {
  // Every other field is at its default: the record is new or cleared.
  spans_.trace_id = server.trace_id;
  spans_.span_id = server.span_id;
  spans_.parent_span_id = client_parent;
  spans_.trace_flags = server.flags;
  spans_.trace_state = spans_.text.add(tracestate);
  spans_.start_unix_nanos = start_unix_nanos;
}

HopStart RequestTrace::start_hop(std::string_view name, std::string_view endpoint_url,
                                 io::UpstreamRequest& request, TraceparentLine& traceparent) {
  assert(trace::json_plain(name));  // the exporter copies it as it is (HopSpan::name)
  HopStart hop;
  hop.span_id = tracer_.new_span_id();
  hop.name = name;
  // Usually the routing decision's endpoint, already in the record.
  hop.endpoint = spans_.routing && spans_.text.view(spans_.endpoint) == endpoint_url
                     ? spans_.endpoint
                     : spans_.text.add(endpoint_url);
  hop.start_unix_nanos = tracer_.wall_now();
  hop.attempt = spans_.hops_started++;
  // Each hop names its own span as the engine's parent (an earlier attempt's line is
  // replaced).
  char* p = traceparent.line;
  std::memcpy(p, TraceparentLine::kName.data(), TraceparentLine::kName.size());
  p += TraceparentLine::kName.size();
  trace::write_traceparent(p, {spans_.trace_id, hop.span_id, spans_.trace_flags});
  std::memcpy(p + trace::kTraceparentSize, "\r\n", 2);
  request.hop_headers = traceparent.text();
  if (const std::string_view state = spans_.text.view(spans_.trace_state); !state.empty()) {
    header_value(request.headers, "tracestate").assign(state);
  }
  return hop;
}

void RequestTrace::end_hop(const HopStart& hop, int status, std::string_view error) {
  trace::HopSpan s;
  s.span_id = hop.span_id;
  s.name = hop.name;
  s.endpoint = hop.endpoint;
  s.start_unix_nanos = hop.start_unix_nanos;
  s.end_unix_nanos = tracer_.wall_now();
  s.attempt = hop.attempt;
  s.status = status;
  if (status == 0) s.error = spans_.text.add(error);
  spans_.hops.push_back(s);
}

void EndRequestTrace::operator()(RequestTrace* trace) const {
  std::unique_ptr<RequestTrace> owned(trace);
  Tracer& tracer = owned->tracer_;
  owned->spans_.end_unix_nanos = tracer.wall_now();
  tracer.submit(std::move(owned));
}

void TracedHop::finish(Result<std::unique_ptr<io::UpstreamExchange>>& result) {
  RequestTrace* trace = trace_;
  trace_ = nullptr;
  if (result) {
    trace->end_hop(hop_, (*result)->status());
  } else {
    trace->end_hop(hop_, 0, result.error());
  }
}

Tracer::Tracer(TracingConfig config, const Clock& clock, SpanSink sink)
    : config_(std::move(config)),
      clock_(clock),
      sink_(std::move(sink)),
      id_(next_tracer_id.fetch_add(1, std::memory_order_relaxed)),
      free_limit_(std::min(config_.max_queue, std::max(kFreeRecords, 2 * config_.batch_size))),
      free_(with_room(free_limit_)),  // before the exporter starts
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

RequestTracePtr Tracer::begin(const io::HttpRequest& req) {
  std::optional<trace::TraceParent> parent;
  if (auto h = req.header("traceparent")) parent = trace::parse_traceparent(*h);
  Rng& rng = thread_rng();
  if (!trace::sampled(parent ? &*parent : nullptr, config_.ratio, rng.uniform())) return nullptr;
  const trace::TraceParent server =
      parent ? trace::child_of(*parent, rng) : trace::start_trace(rng);
  std::string_view tracestate;
  // tracestate only means something beside the traceparent it came with.
  if (parent) {
    if (auto s = req.header("tracestate")) tracestate = *s;
  }
  const trace::SpanId client_parent = parent ? parent->span_id : 0;
  SpareRecords& spares = thread_spares();
  spares.belong_to(id_);
  if (spares.count > 0) {
    // Sent: cleared here, on the thread that fills it (the exporter only read it: its
    // lines are not taken back from another core's cache), then filled anew, no
    // allocation.
    RequestTrace* t = spares.records[--spares.count].release();
    t->spans_.clear();
    t->init(server, client_parent, tracestate, clock_.wall_now());
    return RequestTracePtr(t);
  }
  return RequestTracePtr(
      new RequestTrace(*this, server, client_parent, tracestate, clock_.wall_now()));
}

trace::SpanId Tracer::new_span_id() { return trace::new_span_id(thread_rng()); }

void Tracer::submit(std::unique_ptr<RequestTrace> trace) {
  const size_t spans = trace->spans().span_count();
  bool full_batch = false;
  SpareRecords& spares = thread_spares();
  spares.belong_to(id_);  // outside the lock
  {
    std::lock_guard lock(mu_);
    // This thread's spares are filled up from the free list for its next begins (usually
    // the one the last begin took: one pointer moved under the lock taken anyway).
    while (spares.count < kThreadSpares && !free_.empty()) {
      spares.records[spares.count++] = std::move(free_.back());
      free_.pop_back();
    }
    if (stop_ || queued_spans_ + held_spans_ + spans > config_.max_queue) {
      dropped_.fetch_add(spans, std::memory_order_relaxed);
    } else {
      queue_.push_back(std::move(trace));
      // The exporter waits for a full batch of the spans waiting, those it holds (a
      // record split between batches, a partial batch) included.
      const size_t waiting = queued_spans_ + held_spans_;
      full_batch = waiting < config_.batch_size && waiting + spans >= config_.batch_size;
      queued_spans_ += spans;
    }
  }
  if (full_batch) wake_.notify_one();
  // A dropped record is freed here, outside the lock.
}

size_t Tracer::free_records() const {
  std::lock_guard lock(mu_);
  return free_.size();
}

void Tracer::run() {
  // Named, so that `top -H`, perf and bench/gateway_vs_nginx.bench.sh tell its CPU from the
  // I/O threads' (at most 15 characters).
  pthread_setname_np(pthread_self(), "kvgate-trace");
  // The records taken from the queue, in order, and not yet wholly sent: `next` is the
  // first not wholly in a batch, `first` its first span not in one.
  std::vector<std::unique_ptr<RequestTrace>> held;
  size_t next = 0;
  size_t first = 0;
  std::vector<trace::SpanRun> batch;
  std::string body;  // every batch's, its size and capacity kept (write_otlp_json)
  body.reserve(std::min<size_t>(config_.batch_size, 2048) * 640 + 256);
  auto flush_at = std::chrono::steady_clock::now() + config_.flush;
  // Declared after `held`: on return, mu_ is released before what `held` still owns is
  // freed.
  std::unique_lock lock(mu_);
  while (true) {
    wake_.wait_until(lock, flush_at,
                     [this] { return stop_ || queued_spans_ + held_spans_ >= config_.batch_size; });
    // Full batches go as soon as they are there; the rest waits for flush_ms (or the
    // stop): sending whatever came in meanwhile after each export would make the
    // batches as small as the exports are quick, multiplying the per-batch costs.
    const bool flush = stop_ || std::chrono::steady_clock::now() >= flush_at;
    if (flush) flush_at = std::chrono::steady_clock::now() + config_.flush;
    // The whole queue is taken at once (one lock for every waiting record).
    if (held.empty()) {
      held.swap(queue_);  // the queue gets `held`'s capacity back
    } else {
      std::move(queue_.begin(), queue_.end(), std::back_inserter(held));
      queue_.clear();
    }
    held_spans_ += queued_spans_;
    queued_spans_ = 0;
    while (held_spans_ >= config_.batch_size || (flush && held_spans_ > 0)) {
      const size_t sent_from = next;
      batch.clear();
      size_t n = 0;
      while (next < held.size() && n < config_.batch_size) {
        const trace::RequestSpans& r = held[next]->spans();
        const size_t take = std::min(r.span_count() - first, config_.batch_size - n);
        batch.push_back({&r, first, take});
        n += take;
        first += take;
        if (first == r.span_count()) {
          ++next;
          first = 0;
        }
      }
      held_spans_ -= n;
      // The free list's room: it only shrinks until the lock is taken again (submit takes
      // from it, this thread alone puts back).
      const size_t room = free_limit_ - free_.size();
      lock.unlock();
      const bool ok = export_batch(batch, n, body);
      // The records wholly sent, outside the lock: kept for reuse while the free list has
      // room (begin clears one before it fills it), freed past it (the memory held stays
      // within max_queue spans, a batch and the free list's bound).
      // A record that grew on the heap is cleared here, so that a kept one holds no more
      // than RequestSpans::clear keeps (rare: most records' text and hops are inline).
      const size_t kept = std::min(room, next - sent_from);
      for (size_t i = sent_from; i < sent_from + kept; ++i) {
        if (held[i]->spans().spilled()) held[i]->spans().clear();
      }
      for (size_t i = sent_from + kept; i < next; ++i) held[i].reset();
      lock.lock();
      // Onto the free list all at once (its room is reserved: no allocation under the lock).
      for (size_t i = sent_from; i < sent_from + kept; ++i) free_.push_back(std::move(held[i]));
      if (stop_ && !ok) {
        // Stopping and the collector failed: the rest goes too (the drain is bounded by
        // one export's timeout, not one per batch), freed with `held` on return, after
        // the lock is released.
        dropped_.fetch_add(held_spans_ + queued_spans_, std::memory_order_relaxed);
        held_spans_ = 0;
        queued_spans_ = 0;
        std::move(queue_.begin(), queue_.end(), std::back_inserter(held));
        queue_.clear();
        return;
      }
    }
    // The records wholly sent (recycled or freed) leave `held`.
    held.erase(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(next));
    next = 0;
    // Stopping: done once nothing waits (a record submitted during the last export,
    // before the stop, is still sent: the wait above returns at once).
    if (stop_ && queue_.empty() && held.empty()) return;
  }
}

bool Tracer::export_batch(std::span<const trace::SpanRun> batch, size_t spans, std::string& body) {
  // Written over the last batch's text: `body` keeps its size and capacity (no clearing,
  // no reallocation once it is as large as a batch needs).
  const std::string_view json = trace::write_otlp_json(body, batch, config_.service_name);
  const bool ok = sink_ ? sink_(json, spans) : post_to_collector(json, spans);
  (ok ? exported_ : dropped_).fetch_add(spans, std::memory_order_relaxed);
  return ok;
}

bool Tracer::post_to_collector(std::string_view body, size_t spans) {
  // One keep-alive connection to the collector, this thread's only.
  static thread_local io::HttpKeepAliveClient client;
  static const std::vector<io::HttpHeader> kHeaders{
      io::HttpHeader{"Content-Type", "application/json"}};
  auto r =
      client.fetch("POST", config_.collector, body, kHeaders, std::chrono::milliseconds(5'000));
  if (r && r->status >= 200 && r->status < 300) return true;
  spdlog::warn("tracing: export of {} spans to {} failed: {}", spans, config_.collector,
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
