// WarmupRun: one replica's warm-up before it takes traffic, as a state machine that the
// gateway (real requests) and the simulator (virtual time) drive the same way.
//
// When a replica becomes ready, the caller keeps it out of routing, takes the pool's
// hot prefixes (HotPrefixes::top(config.prefixes)) and sends each one to the replica as
// a 1-token completion, at most `concurrency` at a time, until all are answered or
// `budget` has passed since the start; then it admits the replica. A prefix whose
// request failed is not retried (the budget is small and the replica is new: a failure
// more likely means it is not ready yet, and the breaker will see it soon enough).
//
//   WarmupRun run(hot.top(cfg.prefixes, now), cfg, now);
//   for (size_t i : run.next(now)) send(run.set()[i]);       // and again after each done()
//   run.done(i, {.ok = true, .prompt_tokens = n});
//   if (run.finished(now)) admit();                          // also at run.deadline()
//
// Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/common/time.h"
#include "core/kv/hot_prefixes.h"

namespace kvgate::kv {

// Per pool. Gateway YAML: `warmup: {enabled, prefixes, budget_ms, concurrency}`.
struct WarmupConfig {
  bool enabled = false;
  uint32_t prefixes = 16;       // the warm-up set: at most this many hot prefixes
  Nanos budget = 10 * kSecond;  // from the start of the warm-up to admission, at most
  uint32_t concurrency = 4;     // warm-up requests in flight at once
};

struct WarmupStats {
  uint32_t planned = 0;        // prefixes in the warm-up set
  uint32_t sent = 0;           // requests sent
  uint32_t succeeded = 0;      // answered with success
  uint32_t failed = 0;         // failed or refused
  uint64_t tokens_warmed = 0;  // prompt tokens of the answered requests
  uint64_t tokens_cached = 0;  // of which the replica already held (reported by it)
  bool timed_out = false;      // the budget ran out before every request was answered
};

struct WarmupResult {
  bool ok = false;
  uint32_t prompt_tokens = 0;
  uint32_t cached_tokens = 0;
};

class WarmupRun {
 public:
  WarmupRun(std::vector<HotPrefix> set, const WarmupConfig& config, Nanos started);

  // Indices into set() to send now (none once the budget has passed); each is marked in
  // flight and returned once.
  std::vector<size_t> next(Nanos now);
  // The answer to set()[index]. Unknown or repeated indices are ignored.
  void done(size_t index, const WarmupResult& result);
  // Every request answered, or the budget passed. Once finished, stays finished.
  bool finished(Nanos now);

  Nanos started() const { return started_; }
  Nanos deadline() const { return deadline_; }
  uint32_t in_flight() const { return in_flight_; }
  const std::vector<HotPrefix>& set() const { return set_; }
  const WarmupStats& stats() const { return stats_; }

 private:
  enum class State : uint8_t { kPending, kInFlight, kDone };
  std::vector<HotPrefix> set_;
  std::vector<State> state_;
  uint32_t concurrency_;
  Nanos started_;
  Nanos deadline_;
  size_t next_ = 0;
  uint32_t in_flight_ = 0;
  uint32_t answered_ = 0;
  bool finished_ = false;
  WarmupStats stats_;
};

}  // namespace kvgate::kv
