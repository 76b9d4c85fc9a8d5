#include "core/common/clock.h"

#include <limits>
#include <vector>

namespace kvgate {

void ManualClock::lock() const {
  while (lock_.exchange(1, std::memory_order_acquire) != 0) {
    lock_.wait(1, std::memory_order_relaxed);
  }
}

void ManualClock::unlock() const {
  lock_.store(0, std::memory_order_release);
  lock_.notify_one();
}

void ManualClock::advance(Nanos by) { move(by, /*relative=*/true); }

void ManualClock::set(Nanos t) { move(t, /*relative=*/false); }

void ManualClock::move(Nanos value, bool relative) {
  std::vector<std::function<void()>> due;
  lock();
  // Read and written under the lock: two threads moving the clock at once both count,
  // and at() sees either the old time (its waiter is then taken here) or the new one.
  const Nanos t = relative ? now_.load(std::memory_order_relaxed) + value : value;
  now_.store(t, std::memory_order_release);
  const auto end = waiters_.upper_bound(std::pair{t, std::numeric_limits<uint64_t>::max()});
  for (auto it = waiters_.begin(); it != end; ++it) due.push_back(std::move(it->second));
  waiters_.erase(waiters_.begin(), end);
  unlock();
  for (std::function<void()>& fire : due) fire();
}

std::optional<ManualClock::WaitId> ManualClock::at(Nanos deadline,
                                                   std::function<void()> fire) const {
  lock();
  if (deadline <= now_.load(std::memory_order_relaxed)) {
    unlock();
    return std::nullopt;
  }
  const WaitId id{.deadline = deadline, .seq = next_seq_++};
  waiters_.emplace(std::pair{id.deadline, id.seq}, std::move(fire));
  unlock();
  return id;
}

bool ManualClock::cancel(WaitId id) const {
  lock();
  const bool erased = waiters_.erase(std::pair{id.deadline, id.seq}) > 0;
  unlock();
  return erased;
}

size_t ManualClock::waiters() const {
  lock();
  const size_t n = waiters_.size();
  unlock();
  return n;
}

}  // namespace kvgate
