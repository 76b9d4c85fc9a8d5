#include "gateway/data/tracer.h"

#include <fmt/format.h>
#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <cassert>
#include <charconv>
#include <chrono>
#include <cstring>
#include <iterator>
#include <memory>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "core/common/rng.h"
#include "core/route/failover.h"
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

// A thread's spare records: records of one tracer its requests ended, for the thread's
// next begins on it. Freed at the thread's exit (RequestTrace's destructor does not look
// at its tracer).
struct SpareRecords {
  uint64_t tracer = 0;  // their tracer's id; 0: none yet
  std::vector<std::unique_ptr<RequestTrace>> records;

  // Ready for the records of tracer `id`: another tracer's are freed, never used.
  void belong_to(uint64_t id) {
    if (tracer == id) return;
    records.clear();
    tracer = id;
  }
};

SpareRecords& thread_spares() {
  thread_local SpareRecords spares;
  return spares;
}

// A record's cache lines fetched ahead of its use (for writing when kWrite, else for
// reading). Records are used far apart: a thread's held records are encoded a batch at a
// time, up to a batch of requests after they were written, and a record goes back to the
// spares then, for a begin up to a batch of requests later; by then its lines are mostly
// out of the core's first caches, and a record's first touch would stall on them. The
// next one's fetched while this one is at work, neither stalls.
template <bool kWrite>
void prefetch_record(const RequestTrace* t) {
  const char* p = reinterpret_cast<const char*>(t);
  for (size_t at = 0; at < sizeof(RequestTrace); at += 64) __builtin_prefetch(p + at, kWrite);
}

// Buffers of sent bodies kept for the next batches (a batch's body is large: written over
// rather than grown anew).
constexpr size_t kKeptRooms = 4;

}  // namespace

RequestTrace::RequestTrace(Tracer& tracer, trace::TraceParent server, trace::SpanId client_parent,
                           std::string_view tracestate, Nanos received, int64_t wall_offset)
    : tracer_(tracer) {
  init(server, client_parent, tracestate, received, wall_offset);
}

void RequestTrace::init(trace::TraceParent server, trace::SpanId client_parent,
                        std::string_view tracestate, Nanos received, int64_t wall_offset) {
  // Every other field is at its default: the record is new or cleared.
  spans_.trace_id = server.trace_id;
  spans_.span_id = server.span_id;
  spans_.parent_span_id = client_parent;
  spans_.trace_flags = server.flags;
  spans_.trace_state = spans_.text.add(tracestate);
  wall_offset_ = wall_offset;
  answer_hop_open_ = false;
  spans_.start_unix_nanos = wall_at(received);
}

int64_t RequestTrace::wall_now() const { return wall_at(tracer_.steady_now()); }

