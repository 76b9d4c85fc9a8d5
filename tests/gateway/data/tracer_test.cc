// The Tracer's export queue (gateway/data/tracer.h) with a sink of the test's own instead of a
// collector: a partial batch waits for flush_ms and a full one goes at once, batches
// never exceed batch_size, a full queue drops and counts, stop() sends what waits, and a
// failed export at stop drops the rest at once (one export, not one per batch).
#include "gateway/data/tracer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "core/common/clock.h"

namespace kvgate::gateway {
// Named after the file, not anonymous: the tests compile in unity batches.
namespace tracer_test {

using namespace std::chrono_literals;

// Records the batches the exporter sends; the first call may wait for release().
struct Recorder {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<size_t> batches;
  bool hold_first = false;
  bool released = false;
  bool accept = true;

  SpanSink sink() {
    return [this](std::span<const trace::Span> batch) {
      std::unique_lock lock(mu);
      batches.push_back(batch.size());
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
};

TracingConfig config(size_t batch_size, size_t max_queue, std::chrono::milliseconds flush) {
  TracingConfig c;
  c.collector = "http://127.0.0.1:9/v1/traces";  // never used: the sink replaces it
  c.batch_size = batch_size;
  c.max_queue = max_queue;
  c.flush = flush;
  return c;
}

trace::Span span(uint64_t i) {
  trace::Span s;
  s.trace_id = {1, 2};
  s.span_id = i + 1;
  s.name = "span " + std::to_string(i);
  return s;
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

TEST(Tracer, APartialBatchWaitsAndAFullOneGoesAtOnce) {
  ManualClock clock;
  Recorder rec;
  Tracer tracer(config(3, 100, std::chrono::milliseconds(3'600'000)), clock, rec.sink());
  tracer.submit(span(0));
  tracer.submit(span(1));
  std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(rec.sizes().empty()) << "a partial batch went before flush_ms";
  tracer.submit(span(2));
  ASSERT_TRUE(rec.wait_batches(1));
  EXPECT_EQ(rec.sizes(), std::vector<size_t>{3});
  EXPECT_TRUE(within_10s([&] { return tracer.spans_exported() == 3u; }));
  EXPECT_EQ(tracer.spans_dropped(), 0u);
}

TEST(Tracer, FlushSendsAPartialBatch) {
  ManualClock clock;
  Recorder rec;
  Tracer tracer(config(100, 1000, 20ms), clock, rec.sink());
  tracer.submit(span(0));
  ASSERT_TRUE(rec.wait_batches(1));
  EXPECT_EQ(rec.sizes(), std::vector<size_t>{1});
  EXPECT_TRUE(within_10s([&] { return tracer.spans_exported() == 1u; }));
}

TEST(Tracer, AFullQueueDropsAndCountsAndBatchesStayWithinBatchSize) {
  ManualClock clock;
  Recorder rec;
  rec.hold_first = true;
  Tracer tracer(config(2, 4, std::chrono::milliseconds(3'600'000)), clock, rec.sink());
  tracer.submit(span(0));
  tracer.submit(span(1));
  ASSERT_TRUE(rec.wait_batches(1));  // the exporter holds the first batch: the queue is empty
  for (uint64_t i = 2; i < 8; ++i) tracer.submit(span(i));
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
  for (uint64_t i = 0; i < 5; ++i) tracer.submit(span(i));
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
  tracer.submit(span(9));
  EXPECT_EQ(tracer.spans_dropped(), 1u);
  tracer.stop();  // idempotent
}

TEST(Tracer, AFailedExportAtStopDropsTheRestAtOnce) {
  ManualClock clock;
  Recorder rec;
  rec.hold_first = true;
  rec.accept = false;  // the collector is down
  Tracer tracer(config(2, 10'000, std::chrono::milliseconds(3'600'000)), clock, rec.sink());
  tracer.submit(span(0));
  tracer.submit(span(1));
  ASSERT_TRUE(rec.wait_batches(1));  // the first export is in progress
  for (uint64_t i = 2; i < 22; ++i) tracer.submit(span(i));
  uint64_t submitted = 22;
  std::thread stopper([&tracer] { tracer.stop(); });
  // Stopping shows as a submitted span being dropped (the queue has room for many more).
  bool stopping = false;
  for (int i = 0; i < 5'000 && !stopping; ++i) {
    const uint64_t before = tracer.spans_dropped();
    tracer.submit(span(submitted++));
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

}  // namespace tracer_test
}  // namespace kvgate::gateway
