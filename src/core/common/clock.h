// Clock: where a shell reads the time, given to it by its owner.
//
// The core never reads a clock (time.h): it is handed `Nanos now`. The shells that call
// it (the gateway, the engine simulator's wire, the I/O clients) read `now` from a Clock
// they are given instead of from the OS, so that a test or the simulator can drive the
// same code in time of its own. The real clock, which reads the OS, lives in the env
// layer (`env::system_clock()`, env/system_clock.h); ManualClock below is moved by hand.
//
//   const Clock& clock = env::system_clock();    // `kvgate serve`
//   ManualClock clock;                            // a test
//   auto pool = PoolRuntime::create(..., clock);  // borrows it
//   clock.advance(61 * kSecond);                  // the breaker's open period is over
//
// A clock can also be waited on: the timers that implement the gateway's rules (flow
// control's queue deadlines, warm-up, replica sync's lease) are io::ClockTimer
// (io/clock_timer.h), which waits on the OS's steady clock for the real clock and on
// ManualClock::at() for a ManualClock, whose advance() then wakes them. A test moves the
// clock past a deadline and the rule fires; it does not sleep.
//
// Who owns it: whoever builds the component; a component borrows it (`const Clock&`) and
// it must outlive that component (and every waiter registered on it). Thread-safety:
// both clocks may be read from any thread; ManualClock may be moved, and waited on, from
// any thread too.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <utility>

#include "core/common/time.h"

namespace kvgate {

class ManualClock;

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic nanoseconds since an origin the clock chooses (the real clock: its first
  // reading in the process). Never goes back: rules that measure a span (a breaker's
  // open period, a deadline, a lease) read this.
  virtual Nanos now() const = 0;
  // Nanoseconds since the Unix epoch. May jump (NTP, an operator): only for what must
  // agree with other hosts or humans (rate-limit windows shared through Redis, the
  // autoscaler's schedules, timestamps on the wire), never for a span.
  virtual Nanos wall_now() const = 0;
  // This clock as a ManualClock when it is one (then timers wait on its at()), else
  // nullptr: a clock that follows the OS's steady clock, which the shell's timers wait
  // on directly (io::ClockTimer picks its implementation by this).
  virtual const ManualClock* manual() const { return nullptr; }
};

// A clock that moves only when told: deterministic tests, and a shell run in virtual
// time. wall_now() is now() plus a fixed epoch offset, so both move together.
//
// Waiters: at(deadline, fire) registers `fire` to run once now() reaches `deadline`.
// advance() and set() run every waiter that the new time reaches, in deadline order
// (ties in the order they were registered), on the thread that moves the clock, after
// the clock has moved and outside its lock: a waiter may read the clock, register
// another waiter or cancel one. A waiter should only hand work on (io::ClockTimer posts
// its completion to the timer's executor), never block.
//
//   ManualClock clock;
//   auto w = clock.at(5 * kSecond, [&] { fired = true; });  // nullopt: already due
//   clock.advance(4 * kSecond);                              // not yet
//   clock.advance(kSecond);                                  // fired, here
//
// The waiters are guarded by a lock of the clock's own, built on an atomic (C++20
// wait/notify, so a second thread blocks rather than spins): the core includes no
// <mutex> (scripts/check-layers), and this is its one type made to be shared between
// threads. It is held only to insert, erase or collect waiters, never while one runs.
class ManualClock final : public Clock {
 public:
  // 2023-11-14T22:13:20Z: a wall time that is plainly not 1970 in logs and schedules.
  static constexpr Nanos kDefaultWallOrigin = 1'700'000'000 * kSecond;

  // A registered waiter, to cancel it.
  struct WaitId {
    Nanos deadline = 0;
    uint64_t seq = 0;
  };

  explicit ManualClock(Nanos start = 0, Nanos wall_origin = kDefaultWallOrigin)
      : now_(start), wall_origin_(wall_origin) {}
  ManualClock(const ManualClock&) = delete;
  ManualClock& operator=(const ManualClock&) = delete;

  Nanos now() const override { return now_.load(std::memory_order_acquire); }
  Nanos wall_now() const override { return wall_origin_ + now(); }
  const ManualClock* manual() const override { return this; }

  // Moves the clock, then runs the waiters it reached (above).
  // REQUIRES: by >= 0 (the clock is monotonic).
  void advance(Nanos by);
  // REQUIRES: t >= now().
  void set(Nanos t);

  // Registers `fire` to run once now() >= deadline. Returns nullopt, without registering
  // it or running it, when the deadline is already reached: the caller acts at once.
  // Const: waiting on a clock does not move it (timers hold a `const Clock&`).
  std::optional<WaitId> at(Nanos deadline, std::function<void()> fire) const;
  // Unregisters a waiter. False when it is no longer registered: it ran, or it is being
  // run right now on the thread that moves the clock (this does not wait for it), so a
  // waiter must tolerate running after its cancel() (io::ClockTimer's waiters check a
  // generation).
  bool cancel(WaitId id) const;
  // Waiters registered and not yet run.
  size_t waiters() const;

 private:
  // Moves now_ by `value` (relative) or to it, takes the waiters the new time reaches
  // under the lock, and runs them after.
  void move(Nanos value, bool relative);
  void lock() const;
  void unlock() const;

  std::atomic<Nanos> now_;
  const Nanos wall_origin_;
  // State below is guarded by lock_ (0 free, 1 held).
  mutable std::atomic<uint32_t> lock_{0};
  mutable uint64_t next_seq_ = 1;
  mutable std::map<std::pair<Nanos, uint64_t>, std::function<void()>> waiters_;
};

}  // namespace kvgate
