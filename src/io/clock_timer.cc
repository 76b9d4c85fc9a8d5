#include "io/clock_timer.h"

namespace kvgate::io {

ClockTimer::State::State(executor_type executor, bool on_manual_clock)
    : manual(on_manual_clock), timer(std::move(executor)) {
  // On a ManualClock only the clock's waiter ends a wait (by cancelling it).
  if (manual) timer.expires_at(boost::asio::steady_timer::time_point::max());
}

ClockTimer::ClockTimer(executor_type executor, const Clock& clock)
    : clock_(clock),
      state_(std::make_shared<State>(std::move(executor), clock.manual() != nullptr)) {}

ClockTimer::~ClockTimer() {
  std::lock_guard lock(state_->mu);
  disarm();
  state_->timer.cancel();
}

void ClockTimer::disarm() {
  State& s = *state_;
  if (s.waiter) {
    // False when the clock is running it right now: the generation below makes that a
    // no-op.
    (void)clock_.manual()->cancel(*s.waiter);
    s.waiter.reset();
  }
  ++s.generation;
  s.pending.clear();
}

void ClockTimer::expires_at(Nanos deadline) {
  State& s = *state_;
  std::lock_guard lock(s.mu);
  disarm();
  const ManualClock* manual = clock_.manual();
  if (manual == nullptr) {
    s.timer.expires_after(std::chrono::nanoseconds(deadline - clock_.now()));
    return;
  }
  // Aborts the pending waits (they are no longer in `pending`), as a new expiry does.
  s.timer.expires_at(boost::asio::steady_timer::time_point::max());
  // at() never runs the waiter itself (nullopt when the deadline is reached already),
  // so holding s.mu here cannot deadlock with it.
  s.waiter = manual->at(deadline, [weak = std::weak_ptr<State>(state_), generation = s.generation] {
    fire(weak, generation);
  });
  s.due = !s.waiter.has_value();
}

void ClockTimer::expires_after(Nanos after) {
  if (clock_.manual() != nullptr) {
    expires_at(clock_.now() + after);
    return;
  }
  std::lock_guard lock(state_->mu);
  disarm();
  state_->timer.expires_after(std::chrono::nanoseconds(after));
}

void ClockTimer::cancel() {
  std::lock_guard lock(state_->mu);
  state_->pending.clear();
  state_->timer.cancel();
}

void ClockTimer::fire(const std::weak_ptr<State>& weak, uint64_t generation) {
  const std::shared_ptr<State> s = weak.lock();
  if (!s) return;
  std::lock_guard lock(s->mu);
  if (s->generation != generation) return;  // re-armed or destroyed meanwhile
  s->waiter.reset();
  s->due = true;
  s->woken.insert(s->woken.end(), s->pending.begin(), s->pending.end());
  s->pending.clear();
  // Posts the pending waits' completions (to their executors; they find their ids in
  // `woken` and report success).
  s->timer.cancel();
}

}  // namespace kvgate::io
