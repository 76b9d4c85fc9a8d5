// RecentRequests: the last requests a pool routed, for the admin status page's "why
// here?" box, which lets a person pick one and see the router explain it again
// (GET /admin/pools/{pool}/recent, POST .../route with "recent_id"; docs/gateway.md).
//
// Recorded only while someone looks: the admin API calls watch() each time the list is
// read, and the pool records its decisions for the next kWatchFor after that. While
// nobody looks a decision costs one relaxed atomic load and a comparison, and the list
// keeps what it had (at most kCapacity requests, their block keys capped at kMaxKeys).
//
//   on the pool's strand, after a decision:
//     if (recent.watched(now)) [[unlikely]] recent.record(request, decision, now);
//   admin (any thread): recent.watch(now);  then, on the strand: recent.entries()
//
// Thread-safety: watch() and watched() from any thread; record(), entries() and find()
// on the pool's strand only.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "core/common/time.h"
#include "core/kv/block_hash.h"
#include "core/route/decision.h"
#include "core/route/request.h"

namespace kvgate::gateway {

class RecentRequests {
 public:
  static constexpr size_t kCapacity = 20;
  static constexpr Nanos kWatchFor = 60 * kSecond;
  static constexpr size_t kMaxKeys = 8192;  // blocks kept of a prompt (128K tokens of 16)

  struct Entry {
    route::RequestId id = 0;
    Nanos at = 0;  // the pool's clock
    uint32_t prompt_tokens = 0;
    uint32_t expected_output_tokens = 0;
    std::vector<kv::BlockKey> keys;
    route::Decision decision;
  };

  // Records decisions until `now` + kWatchFor. Any thread.
  void watch(Nanos now) { until_.store(now + kWatchFor, std::memory_order_relaxed); }
  // Whether a decision made at `now` is recorded. Any thread.
  bool watched(Nanos now) const { return now < until_.load(std::memory_order_relaxed); }

  void record(const route::RouteRequest& request, const route::Decision& decision, Nanos now) {
    if (entries_.size() == kCapacity) entries_.pop_front();
    Entry& e = entries_.emplace_back();
    e.id = request.id;
    e.at = now;
    e.prompt_tokens = request.prompt_tokens;
    e.expected_output_tokens = request.expected_output_tokens;
    const size_t n = std::min(request.keys.size(), kMaxKeys);
    e.keys.assign(request.keys.begin(), request.keys.begin() + static_cast<std::ptrdiff_t>(n));
    e.decision = decision;
  }
  // Oldest first.
  const std::deque<Entry>& entries() const { return entries_; }
  const Entry* find(route::RequestId id) const {
    for (const Entry& e : entries_) {
      if (e.id == id) return &e;
    }
    return nullptr;
  }

 private:
  std::atomic<Nanos> until_{0};
  std::deque<Entry> entries_;
};

}  // namespace kvgate::gateway
