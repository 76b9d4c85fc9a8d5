// RedisCounterStore: rate-limit counters in Redis, so several gateway replicas share one
// budget.
//
// Each add() is one round trip: a Lua script increments every key and refreshes its
// expiry atomically (INCRBY + PEXPIRE per key). get() is one MGET. Both run under short
// timeouts (connect and command, default 50 ms): when Redis is slow or gone the call
// fails fast with an error, the RateLimiter's failure policy decides (open or closed),
// and reconnection is retried at most once per `reconnect_interval` so a dead Redis
// costs the data path nothing more than a failed check.
//
// Thread-safety: safe; calls are serialized on one connection.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "core/limit/counter_store.h"

struct redisContext;

namespace kvgate::io {

class RedisCounterStore final : public limit::CounterStore {
 public:
  struct Options {
    std::string host = "127.0.0.1";
    int port = 6379;
    std::string password;  // AUTH when not empty
    Nanos connect_timeout = 50 * kMillisecond;
    Nanos command_timeout = 50 * kMillisecond;
    Nanos reconnect_interval = kSecond;
  };

  explicit RedisCounterStore(Options options);
  ~RedisCounterStore() override;

  // `now` is only used to pace reconnection attempts; Redis expires keys itself.
  Result<std::vector<int64_t>> get(std::span<const std::string> keys, Nanos now) override;
  Status add(std::span<const limit::Increment> increments, Nanos now) override;

 private:
  Status ensure_connected(Nanos now);
  void drop_connection();

  Options options_;
  std::mutex mu_;
  // State below is protected by mu_.
  redisContext* ctx_ = nullptr;
  Nanos next_attempt_ = 0;
  std::string last_error_;
};

}  // namespace kvgate::io
