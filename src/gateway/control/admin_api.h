// AdminApi: `kvgate serve`'s control-plane HTTP API, on its own listener.
//
// Loopback by default; every request must carry `Authorization: Bearer TOKEN` (or Basic
// with the token as password: a browser's login prompt) when the config gives a token
// (compared by SHA-256 digest in constant time, as API keys are). JSON in and out,
// OpenAI-style error bodies. Routes (docs/gateway.md, "Admin API"):
//
//   GET    /admin                                  the sections and pools
//   GET    /admin/ui, /admin/ui/{file}             the status page (ui_files.h)
//   GET    /admin/pools                            every pool with its endpoints' state
//   GET    /admin/pools/{pool}                     one pool
//   GET    /admin/pools/{pool}/endpoints?offset=&limit=&health=   its endpoints' state
//   POST   /admin/pools/{pool}/endpoints           add one -> 201 {"id":..}
//   GET    /admin/pools/{pool}/endpoints/{id}      one endpoint
//   DELETE /admin/pools/{pool}/endpoints/{id}?timeout_ms=N   drain, then remove
//   POST   /admin/pools/{pool}/route               the router's view of a prompt (of an
//                                                  adapter when `model` names one)
//   GET    /admin/pools/{pool}/policy              routing parameters
//   PUT    /admin/pools/{pool}/policy              replace them / PATCH: change some
//   GET    /admin/{section}, /admin/pools/{pool}/{section}   registered sections
//
// Other components show their state here without editing this file: add_section()
// registers GET /admin/{name}, add_pool_section() GET /admin/pools/{pool}/{name}
// (e.g. the autoscaler's state per pool, warm-up progress). Their callbacks run on one
// of the gateway's I/O threads (the executor given to start()), concurrently with
// everything else: they must be thread-safe, quick and never block (they hold up
// requests on that thread).
//
//   auto admin = AdminApi::start(*config.admin, executor, {{pool, feed}, ...}, clock);
//   (*admin)->add_pool_section("autoscaler", [&](std::string_view pool)
//       -> std::optional<boost::json::value> { return scaler.state_json(pool); });
//   uint16_t port = (*admin)->port();
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/json/value.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/clock.h"
#include "core/common/result.h"
#include "gateway/common/config.h"

namespace kvgate::gateway {

class PoolRuntime;
class LiveFeed;

class AdminApi {
 public:
  struct PoolHandle {
    PoolRuntime* pool = nullptr;  // required
    LiveFeed* feed = nullptr;     // optional: KV event stats
    // The pool's LoRA adapters (ModelConfig::base set): a route view whose `model` names
    // one (or an alias) routes as that adapter's requests do.
    std::vector<ModelConfig> adapters = {};
  };
  // GET /admin/{name}: the body.
  using Section = std::function<boost::json::value()>;
  // GET /admin/{name} from a coroutine on the admin API's executor: for a section that
  // must wait for something (the tenants' budgets, read from Redis).
  using AsyncSection = std::function<boost::asio::awaitable<boost::json::value>()>;
  // GET /admin/pools/{pool}/{name}: the body, or nullopt for 404 (nothing for that pool).
  using PoolSection = std::function<std::optional<boost::json::value>(std::string_view pool)>;

  // Binds config.address:config.port and serves until stop(). The handlers do their work
  // on `executor` (the gateway's I/O threads, where the pools' strands live). The pools,
  // feeds and `clock` (what the failed authentications' window is measured on; a pool's
  // views are in its own clock) must outlive the AdminApi. Errors: the address cannot be
  // bound.
  static Result<std::unique_ptr<AdminApi>> start(const AdminConfig& config,
                                                 boost::asio::any_io_executor executor,
                                                 std::vector<PoolHandle> pools, const Clock& clock);
  ~AdminApi();  // stop()
  AdminApi(const AdminApi&) = delete;
  AdminApi& operator=(const AdminApi&) = delete;

  uint16_t port() const;
  // Stops the listener (requests in flight get a short grace). Idempotent.
  void stop();

  // Registration, thread-safe, at any time; a name registered again replaces the
  // callback. Names of built-in routes ("pools", "endpoints", "route", "policy", "ui")
  // are refused (returns false).
  bool add_section(std::string name, Section fn);
  bool add_async_section(std::string name, AsyncSection fn);
  bool add_pool_section(std::string name, PoolSection fn);

  struct Impl;

 private:
  explicit AdminApi(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace kvgate::gateway
