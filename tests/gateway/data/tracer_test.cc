// The Tracer's export queue (gateway/data/tracer.h) with a sink of the test's own instead of a
// collector: a partial batch waits for flush_ms and a full one goes at once, batches
// never exceed batch_size (a request's spans split between two batches if need be), a
// full queue drops and counts, stop() sends what waits, and a failed export at stop
// drops the rest at once (one export, not one per batch). And a RequestTrace from
// begin(): its hops' spans go with its server span in one submission, each hop's
// traceparent replacing the last one's in the headers. And the records' recycling: a
// record reused after its request ended carries nothing of that request, a tracer never
// uses another's spare records, a thread keeps at most spare_limit() of them. And the
// spans' times: steady readings on the wall clock by the tracer's offset, which a wall
// clock step moves for the requests after the next flush, not for one under way.
#include "gateway/data/tracer.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "core/common/clock.h"
#include "io/http_types.h"
#include "io/upstream_client.h"

namespace kvgate::gateway {
// Named after the file, not anonymous: the tests compile in unity batches.
namespace tracer_test {

using namespace std::chrono_literals;

// Records the batches the exporter sends; the first call may wait for release().
struct Recorder {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<size_t> batches;
  std::vector<std::string> bodies;
  bool hold_first = false;
  bool released = false;
  bool accept = true;

