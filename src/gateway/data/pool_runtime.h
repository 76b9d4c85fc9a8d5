// PoolRuntime: one pool of endpoints as the running gateway drives it: the pool's
// request path (PoolRouting, gateway/data/pool_routing.h: tokenization, routing on the
// pool's strand, the breakers, the queue, the endpoint table), which it is and owns, and
// the control plane's side of it, declared here: creating the pool, changing its
// endpoints at run time, telling observers, and the admin's and the feeds' access to the
// router.
//
// Endpoints come from the config and may be added and removed at run time (admin API,
// autoscaler, discovery): add_endpoint puts one in the router at once; remove_endpoint
// drains it first (marked draining, so no new request goes there; requests in flight may
// finish up to a timeout), then takes it out of the router and its indexes. Observers
// (on_change; the LiveFeed is one) follow both, on the strand.
//
//   auto pool = PoolRuntime::create(config, breaker, executor, metrics, clock);
//   auto id = co_await pool->add_endpoint({.url = "http://10.0.0.9:8000"}, std::nullopt);
//   auto drained = co_await pool->remove_endpoint(*id, std::chrono::seconds(30));
//
// Thread-safety: as PoolRouting's for its calls. The control plane's calls run on the
// pool's strand too: add_endpoint, remove_endpoint, set_held and with_router are
// awaitables that hop there; the _sync forms block the calling thread until the strand
// ran them, so they are for threads that are not the gateway's I/O threads (an
// autoscaler loop); apply_standby, set_warmup_hold and post are dispatched or posted
// there and return at once; hold_on_strand and breaker_state are for code already on the
// strand (an observer, with_router). on_change and remove_observer are thread-safe;
// observers are called on the strand. create, set_engine_tokenizer and set_routing_hooks
// are for the gateway's start, before traffic.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/kv/precise_index.h"
#include "core/route/circuit_breaker.h"
#include "core/route/endpoint_holds.h"
#include "core/route/router.h"
#include "gateway/common/config.h"
#include "gateway/common/metrics.h"
#include "gateway/data/pool_routing.h"
#include "gateway/data/recent_requests.h"

namespace kvgate::gateway {

struct EndpointChange {
  enum class Kind : uint8_t {
    kAdded,     // in the router, taking traffic
    kRemoving,  // draining: no new requests; requests in flight may finish
    kRemoved,   // gone from the router and its indexes
  };
  Kind kind = Kind::kAdded;
  EndpointAddress endpoint;
};

class PoolRuntime : public PoolRouting {
 public:
  // `one_thread`: only one thread runs the executor's context, so the pool's work is
  // serialized by it without a strand (no strand's lock and queue on every request).
  // `metrics` and `clock` are borrowed: they must outlive the pool.
  static Result<std::unique_ptr<PoolRuntime>> create(const PoolConfig& config,
                                                     const route::BreakerConfig& breaker,
                                                     boost::asio::any_io_executor executor,
                                                     GatewayMetrics& metrics, const Clock& clock,
                                                     bool one_thread = false);
  ~PoolRuntime();

  // The engine fallback, for pools whose plan uses the engines (set by the gateway at
  // start; PoolRouting::engine_tokenizer reads it).
  void set_engine_tokenizer(std::shared_ptr<EngineTokenizer> t) {
    engine_tokenizer_ = std::move(t);
  }

  // Run-time changes, run on the strand. add_endpoint fails on a bad URL (http://host:port)
  // or one already in the pool. remove_endpoint drains, then removes: true when the
  // endpoint's requests in flight all finished within `timeout`, false when it gave up
  // waiting (their later callbacks are then ignored); an error for an unknown id.
  boost::asio::awaitable<Result<route::EndpointId>> add_endpoint(
      route::EndpointSpec spec, std::optional<KvEventsConfig> kv_events,
      std::string origin = "runtime");
  boost::asio::awaitable<Result<bool>> remove_endpoint(route::EndpointId id,
                                                       std::chrono::milliseconds timeout);
  // The same, blocking, for threads that are not the gateway's I/O threads (an
  // autoscaler loop): calling them on an I/O thread can deadlock.
  Result<route::EndpointId> add_endpoint_sync(route::EndpointSpec spec,
                                              std::optional<KvEventsConfig> kv_events,
                                              std::string origin = "runtime");
  Result<bool> remove_endpoint_sync(route::EndpointId id, std::chrono::milliseconds timeout);
  // Endpoint discovery's grace period (gateway/control/pool_discovery.h): `held` takes the
  // endpoint out of routing (draining: requests in flight finish) without removing it,
  // so its index entries stay; false puts it back. False for an unknown id or one that
  // is being removed.
  boost::asio::awaitable<bool> set_held(route::EndpointId id, bool held);

