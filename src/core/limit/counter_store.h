// CounterStore: where rate-limit window counters live.
//
// In-process (MemoryCounterStore, below) for one gateway, or Redis
// (io/redis_counter_store.h) so several gateway replicas share one budget. Counters are
// integers addressed by string keys and expire on their own; RateLimiter decides what
// the keys and amounts are.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/common/result.h"
#include "core/common/time.h"

namespace kvgate::limit {

struct Increment {
  std::string key;
  int64_t amount = 0;
  Nanos ttl = 0;  // the key expires this long after its last increment
};

class CounterStore {
 public:
  virtual ~CounterStore() = default;
  // The current values of `keys`, 0 for absent or expired ones. An error when the store
  // cannot answer (e.g. Redis unreachable); the caller's failure policy decides.
  virtual Result<std::vector<int64_t>> get(std::span<const std::string> keys, Nanos now) = 0;
  // Adds every increment atomically per key and (re)sets its expiry.
  virtual Status add(std::span<const Increment> increments, Nanos now) = 0;
};

// Counters in a hash map, expired lazily against the `now` the caller passes.
// Thread-safety: none (the gateway wraps it in a mutex-guarded store).
class MemoryCounterStore final : public CounterStore {
 public:
  Result<std::vector<int64_t>> get(std::span<const std::string> keys, Nanos now) override;
  Status add(std::span<const Increment> increments, Nanos now) override;
  size_t size() const { return counters_.size(); }

 private:
  struct Counter {
    int64_t value = 0;
    Nanos expires = 0;
  };
  void sweep(Nanos now);

  std::unordered_map<std::string, Counter> counters_;
  Nanos next_sweep_ = 0;
};

}  // namespace kvgate::limit
