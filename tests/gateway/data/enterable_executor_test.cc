// EnterableExecutor: a thread inside an EnterStrandsHere runs a free strand's dispatched
// work itself, at once; a busy strand queues it for an I/O thread; posts, and threads that
// did not enter, go to the I/O threads as before; the strand's handlers never overlap,
// whichever threads run them. And PoolRouting::pick_then over it (the pool's strand).
#include "gateway/data/enterable_executor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "env/system_clock.h"
#include "gateway/data/pool_runtime.h"

namespace kvgate::gateway::enterable_executor_test {

namespace asio = boost::asio;
using Strand = asio::strand<EnterableExecutor<asio::io_context::executor_type>>;

// An io_context run by `threads` threads until the fixture ends.
class Context {
 public:
  explicit Context(int threads) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { io.run(); });
  }
  ~Context() { stop(); }
  // The threads stop and are joined (before what their handlers use goes). Idempotent.
  void stop() {
    work_.reset();
    io.stop();
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  Strand strand() {
    return asio::make_strand(EnterableExecutor<asio::io_context::executor_type>(io.get_executor()));
  }

  asio::io_context io;

 private:
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_{
      io.get_executor()};
  std::vector<std::thread> threads_;
};

TEST(EnterableExecutor, EnteredThreadRunsAFreeStrandsDispatchAtOnce) {
  Context ctx(1);
  Strand strand = ctx.strand();
  bool ran = false;
  bool in_strand = false;
  std::thread::id on;
  {
    EnterStrandsHere here;
    asio::dispatch(strand, [&] {
      ran = true;
      in_strand = strand.running_in_this_thread();
      on = std::this_thread::get_id();
    });
  }
  EXPECT_TRUE(ran);  // before dispatch returned
  EXPECT_TRUE(in_strand);
  EXPECT_EQ(on, std::this_thread::get_id());
  EXPECT_FALSE(strand.running_in_this_thread());  // and left it
}

TEST(EnterableExecutor, WithoutEnteringTheIoThreadRunsIt) {
  Context ctx(1);
  Strand strand = ctx.strand();
  std::promise<std::thread::id> on;
  asio::dispatch(strand, [&] { on.set_value(std::this_thread::get_id()); });
  EXPECT_NE(on.get_future().get(), std::this_thread::get_id());
}

TEST(EnterableExecutor, APostNeverRunsOnTheEnteredThread) {
  Context ctx(1);
  Strand strand = ctx.strand();
  std::promise<std::thread::id> on;
  {
    EnterStrandsHere here;
    asio::post(strand, [&] { on.set_value(std::this_thread::get_id()); });
  }
  EXPECT_NE(on.get_future().get(), std::this_thread::get_id());
}

TEST(EnterableExecutor, ABusyStrandQueuesTheWorkForAnIoThread) {
  Context ctx(1);
  Strand strand = ctx.strand();
  std::promise<void> started;
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  asio::post(strand, [&started, gate] {
    started.set_value();
    gate.wait();  // holds the strand on the I/O thread
  });
  started.get_future().wait();
  std::atomic<bool> ran{false};
  std::promise<std::thread::id> on;
  {
    EnterStrandsHere here;
    asio::dispatch(strand, [&] {
      ran.store(true);
      on.set_value(std::this_thread::get_id());
    });
  }
  EXPECT_FALSE(ran.load());  // queued behind the strand's work, not run here
  release.set_value();
  EXPECT_NE(on.get_future().get(), std::this_thread::get_id());
  EXPECT_TRUE(ran.load());
}

// Handlers of one strand from two I/O threads and two entering threads at once: a plain
// counter they all increment ends exact (run under TSan, an overlap is also reported).
TEST(EnterableExecutor, TheStrandsHandlersNeverOverlap) {
  Context ctx(2);
  Strand strand = ctx.strand();
  constexpr int kEach = 5000;
  int counter = 0;  // touched only on the strand
  std::atomic<int> done{0};
  auto bump = [&] {
    ++counter;
    done.fetch_add(1, std::memory_order_release);
  };
  auto enter = [&] {
    for (int i = 0; i < kEach; ++i) {
      EnterStrandsHere here;
      asio::dispatch(strand, bump);
    }
  };
  auto post = [&] {
    for (int i = 0; i < kEach; ++i) asio::post(strand, bump);
  };
  std::thread a(enter), b(enter), c(post);
  a.join();
  b.join();
  c.join();
  while (done.load(std::memory_order_acquire) < 3 * kEach) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::promise<int> seen;
  asio::post(strand, [&] { seen.set_value(counter); });
  EXPECT_EQ(seen.get_future().get(), 3 * kEach);
}

// The pool's strand is one of these: pick_then decides on the entering thread while the
// strand is free, and a cancelled pick decides nothing.
TEST(EnterableExecutor, PickThenDecidesOnTheEnteredThread) {
  Context ctx(2);
  GatewayMetrics metrics;
  PoolConfig config;
  config.name = "main";
  config.router.policy.name = "round-robin";
  config.endpoints.push_back({.url = "http://127.0.0.1:9001"});
  auto pool = PoolRuntime::create(config, {}, ctx.io.get_executor(), metrics, env::system_clock());
  ASSERT_TRUE(pool.ok()) << pool.error();
  route::RouteRequest request{.id = 1, .prompt_tokens = 40};
  const std::vector<route::EndpointId> excluded;
  std::optional<Pick> got;
  std::thread::id on;
  {
    EnterStrandsHere here;
    (*pool)->pick_then(request, excluded, nullptr, [&](std::optional<Pick> p) {
      got = std::move(p);
      on = std::this_thread::get_id();
    });
  }
  ASSERT_TRUE(got.has_value());  // decided before pick_then returned
  EXPECT_TRUE(got->decision.accepted());
  EXPECT_EQ(on, std::this_thread::get_id());

  std::atomic<bool> cancelled{true};
  route::RouteRequest second{.id = 2, .prompt_tokens = 40};
  std::promise<bool> decided;
  (*pool)->pick_then(second, excluded, &cancelled,
                     [&](std::optional<Pick> p) { decided.set_value(p.has_value()); });
  EXPECT_FALSE(decided.get_future().get());
  ctx.stop();  // before the pool goes
}

}  // namespace kvgate::gateway::enterable_executor_test