  // Observers of run-time changes, called on the strand (so they must not block, nor
  // add or remove observers). Returns a handle for remove_observer, which waits for a
  // call in progress.
  using Observer = std::function<void(const EndpointChange&)>;
  uint64_t on_change(Observer fn);
  void remove_observer(uint64_t handle);
  // Holds an endpoint out of routing for its warm-up (route::Hold::kWarmup) at once.
  // Only on the strand: from an observer, so that an endpoint that just joined is held
  // before any request can be routed to it.
  void hold_on_strand(route::EndpointId id);
  // Ends (or starts) the warm-up's hold of `id`: it returns to routing unless another
  // hold stays (a drain begun meanwhile). Any thread; runs on the strand.
  void set_warmup_hold(route::EndpointId id, bool on);
  // The autoscaler's standby replicas (the horizon policy's `standby`): `count` of the
  // ready endpoints, the youngest by their addition (route::plan_standby over
  // scale/standby.h), are kept out of routing (Health::kStandby); the others return to
  // routing, and the queue dispatches. Only endpoints held for nothing else are touched:
  // a warm-up's, a breaker's or a drain's hold stays as it is. Any thread; runs on the
  // strand.
  void apply_standby(int32_t count);
  // Control plane (scrapes, KV events): posts `fn(router, precise index)` to the strand.
  void post(std::function<void(route::Router&, kv::PreciseIndex&)> fn);

  // The circuit breaker of `id` (admin views; open_until in clock().now() time). Call
  // on the strand (inside with_router).
  route::CircuitBreakers::State breaker_state(route::EndpointId id) const;

  // Replica sync (gateway/sync/replica_sync.h): the hooks the request path calls on the
  // strand (PoolRouting::RoutingHooks). Set before traffic starts.
  void set_routing_hooks(RoutingHooks hooks) { hooks_ = std::move(hooks); }

  // The last requests routed while someone looks (the admin status page's "why here?"):
  // watch() from any thread, entries on the strand (inside with_router).
  RecentRequests& recent() { return recent_; }

  // Test and admin access: runs `fn(router)` on the strand.
  boost::asio::awaitable<void> with_router(std::function<void(route::Router&)> fn);

 private:
  PoolRuntime(const PoolConfig& config, const route::BreakerConfig& breaker,
              boost::asio::any_io_executor executor, GatewayMetrics& metrics, const Clock& clock,
              bool one_thread);
  // The tokenizer and chat template, as the pool's `tokenize:` mode says (plan_).
  Status load_tokenize();
  boost::asio::awaitable<void> router_task(std::function<void(route::Router&)> fn);
  Result<route::EndpointId> add_on_strand(route::EndpointSpec spec,
                                          std::optional<KvEventsConfig> kv_events,
                                          std::string origin);
  // co_spawn needs a default-constructible result: hence the optional (always set).
  boost::asio::awaitable<std::optional<Result<route::EndpointId>>> add_task(
      route::EndpointSpec spec, std::optional<KvEventsConfig> kv_events, std::string origin);
  boost::asio::awaitable<bool> held_task(route::EndpointId id, bool held);
  boost::asio::awaitable<std::optional<Result<bool>>> remove_task(
      route::EndpointId id, std::chrono::milliseconds timeout);
  void notify(EndpointChange::Kind kind, const EndpointAddress& endpoint);

  // On the strand: by EndpointId, a remove_endpoint is under way.
  std::vector<bool> removal_started_;
  // Any thread; held while the observers run.
  std::mutex observers_mu_;
  std::vector<std::pair<uint64_t, Observer>> observers_;
  uint64_t next_observer_ = 1;
};

}  // namespace kvgate::gateway
