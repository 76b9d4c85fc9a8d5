// GCC 12 reports a false -Wmismatched-new-delete on Asio coroutine frames (GCC bug 109224).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

// io::ClockTimer on a ManualClock (it completes when the clock is advanced past its
// expiry, never before and never inside advance(); cancel, re-arm and destruction abort
// it) and on the real clock (a steady_timer, after a short real expiry).
#include "io/clock_timer.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/system/system_error.hpp>
#include <chrono>
#include <future>
#include <optional>
#include <thread>
#include <vector>

#include "env/system_clock.h"

namespace kvgate::io {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace clock_timer_test {

namespace asio = boost::asio;
using boost::system::error_code;
using namespace std::chrono_literals;

// An io_context that this thread runs by poll(): a handler runs only inside poll(), so a
// test sees exactly when a completion happens. The work guard keeps poll() from
// stopping the context when nothing is pending.
struct Polled {
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
};

// Records a wait's outcome.
struct Outcome {
  std::optional<error_code> ec;
  bool on_io = false;  // the handler ran on the io_context (inside poll)
  auto handler(asio::io_context& io) {
    return [this, &io](const error_code& e) {
      ec = e;
      on_io = io.get_executor().running_in_this_thread();
    };
  }
};

TEST(ClockTimer, OnAManualClockItCompletesOnlyOnceTheClockReachesTheExpiry) {
  Polled p;
  ManualClock clock(kSecond);
  ClockTimer timer(p.io.get_executor(), clock);
  Outcome o;
  timer.expires_after(2 * kSecond);  // at 3 s
  timer.async_wait(o.handler(p.io));
  p.io.poll();
  EXPECT_FALSE(o.ec);
  clock.advance(2 * kSecond - 1);
  p.io.poll();
  EXPECT_FALSE(o.ec);  // a nanosecond short
  clock.advance(1);
  EXPECT_FALSE(o.ec);  // not inside advance(): the completion is posted
  p.io.poll();
  ASSERT_TRUE(o.ec);
  EXPECT_FALSE(*o.ec);
  EXPECT_TRUE(o.on_io);
  EXPECT_EQ(clock.waiters(), 0u);

  // expires_at is in the clock's time; one move over several expiries completes each.
  Outcome late;
  timer.expires_at(10 * kSecond);
  timer.async_wait(late.handler(p.io));
  clock.set(20 * kSecond);
  p.io.poll();
  ASSERT_TRUE(late.ec);
  EXPECT_FALSE(*late.ec);
}

// Two timers on one clock: the earlier expiry first, each when the clock reaches it.
TEST(ClockTimer, TimersOnOneClockCompleteInExpiryOrder) {
  Polled p;
  ManualClock clock;
  ClockTimer a(p.io.get_executor(), clock);
  ClockTimer b(p.io.get_executor(), clock);
  std::vector<char> order;
  a.expires_after(2 * kSecond);
  b.expires_after(kSecond);
  a.async_wait([&](const error_code& ec) { order.push_back(ec ? 'x' : 'a'); });
  b.async_wait([&](const error_code& ec) { order.push_back(ec ? 'x' : 'b'); });
  clock.advance(kSecond);
  p.io.poll();
  EXPECT_EQ(order, std::vector{'b'});
  clock.advance(5 * kSecond);
  p.io.poll();
  EXPECT_EQ(order, (std::vector{'b', 'a'}));
}

TEST(ClockTimer, CancelAbortsTheWaitAndKeepsTheExpiry) {
  Polled p;
  ManualClock clock;
  ClockTimer timer(p.io.get_executor(), clock);
  Outcome cancelled;
  timer.expires_after(kSecond);
  timer.async_wait(cancelled.handler(p.io));
  timer.cancel();
  clock.advance(kSecond);  // the clock reaching the expiry afterwards changes nothing
  p.io.poll();
  ASSERT_TRUE(cancelled.ec);
  EXPECT_EQ(*cancelled.ec, asio::error::operation_aborted);

  // The expiry stayed and has passed: a new wait completes at once, with success.
  Outcome after;
  timer.async_wait(after.handler(p.io));
  p.io.poll();
  ASSERT_TRUE(after.ec);
  EXPECT_FALSE(*after.ec);

  // Cancelled before the clock gets there: the next wait still ends at the expiry.
  timer.expires_after(kSecond);
  Outcome first, second;
  timer.async_wait(first.handler(p.io));
  timer.cancel();
  timer.async_wait(second.handler(p.io));
  p.io.poll();
  ASSERT_TRUE(first.ec);
  EXPECT_EQ(*first.ec, asio::error::operation_aborted);
  EXPECT_FALSE(second.ec);
  clock.advance(kSecond);
  p.io.poll();
  ASSERT_TRUE(second.ec);
  EXPECT_FALSE(*second.ec);
}

TEST(ClockTimer, SettingTheExpiryAbortsThePendingWait) {
  Polled p;
  ManualClock clock;
  ClockTimer timer(p.io.get_executor(), clock);
  Outcome old;
  timer.expires_after(kSecond);
  timer.async_wait(old.handler(p.io));
  timer.expires_after(5 * kSecond);
  EXPECT_EQ(clock.waiters(), 1u);  // the first expiry's waiter is gone
  p.io.poll();
  ASSERT_TRUE(old.ec);
  EXPECT_EQ(*old.ec, asio::error::operation_aborted);

  Outcome now;
  timer.async_wait(now.handler(p.io));
  clock.advance(kSecond);  // the old expiry: nothing
  p.io.poll();
  EXPECT_FALSE(now.ec);
  clock.advance(4 * kSecond);
  p.io.poll();
  ASSERT_TRUE(now.ec);
  EXPECT_FALSE(*now.ec);

  // An expiry already reached: the wait completes at once.
  Outcome past;
  timer.expires_at(clock.now() - kSecond);
  timer.async_wait(past.handler(p.io));
  p.io.poll();
  ASSERT_TRUE(past.ec);
  EXPECT_FALSE(*past.ec);
}

// The clock reaches the expiry before anyone waits: the wait completes at once.
TEST(ClockTimer, AWaitStartedAfterTheExpiryCompletesAtOnce) {
  Polled p;
  ManualClock clock;
  ClockTimer timer(p.io.get_executor(), clock);
  timer.expires_after(kSecond);
  clock.advance(2 * kSecond);
  Outcome o;
  timer.async_wait(o.handler(p.io));
  p.io.poll();
  ASSERT_TRUE(o.ec);
  EXPECT_FALSE(*o.ec);
}

// Destroyed while waiting: the wait is aborted (its handler still runs, as a
// steady_timer's does), the clock's waiter is gone, and moving the clock is harmless.
TEST(ClockTimer, DestroyedWhileWaitingAbortsTheWaitAndLeavesNoWaiter) {
  Polled p;
  ManualClock clock;
  Outcome o;
  {
    ClockTimer timer(p.io.get_executor(), clock);
    timer.expires_after(kSecond);
    timer.async_wait(o.handler(p.io));
    EXPECT_EQ(clock.waiters(), 1u);
  }
  EXPECT_EQ(clock.waiters(), 0u);
  clock.advance(2 * kSecond);
  p.io.poll();
  ASSERT_TRUE(o.ec);
  EXPECT_EQ(*o.ec, asio::error::operation_aborted);
}

// A wait on a ManualClock is outstanding work, as a steady_timer's is: the context does
// not run out of work while the clock has not reached the expiry.
TEST(ClockTimer, APendingWaitIsOutstandingWork) {
  asio::io_context io;
  ManualClock clock;
  ClockTimer timer(io.get_executor(), clock);
  Outcome o;
  timer.expires_after(kSecond);
  timer.async_wait(o.handler(io));
  io.poll();
  EXPECT_FALSE(io.stopped());
  clock.advance(kSecond);
  io.run();  // returns once the wait completed: no work left
  ASSERT_TRUE(o.ec);
  EXPECT_FALSE(*o.ec);
}

asio::awaitable<Nanos> wait_then_read_clock(ClockTimer& timer) {
  co_await timer.async_wait(asio::use_awaitable);
  co_return timer.clock().now();
}

asio::awaitable<error_code> wait_for_code(ClockTimer& timer) {
  error_code ec;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  co_return ec;
}

// The call sites' coroutine forms: co_await with use_awaitable (an abort throws) and
// with redirect_error.
TEST(ClockTimer, AwaitableWaits) {
  Polled p;
  ManualClock clock;
  ClockTimer timer(p.io.get_executor(), clock);
  timer.expires_after(3 * kSecond);
  std::future<Nanos> woke = asio::co_spawn(p.io, wait_then_read_clock(timer), asio::use_future);
  p.io.poll();
  EXPECT_EQ(woke.wait_for(0s), std::future_status::timeout);
  clock.advance(3 * kSecond);
  p.io.poll();
  ASSERT_EQ(woke.wait_for(0s), std::future_status::ready);
  EXPECT_EQ(woke.get(), 3 * kSecond);

  timer.expires_after(kSecond);
  std::future<error_code> code = asio::co_spawn(p.io, wait_for_code(timer), asio::use_future);
  p.io.poll();
  timer.cancel();
  p.io.poll();
  ASSERT_EQ(code.wait_for(0s), std::future_status::ready);
  EXPECT_EQ(code.get(), asio::error::operation_aborted);

  std::future<Nanos> thrown = asio::co_spawn(p.io, wait_then_read_clock(timer), asio::use_future);
  p.io.poll();
  timer.expires_after(kSecond);  // aborts it
  p.io.poll();
  ASSERT_EQ(thrown.wait_for(0s), std::future_status::ready);
  EXPECT_THROW(thrown.get(), boost::system::system_error);
}

// The clock moved on one thread, the io_context run on another (as in the gateway): the
// handler runs on the io_context's thread.
TEST(ClockTimer, TheHandlerRunsOnTheIoContextsThreadNotOnTheOneThatAdvances) {
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::thread runner([&io] { io.run(); });
  ManualClock clock;
  std::promise<std::thread::id> ran;
  {
    ClockTimer timer(io.get_executor(), clock);
    timer.expires_after(kSecond);
    timer.async_wait([&ran](const error_code& ec) {
      EXPECT_FALSE(ec);
      ran.set_value(std::this_thread::get_id());
    });
    clock.advance(kSecond);
    std::future<std::thread::id> on = ran.get_future();
    EXPECT_EQ(on.wait_for(10s), std::future_status::ready);
    if (on.valid() && on.wait_for(0s) == std::future_status::ready) {
      EXPECT_EQ(on.get(), runner.get_id());
    }
  }
  work.reset();
  io.stop();
  runner.join();
}

// On the real clock it is a steady_timer: it completes after a short real expiry, and
// expires_at is in the clock's now() time.
TEST(ClockTimer, OnTheSystemClockItCompletesAfterARealExpiry) {
  asio::io_context io;
  const Clock& clock = env::system_clock();
  EXPECT_EQ(clock.manual(), nullptr);
  ClockTimer timer(io.get_executor(), clock);

  const auto t0 = std::chrono::steady_clock::now();
  Outcome after;
  timer.expires_after(20ms);
  timer.async_wait(after.handler(io));
  io.run();
  ASSERT_TRUE(after.ec);
  EXPECT_FALSE(*after.ec);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 20ms);

  const Nanos start = clock.now();
  Outcome at;
  timer.expires_at(start + 20 * kMillisecond);
  timer.async_wait(at.handler(io));
  io.restart();
  io.run();
  ASSERT_TRUE(at.ec);
  EXPECT_FALSE(*at.ec);
  EXPECT_GE(clock.now() - start, 20 * kMillisecond);

  Outcome cancelled;
  timer.expires_after(60s);
  timer.async_wait(cancelled.handler(io));
  timer.cancel();
  io.restart();
  io.run();
  ASSERT_TRUE(cancelled.ec);
  EXPECT_EQ(*cancelled.ec, asio::error::operation_aborted);
}

}  // namespace clock_timer_test
}  // namespace kvgate::io
