// RouteLease: the router's bookkeeping for one routed request, as a move-only handle.
//
// When the router accepts a request it adds the request's load to its endpoint (in
// flight, prefill tokens, KV blocks). That load must be released exactly once, whatever
// way the request ends: an answer, an upstream error, a retry elsewhere, a client that
// left, an exception, or a coroutine destroyed half-way (a detached stream pump at
// shutdown). The lease makes that a property of the type: it releases once, through one
// of its calls, or in its destructor (as a failure) when no call did.
//
//   RouteLease lease(pool, request_id, alive);  // right after an accepted pick
//   ...
//   lease.first_token();                        // once; later calls do nothing
//   lease.done(endpoint, /*ok=*/true, now);     // released; the lease is now empty
//
// `alive` is the owner's flag that the pool still exists (false once the gateway is
// tearing down): a lease destroyed after that releases nothing. Set and read only while
// no I/O thread runs, or before the pools go.
//
// Thread-safety: one lease is used by one coroutine at a time; the pool's calls are
// thread-safe (they hop onto its strand).
#pragma once

#include <atomic>
#include <memory>

#include "core/common/time.h"
#include "core/route/request.h"
#include "gateway/data/pool_routing.h"

namespace kvgate::gateway {

class RouteLease {
 public:
  RouteLease() = default;
  RouteLease(PoolRouting& pool, route::RequestId id, std::shared_ptr<const std::atomic<bool>> alive)
      : pool_(&pool), id_(id), alive_(std::move(alive)) {}
  RouteLease(RouteLease&& other) noexcept { take(other); }
  RouteLease& operator=(RouteLease&& other) noexcept {
    if (this != &other) {
      release_as_failed();
      take(other);
    }
    return *this;
  }
  RouteLease(const RouteLease&) = delete;
  RouteLease& operator=(const RouteLease&) = delete;
  ~RouteLease() { release_as_failed(); }

  // True while the router still counts the request's load.
  bool held() const { return pool_ != nullptr; }
  route::RequestId id() const { return id_; }

  // The first token came: its prefill load leaves the endpoint. Once per lease.
  void first_token();
  // The request is over (the load is released): `ok` false counts a failure on the
  // request's endpoint(s) in the router (the breaker is the caller's: endpoint_result).
  // `output_tokens`: the answer's when known (PoolRouting::finished).
  void finish(bool ok, uint32_t output_tokens = 0);
  // finish(ok) plus the breaker's bookkeeping for `endpoint`, in one hop onto the strand
  // (PoolRouting::exchange_done); `first_token` when the answer brought the first token.
  void done(route::EndpointId endpoint, bool ok, Nanos now, bool first_token = false,
            uint32_t output_tokens = 0);
  // The request is served by `to` instead (PoolRouting::moved): its load moves there; the
  // lease still holds it. Nothing when nothing is held.
  void moved(route::EndpointId to);
  // The request is over and its load was released by someone else (the prefill hop):
  // forget it without calling the pool.
  void released_elsewhere() { pool_ = nullptr; }

 private:
  void take(RouteLease& other) {
    pool_ = other.pool_;
    id_ = other.id_;
    first_token_sent_ = other.first_token_sent_;
    alive_ = std::move(other.alive_);
    other.pool_ = nullptr;
  }
  void release_as_failed();
  bool pool_alive() const { return alive_ && alive_->load(std::memory_order_acquire); }

  PoolRouting* pool_ = nullptr;  // null: nothing held
  route::RequestId id_ = 0;
  bool first_token_sent_ = false;
  std::shared_ptr<const std::atomic<bool>> alive_;
};

}  // namespace kvgate::gateway