  SpanSink sink() {
    return [this](std::string_view body, size_t spans) {
      std::unique_lock lock(mu);
      batches.push_back(spans);
      bodies.emplace_back(body);
      cv.notify_all();
      if (hold_first) cv.wait(lock, [this] { return released; });
      return accept;
    };
  }
  void release() {
    {
      std::lock_guard lock(mu);
      released = true;
    }
    cv.notify_all();
  }
  // Whether `n` batches came within 10 s.
  bool wait_batches(size_t n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, 10s, [this, n] { return batches.size() >= n; });
  }
  std::vector<size_t> sizes() {
    std::lock_guard lock(mu);
    return batches;
  }
  // Every span of every body, in the order sent.
  std::vector<boost::json::object> spans() {
    std::lock_guard lock(mu);
    std::vector<boost::json::object> out;
    for (const std::string& body : bodies) {
      const boost::json::value v = boost::json::parse(body);
      for (const auto& s :
           v.at("resourceSpans").at(0).at("scopeSpans").at(0).at("spans").as_array()) {
        out.push_back(s.as_object());
      }
    }
    return out;
  }
};

TracingConfig config(size_t batch_size, size_t max_queue, std::chrono::milliseconds flush) {
  TracingConfig c;
  c.collector = "http://127.0.0.1:9/v1/traces";  // never used: the sink replaces it
  c.batch_size = batch_size;
  c.max_queue = max_queue;
  c.flush = flush;
  return c;
}

// Every request traced (ratio 1.0), batches of `batch_size` spans, no flush by time: what
// the tests that trace requests through begin() use.
TracingConfig traced(size_t batch_size) {
  TracingConfig c = config(batch_size, 1000, std::chrono::milliseconds(3'600'000));
  c.ratio = 1.0;
  return c;
}

// A finished request of `hops` ended hops (1 + hops spans), as a test submits it.
std::unique_ptr<RequestTrace> finished_request(Tracer& tracer, uint64_t i, int hops = 0) {
  auto t = std::make_unique<RequestTrace>(
      tracer, trace::TraceParent{{1, 2}, i + 1, trace::kSampledFlag}, 0, "", 0, 0);
  io::UpstreamRequest up;
  TraceparentLine traceparent;
  for (int h = 0; h < hops; ++h) {
    t->end_hop(t->start_hop("kvgate.upstream", "http://127.0.0.1:8001", up, traceparent), 200);
  }
  return t;
}

std::string span_name(const boost::json::object& span) {
  return std::string(span.at("name").as_string());
}

// The attributes of a span, key to value object (as JSON text).
std::map<std::string, std::string> span_attributes(const boost::json::object& span) {
  std::map<std::string, std::string> out;
  for (const auto& a : span.at("attributes").as_array()) {
    out[std::string(a.at("key").as_string())] = boost::json::serialize(a.at("value"));
  }
  return out;
}

// Polls `done` for up to 10 s.
bool within_10s(const std::function<bool()>& done) {
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// The exporter thread is named, so that top -H, perf and the gateway bench tell its CPU
// from the I/O threads'.
TEST(Tracer, TheExporterThreadIsNamed) {
  const auto named = [] {
    size_t n = 0;
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
      std::ifstream comm(task.path() / "comm");
      std::string name;
      std::getline(comm, name);
      n += name == "kvgate-trace" ? 1 : 0;
    }
    return n;
  };
  const size_t before = named();
  ManualClock clock;
  Recorder rec;
  auto tracer = std::make_unique<Tracer>(config(3, 100, std::chrono::milliseconds(3'600'000)),
                                         clock, rec.sink());
  EXPECT_TRUE(within_10s([&] { return named() == before + 1; }));
  tracer.reset();
  EXPECT_EQ(named(), before);
}

TEST(Tracer, APartialBatchWaitsAndAFullOneGoesAtOnce) {
  ManualClock clock;
  Recorder rec;
  Tracer tracer(config(3, 100, std::chrono::milliseconds(3'600'000)), clock, rec.sink());
  tracer.submit(finished_request(tracer, 0));
  tracer.submit(finished_request(tracer, 1));
  std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(rec.sizes().empty()) << "a partial batch went before flush_ms";
  tracer.submit(finished_request(tracer, 2));
  ASSERT_TRUE(rec.wait_batches(1));
  EXPECT_EQ(rec.sizes(), std::vector<size_t>{3});
  EXPECT_TRUE(within_10s([&] { return tracer.spans_exported() == 3u; }));
  EXPECT_EQ(tracer.spans_dropped(), 0u);
}

// What comes in while a batch is being sent goes out in full batches as soon as there is
// one; the rest waits for flush_ms (here: the stop) rather than going at once as a small
// batch of its own.
TEST(Tracer, AfterAnExportOnlyFullBatchesGoBeforeFlush) {
  ManualClock clock;
  Recorder rec;
  rec.hold_first = true;
  Tracer tracer(config(2, 100, std::chrono::milliseconds(3'600'000)), clock, rec.sink());
  tracer.submit(finished_request(tracer, 0));
  tracer.submit(finished_request(tracer, 1));
  ASSERT_TRUE(rec.wait_batches(1));  // the first export is in progress
  for (uint64_t i = 2; i < 5; ++i) tracer.submit(finished_request(tracer, i));  // 3 spans
  rec.release();
  ASSERT_TRUE(rec.wait_batches(2));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(rec.sizes(), (std::vector<size_t>{2, 2})) << "a partial batch went before flush_ms";
  // One more span makes the held one a full batch: it goes at once.
  tracer.submit(finished_request(tracer, 5));
  ASSERT_TRUE(rec.wait_batches(3));
  EXPECT_EQ(rec.sizes(), (std::vector<size_t>{2, 2, 2}));
  tracer.submit(finished_request(tracer, 6));
  tracer.stop();
  EXPECT_EQ(rec.sizes(), (std::vector<size_t>{2, 2, 2, 1}));
  EXPECT_EQ(tracer.spans_exported(), 7u);
  EXPECT_EQ(tracer.spans_dropped(), 0u);
}

// A request's spans split between batches: the part left waits for flush_ms like any
// partial batch, and a new request's spans complete it into a full batch.
TEST(Tracer, TheRestOfASplitRequestJoinsTheNextBatch) {
  ManualClock clock;
  Recorder rec;
  Tracer tracer(config(3, 100, std::chrono::milliseconds(3'600'000)), clock, rec.sink());
  tracer.submit(finished_request(tracer, 0, 4));  // 5 spans: one batch of 3, 2 wait
  ASSERT_TRUE(rec.wait_batches(1));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(rec.sizes(), std::vector<size_t>{3});
  tracer.submit(finished_request(tracer, 1));  // 1 span: with the 2 waiting, a full batch
  ASSERT_TRUE(rec.wait_batches(2));
  EXPECT_EQ(rec.sizes(), (std::vector<size_t>{3, 3}));
  const std::vector<boost::json::object> spans = rec.spans();
  ASSERT_EQ(spans.size(), 6u);
  EXPECT_EQ(span_name(spans[3]), "kvgate.upstream");
  EXPECT_EQ(span_name(spans[4]), "kvgate.request");
  EXPECT_EQ(span_name(spans[5]), "kvgate.request");
  EXPECT_EQ(spans[5].at("spanId").as_string(), trace::to_hex(trace::SpanId{2}));
  tracer.stop();
  EXPECT_EQ(tracer.spans_exported(), 6u);
}

TEST(Tracer, FlushSendsAPartialBatch) {
  ManualClock clock;
  Recorder rec;
  Tracer tracer(config(100, 1000, 20ms), clock, rec.sink());
  tracer.submit(finished_request(tracer, 0));
  ASSERT_TRUE(rec.wait_batches(1));
  EXPECT_EQ(rec.sizes(), std::vector<size_t>{1});
  EXPECT_TRUE(within_10s([&] { return tracer.spans_exported() == 1u; }));
}

TEST(Tracer, AFullQueueDropsAndCountsAndBatchesStayWithinBatchSize) {
  ManualClock clock;
  Recorder rec;
  rec.hold_first = true;
  Tracer tracer(config(2, 4, std::chrono::milliseconds(3'600'000)), clock, rec.sink());
  tracer.submit(finished_request(tracer, 0));
  tracer.submit(finished_request(tracer, 1));
  ASSERT_TRUE(rec.wait_batches(1));  // the exporter holds the first batch: the queue is empty
  for (uint64_t i = 2; i < 8; ++i) tracer.submit(finished_request(tracer, i));
  // Four fit (max_queue), two do not.
  EXPECT_EQ(tracer.spans_dropped(), 2u);
  rec.release();
  ASSERT_TRUE(within_10s([&] { return tracer.spans_exported() == 6u; }));
  EXPECT_EQ(rec.sizes(), (std::vector<size_t>{2, 2, 2}));
  EXPECT_EQ(tracer.spans_dropped(), 2u);
  const std::string m = tracer.render_metrics();
  EXPECT_NE(m.find("kvgate_trace_spans_exported_total 6\n"), std::string::npos) << m;
  EXPECT_NE(m.find("kvgate_trace_spans_dropped_total 2\n"), std::string::npos) << m;
}

TEST(Tracer, StopSendsWhatWaitsInBatches) {
  ManualClock clock;
  Recorder rec;
  Tracer tracer(config(2, 100, std::chrono::milliseconds(3'600'000)), clock, rec.sink());
  for (uint64_t i = 0; i < 5; ++i) tracer.submit(finished_request(tracer, i));
  tracer.stop();
  EXPECT_EQ(tracer.spans_exported(), 5u);
  EXPECT_EQ(tracer.spans_dropped(), 0u);
  size_t total = 0;
  for (size_t n : rec.sizes()) {
    EXPECT_GE(n, 1u);
    EXPECT_LE(n, 2u);
    total += n;
  }
  EXPECT_EQ(total, 5u);
  // Stopped: a late span is dropped, counted.
  tracer.submit(finished_request(tracer, 9));
  EXPECT_EQ(tracer.spans_dropped(), 1u);
  tracer.stop();  // idempotent
}

TEST(Tracer, AFailedExportAtStopDropsTheRestAtOnce) {
  ManualClock clock;
  Recorder rec;
  rec.hold_first = true;
  rec.accept = false;  // the collector is down
  Tracer tracer(config(2, 10'000, std::chrono::milliseconds(3'600'000)), clock, rec.sink());
  tracer.submit(finished_request(tracer, 0));
  tracer.submit(finished_request(tracer, 1));
  ASSERT_TRUE(rec.wait_batches(1));  // the first export is in progress
  for (uint64_t i = 2; i < 22; ++i) tracer.submit(finished_request(tracer, i));
  uint64_t submitted = 22;
  std::thread stopper([&tracer] { tracer.stop(); });
  // Stopping shows as a submitted span being dropped (the queue has room for many more).
  bool stopping = false;
  for (int i = 0; i < 5'000 && !stopping; ++i) {
    const uint64_t before = tracer.spans_dropped();
    tracer.submit(finished_request(tracer, submitted++));
    stopping = tracer.spans_dropped() > before;
    if (!stopping) std::this_thread::sleep_for(1ms);
  }
  rec.release();  // the first export fails: the rest is dropped, not sent batch by batch
  stopper.join();
  ASSERT_TRUE(stopping);
  EXPECT_EQ(rec.sizes(), std::vector<size_t>{2});
  EXPECT_EQ(tracer.spans_exported(), 0u);
  EXPECT_EQ(tracer.spans_dropped(), submitted);
}

// A request from begin(): its hops' spans go with its server span, at its end, in one
// submission; each hop's traceparent replaces the last one's in the headers, in place.
TEST(Tracer, ARequestGoesOnceWithItsHopSpans) {
  ManualClock clock;
  Recorder rec;
  TracingConfig c = traced(100);
  Tracer tracer(c, clock, rec.sink());
  io::HttpRequest req;
  req.fields.add("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  req.fields.add("tracestate", "vendor=abc");
  io::UpstreamRequest up;
  up.headers = {{"Content-Type", "application/json"}};
  TraceparentLine traceparent;
  trace::SpanId second_hop = 0;
  {
    RequestTracePtr t = tracer.begin(req);
    ASSERT_TRUE(t != nullptr);
    EXPECT_EQ(t->server().trace_id, (trace::TraceId{0x4bf92f3577b34da6ULL, 0xa3ce929d0e0e4736ULL}));
    t->set_model("m1");
    t->set_pool("chat");
    t->set_path("/v1/chat/completions");
    t->set_routing("http://127.0.0.1:8001",
                   {.route_us = 12, .matched_blocks = 3, .prompt_blocks = 8, .cost = 0.5});
    const HopStart first =
        t->start_hop("kvgate.upstream", "http://127.0.0.1:8001", up, traceparent);
    EXPECT_EQ(up.hop_headers, "traceparent: " +
                                  trace::format_traceparent(
                                      {t->server().trace_id, first.span_id, trace::kSampledFlag}) +
                                  "\r\n");
    t->end_hop(first, 503);
    const HopStart second =
        t->start_hop("kvgate.upstream", "http://127.0.0.1:8002", up, traceparent);
    second_hop = second.span_id;
    EXPECT_NE(second.span_id, first.span_id);
    // The line is the request's hop header, the second hop's id in it; the vector holds
    // the request's own headers and the client's tracestate, once.
    const std::string expected =
        trace::format_traceparent({t->server().trace_id, second.span_id, trace::kSampledFlag});
    EXPECT_EQ(traceparent.value(), expected);
    EXPECT_EQ(up.hop_headers, "traceparent: " + expected + "\r\n");
    EXPECT_EQ(static_cast<const void*>(up.hop_headers.data()),
              static_cast<const void*>(traceparent.line));
    EXPECT_EQ(up.headers, (io::UpstreamHeaders{{"Content-Type", "application/json"},
                                               {"tracestate", "vendor=abc"}}));
    t->end_hop(second, 200);
    // A hop that never ends (its coroutine went) has no span; it counts in kvgate.hops.
    (void)t->start_hop("kvgate.migration", "http://127.0.0.1:8003", up, traceparent);
    t->set_status(200);
  }
  tracer.stop();
  EXPECT_EQ(rec.sizes(), std::vector<size_t>{3});
  EXPECT_EQ(tracer.spans_exported(), 3u);
  const std::vector<boost::json::object> spans = rec.spans();
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(span_name(spans[0]), "kvgate.upstream");
  EXPECT_EQ(span_name(spans[1]), "kvgate.upstream");
  EXPECT_EQ(span_name(spans[2]), "kvgate.request");
  EXPECT_EQ(spans[2].at("kind").as_int64(), 2);
  EXPECT_EQ(spans[2].at("parentSpanId").as_string(), "00f067aa0ba902b7");
  EXPECT_EQ(spans[2].at("traceState").as_string(), "vendor=abc");
  EXPECT_EQ(spans[2].at("flags").as_int64(), 0x301);
  for (size_t i : {size_t{0}, size_t{1}}) {
    EXPECT_EQ(spans[i].at("kind").as_int64(), 3);
    EXPECT_EQ(spans[i].at("parentSpanId").as_string(), spans[2].at("spanId").as_string());
    EXPECT_EQ(spans[i].at("traceId").as_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
    EXPECT_EQ(spans[i].at("traceState").as_string(), "vendor=abc");
    EXPECT_EQ(spans[i].at("flags").as_int64(), 0x101);
  }
  EXPECT_EQ(spans[1].at("spanId").as_string(), trace::to_hex(second_hop));

  auto first = span_attributes(spans[0]);
  EXPECT_EQ(first["server.address"], R"({"stringValue":"127.0.0.1"})");
  EXPECT_EQ(first["server.port"], R"({"intValue":"8001"})");
  EXPECT_EQ(first.count("kvgate.attempt"), 0u);  // the first: 0, left out
  EXPECT_EQ(first["http.response.status_code"], R"({"intValue":"503"})");
  EXPECT_EQ(spans[0].at("status").at("code").as_int64(), 2);
  EXPECT_EQ(spans[0].at("status").at("message").as_string(), "HTTP 503");
  auto second = span_attributes(spans[1]);
  EXPECT_EQ(second["server.address"], R"({"stringValue":"127.0.0.1"})");
  EXPECT_EQ(second["server.port"], R"({"intValue":"8002"})");
  EXPECT_EQ(second["kvgate.attempt"], R"({"intValue":"1"})");
  EXPECT_EQ(second["http.response.status_code"], R"({"intValue":"200"})");
  EXPECT_FALSE(spans[1].contains("status"));  // UNSET: left out

  auto server = span_attributes(spans[2]);
  EXPECT_EQ(server.size(), 12u);  // no kvgate.queued_us (no wait), no kvgate.disaggregated
  EXPECT_EQ(server["kvgate.model"], R"({"stringValue":"m1"})");
  EXPECT_EQ(server["kvgate.pool"], R"({"stringValue":"chat"})");
  EXPECT_EQ(server["url.path"], R"({"stringValue":"/v1/chat/completions"})");
  EXPECT_EQ(server["kvgate.endpoint"], R"({"stringValue":"http://127.0.0.1:8001"})");
  EXPECT_EQ(server["kvgate.route_us"], R"({"intValue":"12"})");
  EXPECT_EQ(server["kvgate.matched_blocks"], R"({"intValue":"3"})");
  EXPECT_EQ(server["kvgate.prompt_blocks"], R"({"intValue":"8"})");
  EXPECT_EQ(server.count("kvgate.disaggregated"), 0u);
  EXPECT_EQ(server.count("kvgate.queued_us"), 0u);
  EXPECT_EQ(server["http.response.status_code"], R"({"intValue":"200"})");
  EXPECT_EQ(server["kvgate.hops"], R"({"intValue":"3"})");
  const auto& attrs = spans[2].at("attributes").as_array();
  ASSERT_EQ(attrs.size(), 12u);
  EXPECT_EQ(attrs[9].at("key").as_string(), "kvgate.cost");
  EXPECT_DOUBLE_EQ(attrs[9].at("value").at("doubleValue").to_number<double>(), 0.5);
  EXPECT_FALSE(spans[2].contains("status"));
}

// A span's times are the steady clock's readings placed on the wall clock by the offset
// the tracer last read (at its start, then at every flush): the server span starts at the
// request's receipt and ends at its answer as the gateway read them (set_end), or when
// its trace ends without one; the hops in between at their own readings.
TEST(Tracer, SpanTimesAreSteadyReadingsOnTheWallClock) {
  constexpr Nanos kWall = ManualClock::kDefaultWallOrigin;
  ManualClock clock(5 * kSecond);
  Recorder rec;
  Tracer tracer(traced(100), clock, rec.sink());
  EXPECT_EQ(tracer.wall_offset(), kWall);
  io::HttpRequest req;
  io::UpstreamRequest up;
  TraceparentLine traceparent;
  {
    RequestTracePtr t = tracer.begin(req, 4 * kSecond);  // received a second ago
    clock.advance(kMillisecond);
    const HopStart hop = t->start_hop("kvgate.upstream", "http://127.0.0.1:8001", up, traceparent);
    clock.advance(2 * kMillisecond);
    t->end_hop(hop, 200);
    t->set_status(200);
    t->set_end(clock.now() + 3 * kMillisecond);  // the answer's reading, as given
    clock.advance(kSecond);                      // not this late
  }
  {
    RequestTracePtr t = tracer.begin(req);  // received now; no set_end: its end is read
    clock.advance(7 * kMillisecond);
  }
  tracer.stop();
  const std::vector<boost::json::object> spans = rec.spans();
  ASSERT_EQ(spans.size(), 3u);
  auto nanos = [](const boost::json::object& span, const char* field) {
    return std::stoll(std::string(span.at(field).as_string()));
  };
  EXPECT_EQ(nanos(spans[0], "startTimeUnixNano"), kWall + 5 * kSecond + kMillisecond);
  EXPECT_EQ(nanos(spans[0], "endTimeUnixNano"), kWall + 5 * kSecond + 3 * kMillisecond);
  EXPECT_EQ(nanos(spans[1], "startTimeUnixNano"), kWall + 4 * kSecond);
  EXPECT_EQ(nanos(spans[1], "endTimeUnixNano"), kWall + 5 * kSecond + 6 * kMillisecond);
  EXPECT_EQ(nanos(spans[2], "startTimeUnixNano"), kWall + 6 * kSecond + 3 * kMillisecond);
  EXPECT_EQ(nanos(spans[2], "endTimeUnixNano"), kWall + 6 * kSecond + 10 * kMillisecond);
}

// A hop whose answer is the client's takes no reading of its own: it starts at the one
// given (the pick's) and ends with the answer (set_end), or where the next hop starts (a
// stream migrated, a 503 retried), or, with no answer given, where the trace ends. A hop
// that failed, or ended with end_hop, ends when it is ended.
TEST(Tracer, AnAnswersHopEndsWithTheAnswerOrTheNextHop) {
  constexpr Nanos kWall = ManualClock::kDefaultWallOrigin;
  ManualClock clock(kSecond);
  Recorder rec;
  Tracer tracer(traced(100), clock, rec.sink());
  io::HttpRequest req;
  io::UpstreamRequest up;
  TraceparentLine traceparent;
  {
    RequestTracePtr t = tracer.begin(req);  // 1 s
    const HopStart first = t->start_hop("kvgate.upstream", "http://127.0.0.1:8001", up, traceparent,
                                        kSecond - kMillisecond);  // given
    clock.advance(2 * kMillisecond);
    t->end_hop_with_answer(first, 200);  // no end yet
    clock.advance(5 * kMillisecond);     // the stream breaks: migrated at 1.007 s
    const HopStart second =
        t->start_hop("kvgate.migration", "http://127.0.0.1:8002", up, traceparent);
    clock.advance(kMillisecond);
    t->end_hop_with_answer(second, 200);
    t->set_end(clock.now() + 4 * kMillisecond);  // the answer's reading: 1.012 s
    clock.advance(kSecond);
  }
  {
    RequestTracePtr t = tracer.begin(req);  // 2.008 s; no answer given
    const HopStart hop = t->start_hop("kvgate.upstream", "http://127.0.0.1:8001", up, traceparent);
    clock.advance(kMillisecond);
    t->end_hop_with_answer(hop, 200);
    clock.advance(3 * kMillisecond);  // the trace ends at 2.012 s
  }
  {
    RequestTracePtr t = tracer.begin(req);  // 2.012 s
    const HopStart hop = t->start_hop("kvgate.upstream", "http://127.0.0.1:8001", up, traceparent);
    clock.advance(kMillisecond);
    t->end_hop(hop, 503);  // ended now: 2.013 s
    clock.advance(kMillisecond);
    t->set_end(clock.now());
  }
  tracer.stop();
  const std::vector<boost::json::object> spans = rec.spans();
  ASSERT_EQ(spans.size(), 7u);
  auto at = [&](size_t i, const char* field) {
    return std::stoll(std::string(spans[i].at(field).as_string())) - kWall;
  };
  EXPECT_EQ(span_name(spans[0]), "kvgate.upstream");
  EXPECT_EQ(at(0, "startTimeUnixNano"), kSecond - kMillisecond);
  EXPECT_EQ(at(0, "endTimeUnixNano"), kSecond + 7 * kMillisecond);  // the next hop's start
  EXPECT_EQ(span_name(spans[1]), "kvgate.migration");
  EXPECT_EQ(at(1, "startTimeUnixNano"), kSecond + 7 * kMillisecond);
  EXPECT_EQ(at(1, "endTimeUnixNano"), kSecond + 12 * kMillisecond);  // the answer
  EXPECT_EQ(at(2, "endTimeUnixNano"), kSecond + 12 * kMillisecond);  // the server span
  EXPECT_EQ(at(3, "startTimeUnixNano"), 2 * kSecond + 8 * kMillisecond);
  EXPECT_EQ(at(3, "endTimeUnixNano"), 2 * kSecond + 12 * kMillisecond);  // the trace's end
  EXPECT_EQ(at(4, "endTimeUnixNano"), 2 * kSecond + 12 * kMillisecond);
  EXPECT_EQ(at(5, "startTimeUnixNano"), 2 * kSecond + 12 * kMillisecond);
  EXPECT_EQ(at(5, "endTimeUnixNano"), 2 * kSecond + 13 * kMillisecond);  // ended then
  EXPECT_EQ(at(6, "endTimeUnixNano"), 2 * kSecond + 14 * kMillisecond);
}

// A clock whose wall time an operator (or NTP) steps, its steady time moved by hand.
class SteppedClock final : public Clock {
 public:
  Nanos now() const override { return steady.now(); }
  Nanos wall_now() const override { return ManualClock::kDefaultWallOrigin + now() + step; }
  ManualClock steady;
  std::atomic<Nanos> step{0};
};

// A wall clock stepped mid-request moves none of that request's times (its spans keep
// their steady durations, within their parent); the requests that begin after the
// tracer's next flush read the new wall time.
TEST(Tracer, AWallClockStepMovesTheNextRequestsNotOneUnderWay) {
  constexpr Nanos kWall = ManualClock::kDefaultWallOrigin;
  constexpr Nanos kAnHour = 3600 * kSecond;
  SteppedClock clock;
  Recorder rec;
  Tracer tracer(config(100, 1000, 20ms), clock, rec.sink());
  io::HttpRequest req;  // sampled by its client
  req.fields.add("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  io::UpstreamRequest up;
  TraceparentLine traceparent;
  {
    RequestTracePtr t = tracer.begin(req);
    ASSERT_TRUE(t != nullptr);
    clock.steady.advance(kMillisecond);
    const HopStart hop = t->start_hop("kvgate.upstream", "http://127.0.0.1:8001", up, traceparent);
    clock.step = kAnHour;  // stepped while the hop is under way
    ASSERT_TRUE(within_10s([&] { return tracer.wall_offset() == kWall + kAnHour; }));
    clock.steady.advance(2 * kMillisecond);
    t->end_hop(hop, 200);
  }
  {
    RequestTracePtr t = tracer.begin(req);
    clock.steady.advance(kMillisecond);
  }
  tracer.stop();
  const std::vector<boost::json::object> spans = rec.spans();
  ASSERT_EQ(spans.size(), 3u);
  auto nanos = [](const boost::json::object& span, const char* field) {
    return std::stoll(std::string(span.at(field).as_string()));
  };
  EXPECT_EQ(nanos(spans[0], "startTimeUnixNano"), kWall + kMillisecond);
  EXPECT_EQ(nanos(spans[0], "endTimeUnixNano"), kWall + 3 * kMillisecond);
  EXPECT_EQ(nanos(spans[1], "startTimeUnixNano"), kWall);
  EXPECT_EQ(nanos(spans[1], "endTimeUnixNano"), kWall + 3 * kMillisecond);
  EXPECT_EQ(nanos(spans[2], "startTimeUnixNano"), kWall + kAnHour + 3 * kMillisecond);
  EXPECT_EQ(nanos(spans[2], "endTimeUnixNano"), kWall + kAnHour + 4 * kMillisecond);
}

// TracedHop lends its traceparent line to the request for the send and takes it back at
// its end; untraced, it leaves the request alone.
TEST(Tracer, ATracedHopLendsItsTraceparentLineForTheSend) {
  ManualClock clock;
  Recorder rec;
  TracingConfig c = traced(100);
  Tracer tracer(c, clock, rec.sink());
  io::HttpRequest req;
  RequestTracePtr t = tracer.begin(req);
  ASSERT_TRUE(t != nullptr);
  io::UpstreamRequest up;
  {
    TracedHop hop(t.get(), "kvgate.upstream", "http://127.0.0.1:8001", up);
    ASSERT_EQ(up.hop_headers.size(), TraceparentLine::kSize);
    EXPECT_TRUE(up.hop_headers.starts_with("traceparent: 00-"));
    EXPECT_TRUE(up.hop_headers.ends_with("-01\r\n"));
    const auto parsed = trace::parse_traceparent(
        up.hop_headers.substr(TraceparentLine::kName.size(), trace::kTraceparentSize));
    ASSERT_TRUE(parsed.has_value());
    EXPECT_EQ(parsed->trace_id, t->server().trace_id);
    EXPECT_NE(parsed->span_id, t->server().span_id);
    EXPECT_TRUE(up.headers.empty());  // no tracestate from the client: nothing there
  }
  EXPECT_TRUE(up.hop_headers.empty());
  {
    TracedHop untraced(nullptr, "kvgate.upstream", "http://127.0.0.1:8001", up);
    EXPECT_TRUE(up.hop_headers.empty());
  }
  EXPECT_TRUE(up.hop_headers.empty());
  EXPECT_TRUE(up.headers.empty());
  t.reset();
  tracer.stop();
  // The hop never ended: the server span alone, with kvgate.hops 1.
  EXPECT_EQ(tracer.spans_exported(), 1u);
}

// batch_size counts spans: a request with more spans than a batch has room for goes in
// more than one, in its order (its hops, then its server span).
TEST(Tracer, ARequestsSpansMaySplitBetweenBatches) {
  ManualClock clock;
  Recorder rec;
  Tracer tracer(config(2, 100, std::chrono::milliseconds(3'600'000)), clock, rec.sink());
  tracer.submit(finished_request(tracer, 0, 4));  // 5 spans
  tracer.stop();
  EXPECT_EQ(rec.sizes(), (std::vector<size_t>{2, 2, 1}));
  EXPECT_EQ(tracer.spans_exported(), 5u);
  const std::vector<boost::json::object> spans = rec.spans();
  ASSERT_EQ(spans.size(), 5u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(span_name(spans[i]), "kvgate.upstream");
    const auto attributes = span_attributes(spans[i]);
    if (i == 0) {
      EXPECT_EQ(attributes.count("kvgate.attempt"), 0u);
    } else {
      EXPECT_EQ(attributes.at("kvgate.attempt"), R"({"intValue":")" + std::to_string(i) + R"("})");
    }
  }
  EXPECT_EQ(span_name(spans[4]), "kvgate.request");
  EXPECT_EQ(span_attributes(spans[4])["kvgate.hops"], R"({"intValue":"4"})");
}

// max_queue counts spans: a request whose spans do not all fit is dropped whole.
TEST(Tracer, ARequestThatDoesNotFitIsDroppedWhole) {
  ManualClock clock;
  Recorder rec;
  Tracer tracer(config(10, 4, std::chrono::milliseconds(3'600'000)), clock, rec.sink());
  tracer.submit(finished_request(tracer, 0, 2));  // 3 spans: fit
  tracer.submit(finished_request(tracer, 1, 1));  // 2 more: do not
  EXPECT_EQ(tracer.spans_dropped(), 2u);
  tracer.submit(finished_request(tracer, 2));  // 1 more: fits
  tracer.stop();
  EXPECT_EQ(tracer.spans_exported(), 4u);
  EXPECT_EQ(tracer.spans_dropped(), 2u);
  EXPECT_EQ(rec.sizes(), std::vector<size_t>{4});
}

// A span's JSON text has none of `words` in it.
void expect_none_of(const boost::json::object& span, const std::vector<std::string>& words) {
  const std::string text = boost::json::serialize(span);
  for (const std::string& w : words) {
    EXPECT_EQ(text.find(w), std::string::npos) << w << " in " << text;
  }
}

// The first request of the reuse tests below: a client's trace (its traceparent and
// tracestate "vendor=abc"), model "model-a" in pool "pool-a".
RequestTracePtr begin_model_a(Tracer& tracer) {
  io::HttpRequest req;
  req.fields.add("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  req.fields.add("tracestate", "vendor=abc");
  RequestTracePtr t = tracer.begin(req);
  if (t) {
    t->set_model("model-a");
    t->set_pool("pool-a");
  }
  return t;
}

// A record is sent, cleared and reused by a later request on the same thread: the later
// request's spans carry its own data alone, whatever the earlier one had (a client's
// trace and tracestate, every attribute, more hops than the inline slots, more text than
// the inline buffer, a failed hop).
TEST(Tracer, AReusedRecordCarriesNothingOfItsLastRequest) {
  ManualClock clock;
  Recorder rec;
  // A batch of one span: every span goes at once.
  TracingConfig c = traced(1);
  Tracer tracer(c, clock, rec.sink());
  const RequestTrace* first_record = nullptr;
  {
    RequestTracePtr t = begin_model_a(tracer);
    ASSERT_TRUE(t != nullptr);
    first_record = t.get();
    t->set_path("/v1/a/" + std::string(300, 'a'));  // past the inline text
    t->set_routing("http://127.0.0.1:8001", {.route_us = 7,
                                             .matched_blocks = 2,
                                             .prompt_blocks = 4,
                                             .cost = 1.5,
                                             .queued_us = 30,
                                             .disaggregated = true});  // every attribute there
    io::UpstreamRequest up;
    TraceparentLine traceparent;
    for (int h = 0; h < 5; ++h) {  // past the inline hops
      const HopStart hop = t->start_hop(
          "kvgate.upstream", "http://10.0.0." + std::to_string(h) + ":8000", up, traceparent);
      if (h == 1) {
        t->end_hop(hop, 0, "connect: refused");
      } else {
        t->end_hop(hop, 503);
      }
    }
    t->set_status(503);
  }
  // Its spans written into the thread's batch (6 spans), the record kept in this thread's
  // spares (cleared at once: it grew on the heap).
  io::HttpRequest plain;  // no traceparent: kvgate starts the trace
  {
    RequestTracePtr t = tracer.begin(plain);
    ASSERT_TRUE(t != nullptr);
    EXPECT_EQ(t.get(), first_record) << "the ended record was not reused";
  }
  {
    RequestTracePtr t = tracer.begin(plain);
    ASSERT_TRUE(t != nullptr);
    EXPECT_EQ(t.get(), first_record) << "the ended record was not reused";
    t->set_path("/v1/c");
    io::UpstreamRequest up;
    TraceparentLine traceparent;
    t->end_hop(t->start_hop("kvgate.upstream", "http://127.0.0.1:9000", up, traceparent), 200);
    EXPECT_TRUE(up.headers.empty()) << "the last request's tracestate was sent";
  }
  tracer.stop();
  EXPECT_EQ(tracer.spans_exported(), 9u);
  const std::vector<boost::json::object> spans = rec.spans();
  ASSERT_EQ(spans.size(), 9u);
  EXPECT_EQ(span_name(spans[5]), "kvgate.request");
  EXPECT_EQ(span_attributes(spans[5]).size(), 14u);
  EXPECT_EQ(span_attributes(spans[5])["kvgate.hops"], R"({"intValue":"5"})");

  // The second request: its server span alone, kvgate.hops 0.
  EXPECT_EQ(span_attributes(spans[6]),
            (std::map<std::string, std::string>{{"kvgate.hops", R"({"intValue":"0"})"}}));
  // The third, in the reused record.
  const boost::json::object& hop = spans[7];
  const boost::json::object& server = spans[8];
  EXPECT_EQ(span_name(hop), "kvgate.upstream");
  EXPECT_EQ(span_name(server), "kvgate.request");
  EXPECT_NE(server.at("traceId").as_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(hop.at("traceId").as_string(), server.at("traceId").as_string());
  EXPECT_FALSE(server.contains("parentSpanId"));
  EXPECT_FALSE(server.contains("traceState"));
  EXPECT_FALSE(hop.contains("traceState"));
  EXPECT_EQ(server.at("flags").as_int64(), 0x101);  // a root span: no remote parent
  EXPECT_EQ(hop.at("parentSpanId").as_string(), server.at("spanId").as_string());
  EXPECT_EQ(span_attributes(server),
            (std::map<std::string, std::string>{{"url.path", R"({"stringValue":"/v1/c"})"},
                                                {"kvgate.hops", R"({"intValue":"1"})"}}));
  EXPECT_EQ(server.at("status").at("code").as_int64(), 2);
  EXPECT_EQ(server.at("status").at("message").as_string(), "no answer");
  EXPECT_EQ(span_attributes(hop), (std::map<std::string, std::string>{
                                      {"server.address", R"({"stringValue":"127.0.0.1"})"},
                                      {"server.port", R"({"intValue":"9000"})"},
                                      {"http.response.status_code", R"({"intValue":"200"})"}}));
  EXPECT_FALSE(hop.contains("status"));  // UNSET: left out
  // Words only the first request's text has (ids and times are hex and digits alone).
  const std::vector<std::string> first_words = {
      "model-a", "pool-a",         "/v1/a/",          "vendor=abc",  "10.0.0.",
      "connect", "127.0.0.1:8001", "kvgate.endpoint", "kvgate.model"};
  expect_none_of(hop, first_words);
  expect_none_of(server, first_words);
  expect_none_of(spans[6], first_words);
}

// The same with a record whose text and hops stayed inline: kept as it ended (its thread
// clears it when a request reuses it, the record then in that core's cache anyway).
TEST(Tracer, AReusedRecordThatStayedInlineCarriesNothingOfItsLastRequest) {
  ManualClock clock;
  Recorder rec;
  Tracer tracer(traced(1), clock, rec.sink());
  const RequestTrace* first_record = nullptr;
  {
    RequestTracePtr t = begin_model_a(tracer);
    ASSERT_TRUE(t != nullptr);
    first_record = t.get();
    t->set_routing("http://10.0.0.1:8001", {.route_us = 7, .prompt_blocks = 4, .queued_us = 30});
    io::UpstreamRequest up;
    TraceparentLine traceparent;
    t->end_hop(t->start_hop("kvgate.upstream", "http://10.0.0.1:8001", up, traceparent), 0,
               "connect: refused");
    t->set_status(502);
    ASSERT_FALSE(t->spans().spilled());
  }
  io::HttpRequest plain;
  tracer.begin(plain).reset();  // the first record again, back in the spares at its end
  {
    RequestTracePtr t = tracer.begin(plain);
    ASSERT_TRUE(t != nullptr);
    EXPECT_EQ(t.get(), first_record) << "the sent record was not reused";
    EXPECT_EQ(t->spans().hops.size(), 0u);
    EXPECT_EQ(t->spans().parent_span_id, 0u);
    t->set_path("/v1/c");
  }
  tracer.stop();
  const std::vector<boost::json::object> spans = rec.spans();
  ASSERT_EQ(spans.size(), 4u);
  EXPECT_EQ(span_attributes(spans[3]),
            (std::map<std::string, std::string>{{"url.path", R"({"stringValue":"/v1/c"})"},
                                                {"kvgate.hops", R"({"intValue":"0"})"}}));
  EXPECT_FALSE(spans[3].contains("parentSpanId"));
  EXPECT_FALSE(spans[3].contains("traceState"));
  expect_none_of(spans[3], {"model-a", "pool-a", "vendor=abc", "10.0.0.", "connect"});
}

// Tracers one after another on one thread (tests; a configuration reload): a tracer never
// uses a record another left in the thread's spares, alive or gone (it frees it, without
// a look at the tracer gone).
TEST(Tracer, ATracerNeverUsesAnothersSpareRecords) {
  ManualClock clock;
  Recorder first_rec;
  Recorder second_rec;
  Recorder third_rec;
  TracingConfig c = traced(1);
  io::HttpRequest req;
  auto first = std::make_unique<Tracer>(c, clock, first_rec.sink());
  first->begin(req).reset();  // ended: its record in this thread's spares
  first->begin(req).reset();  // the same record again, back in the spares
  {
    // The first tracer alive: the second one's request is its own, not the spare's.
    Tracer second(c, clock, second_rec.sink());
    RequestTracePtr t = second.begin(req);
    ASSERT_TRUE(t != nullptr);
    t->set_path("/second");
    t.reset();
    second.stop();
    EXPECT_EQ(second.spans_exported(), 1u);
    const std::vector<boost::json::object> spans = second_rec.spans();
    ASSERT_EQ(spans.size(), 1u);
    EXPECT_EQ(span_attributes(spans[0])["url.path"], R"({"stringValue":"/second"})");
  }
  // A record of the first tracer's in this thread's spares again, then the tracer goes.
  first->begin(req).reset();
  first->stop();
  EXPECT_EQ(first->spans_exported(), 3u);  // its own three requests, not the second's
  first.reset();
  Tracer third(c, clock, third_rec.sink());
  third.begin(req).reset();  // frees the spare of the tracer gone (ASan: never read)
  third.stop();
  EXPECT_EQ(third.spans_exported(), 1u);
  EXPECT_EQ(third_rec.spans().size(), 1u);
}

// A thread keeps at most spare_limit() of the records its requests ended (a batch's and
// kThreadSpares more); past them, records are freed, and the next requests past the
// spares get new ones.
TEST(Tracer, AThreadKeepsAtMostItsSpareRecords) {
  ManualClock clock;
  Recorder rec;
  Tracer tracer(traced(1), clock, rec.sink());  // each request's one span: a batch at once
  EXPECT_EQ(tracer.spare_limit(), 1 + Tracer::kThreadSpares);
  io::HttpRequest req;
  const size_t requests = tracer.spare_limit() + 4;
  std::vector<RequestTracePtr> open;
  std::set<const RequestTrace*> first_records;
  for (size_t i = 0; i < requests; ++i) {
    open.push_back(tracer.begin(req));
    first_records.insert(open.back().get());
  }
  open.clear();  // all end: spare_limit() kept, 4 freed
  size_t reused = 0;
  for (size_t i = 0; i < requests; ++i) {
    open.push_back(tracer.begin(req));
    reused += first_records.count(open.back().get());
  }
  // (A freed record's memory may come back from the allocator: at least the spares.)
  EXPECT_GE(reused, tracer.spare_limit());
  open.clear();
  tracer.stop();
  EXPECT_EQ(tracer.spans_exported(), 2 * requests);
}

}  // namespace tracer_test
}  // namespace kvgate::gateway
