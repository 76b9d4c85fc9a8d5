// ClockTimer: an Asio timer whose expiry is in a Clock's time (core/common/clock.h).
//
// The timers that implement the gateway's rules (flow control's queue deadlines and its
// drain cut-off, warm-up's polls and budget, replica sync's periods and lease) wait on
// the gateway's clock: a test that drives a ManualClock fires them by advancing it, and
// does not sleep. Timers that bound waiting on another process (socket and exchange
// timeouts: http_wire.h, redis_async.cc, http_client.cc, the engine tokenizer) stay on
// steady_timer: they measure the other side, not a rule.
//
// The interface is the part of boost::asio::steady_timer the gateway uses, with times
// in the clock's Nanos:
//
//   io::ClockTimer timer(strand, pool.clock());
//   timer.expires_after(2 * kSecond);      // or expires_at(deadline), in clock time
//   timer.async_wait([](const boost::system::error_code& ec) { if (!ec) expired(); });
//   co_await timer.async_wait(asio::use_awaitable);  // any completion token
//   timer.cancel();                         // pending waits: operation_aborted
//
// How it waits. Either way there is one steady_timer inside, and every async_wait is an
// asio::async_compose operation around a wait on it, so completion tokens, associated
// executors, outstanding work, cancellation slots and io_context shutdown behave as a
// steady_timer's:
//  - the real clock (Clock::manual() is null): the inner timer expires `deadline - now()`
//    from now on the OS's steady clock (the real clock's now() is steady time since its
//    first reading: the same instant). expires_after(d) is steady_timer::expires_after(d).
//  - a ManualClock: the inner timer never expires, and a waiter on the clock
//    (ManualClock::at) cancels it when advance() reaches the deadline. Cancelling posts
//    the pending waits' completions, which then report success: the timer keeps the ids
//    of the waits the clock woke. A wait started once the deadline is reached is woken
//    the same way at once. The handler runs as any Asio completion does, on its
//    executor (by default the timer's), never inside advance(); and since it is posted
//    (not found expired by the reactor), the next io_context::poll() runs it. A pending
//    wait is outstanding work: io_context::run() does not return while it waits.
// This was chosen over storing a type-erased handler and posting it on the clock's
// signal: Asio then keeps doing what it does for steady_timer (work tracking, executor
// and allocator association, destroying unrun handlers at shutdown, which breaks the
// shared_from_this cycles of the callers that rely on it), and the two clocks share it.
//
// Semantics otherwise as steady_timer's: expires_at/expires_after abort pending waits
// (operation_aborted); cancel() aborts them and keeps the expiry; the destructor aborts
// them (their handlers still run, as steady_timer's do, if the executor runs).
//
// Thread-safety: as steady_timer's (one object used by one thread or strand at a time),
// while the clock may be advanced from any thread: the clock's waiter and the timer's
// own calls share a lock (State::mu), and the waiter holds the state only weakly, so the
// timer may be destroyed while the clock fires it. The clock must outlive the timer, and
// so the io_context too when a pending handler owns the timer's owner (a ManualClock's
// waits end only when it moves, or when the io_context destroys their handlers).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "core/common/clock.h"

namespace kvgate::io {

class ClockTimer {
 public:
  using executor_type = boost::asio::any_io_executor;

  // Not armed (as steady_timer(executor): expired, a wait completes at once).
  ClockTimer(executor_type executor, const Clock& clock);
  ~ClockTimer();
  ClockTimer(const ClockTimer&) = delete;
  ClockTimer& operator=(const ClockTimer&) = delete;

  executor_type get_executor() const { return state_->timer.get_executor(); }
  const Clock& clock() const { return clock_; }

  // Expires when the clock reads `deadline` (now() time); pending waits are aborted.
  void expires_at(Nanos deadline);
  // Expires `after` from the clock's now(); pending waits are aborted.
  void expires_after(Nanos after);
  template <typename Rep, typename Period>
  void expires_after(std::chrono::duration<Rep, Period> after) {
    expires_after(std::chrono::duration_cast<std::chrono::nanoseconds>(after).count());
  }
  // Aborts pending waits (operation_aborted); the expiry stays: a later wait ends at it.
  void cancel();

  // Completes with boost::system::error_code: success once the clock reaches the expiry,
  // operation_aborted when cancelled, re-armed or destroyed first. Any completion token
  // (a handler, asio::use_awaitable, asio::redirect_error(...), ...).
  template <typename WaitToken>
  auto async_wait(WaitToken&& token) {
    return boost::asio::async_compose<WaitToken, void(boost::system::error_code)>(
        Wait{state_}, token, state_->timer);
  }

 private:
  struct State {
    State(executor_type executor, bool on_manual_clock);

    const bool manual;  // on a ManualClock
    std::mutex mu;      // guards everything below, `timer` included
    boost::asio::steady_timer timer;
    // On a ManualClock: the waiter registered for the expiry, and whether the clock has
    // reached the expiry (a timer never armed has, as a steady_timer's is then past).
    std::optional<ManualClock::WaitId> waiter;
    bool due = true;
    uint64_t generation = 0;        // expiries set (a waiter wakes its own only)
    uint64_t waits = 0;             // waits started (their ids)
    std::vector<uint64_t> pending;  // waits that the clock's waiter would wake
    std::vector<uint64_t> woken;    // waits it woke, whose handlers have not run
  };

  // One async_wait, as an Asio composed operation: starts the inner wait, then on its
  // completion turns the abort of a wait the clock woke into success.
  struct Wait {
    std::shared_ptr<State> state;
    uint64_t id = 0;  // 0 until started

    template <typename Self>
    void operator()(Self& self, boost::system::error_code ec = {}) {
      if (id == 0) {
        // `self`, and this object in it, move into the inner wait: keep the state here.
        const std::shared_ptr<State> s = state;
        std::lock_guard lock(s->mu);
        id = ++s->waits;
        const bool wake_now = s->manual && s->due;
        (wake_now ? s->woken : s->pending).push_back(id);
        s->timer.async_wait(std::move(self));
        if (wake_now) s->timer.cancel();  // the clock is past the expiry: wake it at once
        return;
      }
      bool woken = false;
      {
        std::lock_guard lock(state->mu);
        std::erase(state->pending, id);
        woken = std::erase(state->woken, id) > 0;
      }
      if (woken) ec = {};
      self.complete(ec);
    }
  };

  // The ManualClock's waiter: wakes the waits pending on `generation`, if still current.
  static void fire(const std::weak_ptr<State>& weak, uint64_t generation);
  // Unregisters the clock's waiter and forgets the pending waits (the caller aborts them).
  // REQUIRES: state_->mu held.
  void disarm();

  const Clock& clock_;
  const std::shared_ptr<State> state_;
};

}  // namespace kvgate::io
