// EventQueue: the simulator's clock, a priority queue of events in virtual time.
//
// Events pop in order of time, and events at the same time in the order they were
// pushed (a sequence number breaks the tie), so a run never depends on heap layout,
// pointer values or the standard library: the same pushes give the same pops on every
// machine. The payload is a small value type chosen by the caller (the simulator
// dispatches on it); the queue knows nothing about engines or requests.
//
//   EventQueue<MyEvent> q;
//   q.push(5 * kMillisecond, MyEvent{...});
//   while (!q.empty()) { auto e = q.pop(); handle(e.at, e.payload); }
//
// Thread-safety: none.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/common/time.h"

namespace kvgate::sim {

template <typename Payload>
class EventQueue {
 public:
  struct Entry {
    Nanos at;
    uint64_t seq;
    Payload payload;
  };

  // Schedules `payload` at virtual time `at`; returns its sequence number.
  uint64_t push(Nanos at, Payload payload) {
    const uint64_t seq = next_seq_++;
    heap_.push_back(Entry{at, seq, std::move(payload)});
    std::push_heap(heap_.begin(), heap_.end(), Later{});
    return seq;
  }

  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }

  // REQUIRES: !empty()
  Nanos next_time() const { return heap_.front().at; }

  // Removes and returns the earliest event (lowest sequence number among equal times).
  // REQUIRES: !empty()
  Entry pop() {
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    Entry e = std::move(heap_.back());
    heap_.pop_back();
    return e;
  }

  void clear() {
    heap_.clear();
    next_seq_ = 0;
  }

 private:
  // std::*_heap build a max-heap; "later" as less-than puts the earliest on top.
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const {
      return a.at != b.at ? a.at > b.at : a.seq > b.seq;
    }
  };

  std::vector<Entry> heap_;
  uint64_t next_seq_ = 0;
};

}  // namespace kvgate::sim