HopStart RequestTrace::start_hop(std::string_view name, std::string_view endpoint_url,
                                 io::UpstreamRequest& request, TraceparentLine& traceparent,
                                 Nanos at) {
  assert(trace::json_plain(name));  // the encoder copies it as it is (HopSpan::name)
  HopStart hop;
  hop.span_id = tracer_.new_span_id();
  hop.name = name;
  // Usually the routing decision's endpoint, already in the record.
  hop.endpoint = spans_.routing && spans_.text.view(spans_.endpoint) == endpoint_url
                     ? spans_.endpoint
                     : spans_.text.add(endpoint_url);
  hop.start_unix_nanos = wall_at(at != 0 ? at : tracer_.steady_now());
  close_answer_hop(hop.start_unix_nanos);
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

trace::HopSpan RequestTrace::ended_hop(const HopStart& hop, int status) const {
  trace::HopSpan s;
  s.span_id = hop.span_id;
  s.name = hop.name;
  s.endpoint = hop.endpoint;
  s.start_unix_nanos = hop.start_unix_nanos;
  s.attempt = hop.attempt;
  s.status = status;
  return s;
}

void RequestTrace::end_hop(const HopStart& hop, int status, std::string_view error) {
  trace::HopSpan s = ended_hop(hop, status);
  s.end_unix_nanos = wall_now();
  if (status == 0) s.error = spans_.text.add(error);
  spans_.hops.push_back(s);
}

void RequestTrace::end_hop_with_answer(const HopStart& hop, int status) {
  spans_.hops.push_back(ended_hop(hop, status));  // its end: close_answer_hop
  answer_hop_open_ = true;
}

void EndRequestTrace::operator()(RequestTrace* trace) const {
  std::unique_ptr<RequestTrace> owned(trace);
  // Its end when the gateway gave none (set_end): now.
  if (owned->spans_.end_unix_nanos == 0) {
    owned->set_end(owned->tracer_.steady_now());
  } else {
    owned->close_answer_hop(owned->spans_.end_unix_nanos);  // opened after the answer
  }
  Tracer& tracer = owned->tracer_;
  tracer.submit(std::move(owned));
}

void TracedHop::finish(Result<std::unique_ptr<io::UpstreamExchange>>& result, Answer answer) {
  RequestTrace* trace = trace_;
  trace_ = nullptr;
  if (!result) {
    trace->end_hop(hop_, 0, result.error());
    return;
  }
  const int status = (*result)->status();
  if (answer != Answer::kNo && !route::failed_status(status, answer == Answer::kContinuation)) {
    trace->end_hop_with_answer(hop_, status);
  } else {
    trace->end_hop(hop_, status);
  }
}

// One thread's ended requests whose spans are not all in a batch yet, in the order they
// ended: the thread adds under its lock and, once they hold batch_size spans, encodes a
// batch from them (their records still in its core's cache) and keeps the records wholly
// in it for its next requests; the tracer's thread takes the rest at a flush or stop.
// Tagged with its tracer's id, like the spares.
struct Tracer::ThreadBatch {
  explicit ThreadBatch(std::string service_name) : batch(std::move(service_name)) {}
  std::mutex mu;
  std::vector<std::unique_ptr<RequestTrace>> held;
  size_t first = 0;            // held.front()'s first span not in a batch
  size_t spans = 0;            // the spans of `held` not in a batch
  trace::OtlpJsonBatch batch;  // the encoder (empty between batches)
};

namespace {

// This thread's batch of one tracer (the last one it submitted to).
struct ThreadBatchSlot {
  uint64_t tracer = 0;  // its tracer's id; 0: none
  std::shared_ptr<Tracer::ThreadBatch> batch;
};

ThreadBatchSlot& thread_batch_slot() {
  thread_local ThreadBatchSlot slot;
  return slot;
}

}  // namespace

Tracer::Tracer(TracingConfig config, const Clock& clock, SpanSink sink)
    : config_(std::move(config)),
      clock_(clock),
      sink_(std::move(sink)),
      id_(next_tracer_id.fetch_add(1, std::memory_order_relaxed)),
      wall_offset_(read_wall_offset(clock)),
      thread_([this] { run(); }) {}

Tracer::~Tracer() { stop(); }

void Tracer::export_on(boost::asio::any_io_executor executor, io::UpstreamClient& client) {
  auto url = io::parse_url(config_.collector);
  if (!url || sink_) return;  // (the config checked the URL; a test's sink sends itself)
  uint16_t port = 0;
  std::from_chars(url->port.data(), url->port.data() + url->port.size(), port);
  collector_host_ = url->host;
  collector_port_ = port;
  collector_target_ = url->target;
  client_ = &client;
  executor_ = std::move(executor);
}

void Tracer::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  stopping_.store(true, std::memory_order_relaxed);
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

RequestTracePtr Tracer::begin(const io::HttpRequest& req, Nanos received) {
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
  if (!spares.records.empty()) {
    // A record this thread ended, cleared here, then filled anew: no allocation.
    RequestTrace* t = spares.records.back().release();
    spares.records.pop_back();
    if (!spares.records.empty()) prefetch_record<true>(spares.records.back().get());
    t->spans_.clear();
    t->init(server, client_parent, tracestate, received, wall_offset());
    return RequestTracePtr(t);
  }
  return RequestTracePtr(
      new RequestTrace(*this, server, client_parent, tracestate, received, wall_offset()));
}

trace::SpanId Tracer::new_span_id() { return trace::new_span_id(thread_rng()); }

Tracer::ThreadBatch& Tracer::thread_batch() {
  ThreadBatchSlot& slot = thread_batch_slot();
  if (slot.tracer != id_) {
    slot.batch = std::make_shared<ThreadBatch>(config_.service_name);
    slot.tracer = id_;
    std::lock_guard lock(mu_);
    threads_.push_back(slot.batch);
  }
  return *slot.batch;
}

void Tracer::submit(std::unique_ptr<RequestTrace> trace) {
  const size_t spans = trace->spans().span_count();
  if (waiting_spans_.fetch_add(spans, std::memory_order_relaxed) + spans > config_.max_queue) {
    drop(spans);
    recycle(std::move(trace));
    return;
  }
  ThreadBatch& tb = thread_batch();
  // Usually no full batch, or one; more only when a request has more spans than a batch.
  std::vector<Body> full;
  std::vector<std::unique_ptr<RequestTrace>> done;  // wholly in a batch: for reuse
  {
    std::lock_guard lock(tb.mu);
    // Checked under the batch's lock: the stop's last flush takes this lock after
    // stopping_ is set, so a request either is held by then or sees the stop.
    if (stopping_.load(std::memory_order_relaxed)) {
      drop(spans);
      done.push_back(std::move(trace));
    } else {
      tb.held.push_back(std::move(trace));
      tb.spans += spans;
      while (tb.spans >= config_.batch_size) full.push_back(encode(tb, config_.batch_size, done));
    }
  }
  for (Body& body : full) enqueue(std::move(body));
  for (auto& record : done) recycle(std::move(record));
}

Tracer::Body Tracer::encode(ThreadBatch& tb, size_t n,
                            std::vector<std::unique_ptr<RequestTrace>>& done) {
  size_t whole = 0;  // records wholly in the batch
  for (size_t left = n; left > 0;) {
    if (whole + 1 < tb.held.size()) prefetch_record<false>(tb.held[whole + 1].get());
    const trace::RequestSpans& r = tb.held[whole]->spans();
    const size_t take = std::min(r.span_count() - tb.first, left);
    tb.batch.append({&r, tb.first, take});
    left -= take;
    tb.first += take;
    if (tb.first == r.span_count()) {
      ++whole;
      tb.first = 0;
    }
  }
  const auto end = tb.held.begin() + static_cast<std::ptrdiff_t>(whole);
  std::move(tb.held.begin(), end, std::back_inserter(done));
  tb.held.erase(tb.held.begin(), end);
  tb.spans -= n;
  return {tb.batch.take(take_room()), n};
}

void Tracer::recycle(std::unique_ptr<RequestTrace> trace) {
  // Kept for this thread's next request (cleared now when it grew on the heap, so that a
  // kept record holds no more than RequestSpans::clear keeps), or freed.
  SpareRecords& spares = thread_spares();
  spares.belong_to(id_);
  if (spares.records.size() < spare_limit()) {
    if (trace->spans().spilled()) trace->spans().clear();
    spares.records.push_back(std::move(trace));
  }
}

void Tracer::drop(size_t spans) {
  waiting_spans_.fetch_sub(spans, std::memory_order_relaxed);
  dropped_.fetch_add(spans, std::memory_order_relaxed);
}

std::string Tracer::take_room() {
  std::lock_guard lock(mu_);
  if (rooms_.empty()) return {};
  std::string room = std::move(rooms_.back());
  rooms_.pop_back();
  return room;
}

void Tracer::give_back(std::string room) {
  std::lock_guard lock(mu_);
  if (rooms_.size() < kKeptRooms) rooms_.push_back(std::move(room));
}

void Tracer::enqueue(Body body) {
  bool start_sender = false;
  {
    std::lock_guard lock(mu_);
    if (drained_) {
      // Made full while the tracer stopped, after its last send: dropped, counted.
      drop(body.spans);
      return;
    }
    queue_.push_back(std::move(body));
    if (executor_ && !sending_ && !stop_) start_sender = sending_ = true;
  }
  if (start_sender) {
    boost::asio::co_spawn(*executor_, send_queued(), boost::asio::detached);
  } else if (!executor_) {
    wake_.notify_one();
  }
}

boost::asio::awaitable<void> Tracer::send_queued() {
  while (true) {
    Body body;
    {
      std::lock_guard lock(mu_);
      if (queue_.empty() || stop_) {
        // At a stop, the tracer's thread sends what is left.
        sending_ = false;
        co_return;
      }
      body = std::move(queue_.front());
      queue_.pop_front();
    }
    waiting_spans_.fetch_sub(body.spans, std::memory_order_relaxed);
    io::UpstreamRequest request;
    request.method = "POST";
    request.target = collector_target_;
    request.fixed_headers = "Content-Type: application/json\r\n";
    request.borrowed_body = body.json.text();  // body outlives the send
    auto exchange = co_await client_->send(collector_host_, collector_port_, request);
    std::string error;
    if (!exchange) {
      error = exchange.error();
    } else {
      const int status = (*exchange)->status();
      auto answer = co_await (*exchange)->read_all(std::chrono::milliseconds(5'000), 64 << 10);
      if (!answer) {
        error = answer.error();
      } else if (status < 200 || status >= 300) {
        error = fmt::format("HTTP {}", status);
      }
    }
    (error.empty() ? exported_ : dropped_).fetch_add(body.spans, std::memory_order_relaxed);
    if (!error.empty()) {
      spdlog::warn("tracing: export of {} spans to {} failed: {}", body.spans, config_.collector,
                   error);
    }
    give_back(std::move(body.json.buffer));
  }
}

bool Tracer::deliver(const Body& body) {
  const std::string_view json = body.json.text();
  const bool ok = sink_ ? sink_(json, body.spans) : post_to_collector(json, body.spans);
  (ok ? exported_ : dropped_).fetch_add(body.spans, std::memory_order_relaxed);
  return ok;
}

void Tracer::run() {
  // Named, so that `top -H`, perf and bench/gateway_vs_nginx.bench.sh tell its CPU from the
  // I/O threads' (at most 15 characters).
  pthread_setname_np(pthread_self(), "kvgate-trace");
  auto flush_at = std::chrono::steady_clock::now() + config_.flush;
  std::unique_lock lock(mu_);
  while (true) {
    wake_.wait_until(lock, flush_at, [this] { return stop_ || (!executor_ && !queue_.empty()); });
    const bool flush = stop_ || std::chrono::steady_clock::now() >= flush_at;
    // The threads' held requests are taken after the stop was seen (a request that ends
    // later sees it: submit).
    const bool stop_flush = stop_;
    if (flush) {
      flush_at = std::chrono::steady_clock::now() + config_.flush;
      // The offset the next requests' spans take (Tracer::wall_offset): the wall clock as
      // it stands now (moved by NTP or an operator since the last flush).
      wall_offset_.store(read_wall_offset(clock_), std::memory_order_relaxed);
      // Every thread's held requests, encoded, join the queue (taken under the thread's
      // lock, then this one's: the order submit takes them in).
      const std::vector<std::shared_ptr<ThreadBatch>> threads = threads_;
      lock.unlock();
      std::vector<Body> partial;
      std::vector<std::unique_ptr<RequestTrace>> sent;  // freed here, outside the locks
      for (const auto& tb : threads) {
        std::lock_guard batch_lock(tb->mu);
        if (tb->spans > 0) partial.push_back(encode(*tb, tb->spans, sent));
      }
      sent.clear();
      lock.lock();
      for (Body& body : partial) queue_.push_back(std::move(body));
    }
    // Sent from here: without export_on, everything; with it, at a stop what is left
    // (its sender sends the rest, started here after a flush).
    if (executor_ && !stop_) {
      if (!queue_.empty() && !sending_) {
        sending_ = true;
        boost::asio::co_spawn(*executor_, send_queued(), boost::asio::detached);
      }
      continue;
    }
    while (!queue_.empty()) {
      Body body = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      waiting_spans_.fetch_sub(body.spans, std::memory_order_relaxed);
      const bool ok = deliver(body);
      give_back(std::move(body.json.buffer));
      lock.lock();
      if (stop_ && !ok) {
        // Stopping and the collector failed: the rest goes too (the drain is bounded by
        // one export's timeout, not one per batch).
        size_t rest = 0;
        for (const Body& b : queue_) rest += b.spans;
        queue_.clear();
        drained_ = true;
        const std::vector<std::shared_ptr<ThreadBatch>> threads = threads_;
        lock.unlock();
        std::vector<std::unique_ptr<RequestTrace>> held;  // freed outside the locks
        for (const auto& tb : threads) {
          std::lock_guard batch_lock(tb->mu);
          rest += tb->spans;
          std::move(tb->held.begin(), tb->held.end(), std::back_inserter(held));
          tb->held.clear();
          tb->first = 0;
          tb->spans = 0;
        }
        drop(rest);
        return;
      }
    }
    // Stopping: done once nothing waits (what was submitted before the stop, flushed
    // above, is sent; a batch made full after this is dropped by enqueue).
    if (stop_flush) {
      drained_ = true;
      return;
    }
  }
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
