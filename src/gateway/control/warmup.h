// PoolWarmup: warm-up before traffic for one pool of `kvgate serve` (docs/coldstart.md,
// "Warm-up before traffic").
//
// A replica added at run time arrives with an empty prefix cache: its first requests
// prefill every system prompt again. With `warmup.enabled`, the gateway holds it out of
// routing (unhealthy in the router), waits until its GET /health answers 200, sends it
// the pool's hot prefixes (kv::HotPrefixes::top: the shared prompt prefixes with the most
// recent hits x length) as 1-token completions, `concurrency` at a time, for at most
// `budget`, and only then admits it. Warm-up requests go straight to the endpoint, not
// through the router; their KV events reach the precise index like any others, so the
// router knows what the new replica holds the moment it is admitted.
//
// What a warm-up request looks like (vLLM's /v1/completions, which takes token ids):
//   {"model": SERVED, "prompt": [token ids], "max_tokens": 1, "temperature": 0}
// with real token ids when the pool has a tokenizer (chat requests rendered through the
// chat template, so the engine sees the same tokens as for the chat request), or with
// the prompt text cut at the block boundary when it has none (completions only: a chat
// request's rendered prompt is unknown without the template, so it is not tracked).
//
// Thread-safe: observe() is called from any I/O thread; the warm-ups run as coroutines
// on their own strand. Endpoints configured at start are never warmed (there is no
// traffic to learn from yet). Times (hot prefixes' recency, a warm-up's budget and
// ready timeout, the records) are read on the pool's clock (PoolRuntime::clock), and the
// warm-up's waits (health polls, the budget) are timed on it (io::ClockTimer).
//
//   auto w = PoolWarmup::create(pool, served_model, upstream, executor);
//   w->observe(keys, token_ids, prompt_text);          // request path
//   std::string text = render_warmup_metrics({w.get()});  // appended to /metrics
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/time.h"
#include "core/kv/block_hash.h"
#include "core/kv/hot_prefixes.h"
#include "core/kv/warmup_run.h"
#include "core/metrics/prometheus_text.h"
#include "gateway/data/hooks.h"
#include "gateway/data/pool_runtime.h"

namespace kvgate::io {
class UpstreamClient;
}

namespace kvgate::gateway {

// One warm-up, as the admin API shows it.
struct WarmupRecord {
  std::string url;
  route::EndpointId endpoint = 0;
  // waiting_ready | warming | complete | timeout | not_ready | empty | cancelled
  std::string state;
  Nanos started = 0;  // when the endpoint was added (the pool's clock)
  Nanos ended = -1;   // when it was admitted (or cancelled); -1: still running
  kv::WarmupStats stats;
};

struct WarmupStatus {
  std::string pool;
  kv::WarmupConfig config;
  size_t tracked_prefixes = 0;     // entries in the hot-prefix table
  size_t stored_tokens = 0;        // tokens it holds
  std::vector<WarmupRecord> runs;  // running ones and the last finished ones, oldest first
};

// Counters since start, for /metrics.
struct WarmupCounters {
  std::string pool;
  std::map<std::string, uint64_t> runs;  // by final state (complete, timeout, ...)
  uint64_t requests_ok = 0;
  uint64_t requests_failed = 0;
  uint64_t prompt_tokens = 0;  // prompt tokens of answered warm-up requests
  uint64_t cached_tokens = 0;  // of which the endpoint already held
  uint32_t warming = 0;        // warm-ups running now
  size_t tracked_prefixes = 0;
  metrics::HistogramSnapshot duration;  // seconds from added to admitted
};

// The request path reaches it as its pool's PromptObserver (gateway/data/hooks.h).
class PoolWarmup final : public PromptObserver {
 public:
  // Registers an on_change observer with `pool` when its warm-up is enabled. `pool` and
  // `upstream` must outlive the returned object, and the object must outlive every
  // coroutine on `executor` (the gateway stops its io_context first).
  static std::unique_ptr<PoolWarmup> create(PoolRuntime& pool, std::string served_model,
                                            io::UpstreamClient& upstream,
                                            boost::asio::any_io_executor executor);
  ~PoolWarmup();

  bool enabled() const override;
  // Request path: one routed prompt. `token_ids`: the real tokens its keys were hashed
  // from, or empty; then `text` (a completion's prompt, hashed 4 bytes per pseudo-token)
  // is kept instead, and an empty text means "not trackable". No-op when disabled.
  void observe(std::span<const kv::BlockKey> keys, std::span<const kv::TokenId> token_ids,
               std::string_view text) override;
  PoolRuntime& pool() const;
  size_t prefixes() const;  // the warm-up set's size (warmup.prefixes)
  // This replica's hot prefixes, best first (kv::HotPrefixes::top), for its peers.
  std::vector<kv::HotPrefix> top(size_t k) const;
  // Several gateway replicas (gateway/sync/replica_sync.h): `peers` returns the peers' latest
  // hot prefixes; a warm-up then takes the best of its own and theirs
  // (kv::merge_hot_prefixes). Set before endpoints are added at run time.
  void set_peers(std::function<std::vector<std::vector<kv::HotPrefix>>()> peers);
  // Starts a warm-up of an endpoint added at run time (what the on_change observer calls).
  void start(route::EndpointId id, std::string url);
  // The endpoint is going away: a warm-up in progress stops without admitting it.
  void cancel(route::EndpointId id);

  WarmupStatus status() const;
  WarmupCounters counters() const;

  struct Impl;

 private:
  explicit PoolWarmup(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

// The warm-up metrics of several pools in Prometheus text (each family once):
//   kvgate_warmups_total{pool,outcome}            counter (complete, timeout, not_ready,
//                                                  empty, cancelled)
//   kvgate_warmup_requests_total{pool,result}     counter (ok, failed)
//   kvgate_warmup_prompt_tokens_total{pool}       counter (tokens warmed)
//   kvgate_warmup_cached_tokens_total{pool}       counter (of which already cached)
//   kvgate_warmup_duration_seconds{pool}          histogram (added -> admitted)
//   kvgate_endpoints_warming{pool}                gauge
//   kvgate_hot_prefixes{pool}                     gauge (entries tracked)
std::string render_warmup_metrics(const std::vector<const PoolWarmup*>& pools);
// {"pools": [{"pool", "enabled", "config", "tracked_prefixes", "stored_tokens",
//             "runs": [{"url", "state", "started_s", "duration_s", "planned", "sent", ...}]}]}
std::string warmup_status_json(const std::vector<const PoolWarmup*>& pools);

}  // namespace kvgate::gateway
