// RedisCounterStore: rate-limit counters in Redis, so several gateway replicas share one
// budget, read and written without blocking the caller's thread.
//
// A get() is one MGET; an add() one Lua script that increments every key and refreshes
// its expiry atomically (INCRBY + PEXPIRE per key). Both go over one pipelined
// RedisAsync connection (io/redis_async.h), with its timeouts (50 ms by default) and
// paced reconnection, so a slow or dead Redis delays a limited tenant's request by one
// timeout at most and never the thread it runs on. Adds are coalesced: while one script
// call is in flight, the increments that come meanwhile add up per key and go out as one
// call when it answers (at any load, one add in flight per store).
//
//   RedisCounterStore store(strand, {.port = 6379});
//   store.get(keys, [](Result<std::vector<int64_t>> v) { ... });   // on `strand`
//
// Thread-safety: call on the store's executor only; callbacks run there.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/limit/counter_store.h"
#include "io/redis_async.h"

namespace kvgate::io {

class RedisCounterStore {
 public:
  using Options = RedisAsync::Options;
  using GetDone = std::function<void(Result<std::vector<int64_t>>)>;
  using AddDone = std::function<void(Status)>;

  RedisCounterStore(boost::asio::any_io_executor executor, Options options);
  ~RedisCounterStore();

  // The current values of `keys` (0 for absent or expired ones), or the error.
  void get(std::span<const std::string> keys, GetDone done);
  // Adds every increment and (re)sets its expiry; `done` (may be empty) learns whether
  // the batch it went out in was stored.
  void add(std::span<const limit::Increment> increments, AddDone done);

  const RedisAsync& connection() const { return redis_; }

 private:
  void send_adds();

  bool closing_ = false;  // the destructor runs: no more sends
  bool add_in_flight_ = false;
  // Increments waiting for the call in flight to answer: key -> (amount, ttl).
  std::unordered_map<std::string, limit::Increment> queued_;
  std::vector<AddDone> queued_done_;
  RedisAsync redis_;  // last: destroyed first, its failing callbacks still see the above
};

}  // namespace kvgate::io
