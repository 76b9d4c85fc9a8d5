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
// Who owns it: whoever builds the component; a component borrows it (`const Clock&`) and
// it must outlive that component. Thread-safety: both clocks may be read from any thread;
// ManualClock may be moved from any thread too.
#pragma once

#include <atomic>

#include "core/common/time.h"

namespace kvgate {

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
};

// A clock that moves only when told: deterministic tests, and a shell run in virtual
// time. wall_now() is now() plus a fixed epoch offset, so both move together.
class ManualClock final : public Clock {
 public:
  // 2023-11-14T22:13:20Z: a wall time that is plainly not 1970 in logs and schedules.
  static constexpr Nanos kDefaultWallOrigin = 1'700'000'000 * kSecond;

  explicit ManualClock(Nanos start = 0, Nanos wall_origin = kDefaultWallOrigin)
      : now_(start), wall_origin_(wall_origin) {}

  Nanos now() const override { return now_.load(std::memory_order_acquire); }
  Nanos wall_now() const override { return wall_origin_ + now(); }

  // REQUIRES: by >= 0 (the clock is monotonic).
  void advance(Nanos by) { now_.fetch_add(by, std::memory_order_acq_rel); }
  // REQUIRES: t >= now().
  void set(Nanos t) { now_.store(t, std::memory_order_release); }

 private:
  std::atomic<Nanos> now_;
  const Nanos wall_origin_;
};

}  // namespace kvgate
