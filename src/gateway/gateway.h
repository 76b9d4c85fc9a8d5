// Gateway: the running `kvgate serve` data plane.
//
// Wires the parsed GatewayConfig to the HTTP server (io/http_server.h), the API keys
// (keys.h), one PoolRuntime per pool (router on its strand), the upstream connection
// pool (io/upstream_client.h) and the metrics (metrics.h). A request's way:
// auth -> body check -> model -> pool -> tokenize -> route -> proxy (retried on another
// endpoint before any byte reached the client) -> usage, TTFT/ITL -> router lifecycle.
//
//   auto gw = Gateway::start(*config);   // on the real clock; a test may pass its own:
//   auto gw = Gateway::start(*config, {.clock = &manual_clock});
//   if (!gw) ...;
//   uint16_t port = (*gw)->ports()[0];
//   ...
//   (*gw)->drain();   // SIGTERM: /ready 503, stop accepting, let streams finish
//
// Endpoints: POST /v1/chat/completions, POST /v1/completions, GET /v1/models,
// GET /health, GET /ready, GET /metrics.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/clock.h"
#include "core/common/result.h"
#include "env/system_clock.h"
#include "gateway/common/config.h"
#include "gateway/common/metrics.h"

namespace kvgate::gateway {

class PoolRuntime;
class AdminApi;
struct ExternalRequest;
struct ExternalPick;
struct ExternalOutcome;

// What the gateway is given by whoever starts it, besides its config.
struct GatewayOptions {
  // The gateway's one clock (core/common/clock.h): every time its pools, proxy and control
  // plane read (routing, breakers, deadlines, drains, warm-ups, leases, rate-limit windows).
  // Borrowed: it must outlive the gateway. Null is taken as the default.
  const Clock* clock = &env::system_clock();
};

class Gateway {
 public:
  static Result<std::unique_ptr<Gateway>> start(GatewayConfig config, GatewayOptions options = {});
  ~Gateway();
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  // The bound port of each listener, in config order.
  std::vector<uint16_t> ports() const;
  // Graceful shutdown: /ready answers 503, listeners stop accepting, responses in flight
  // (streams included) get up to timeouts.drain to finish, then everything stops.
  // Idempotent; returns when done.
  void drain();
  bool draining() const;
  // Why the gateway takes no traffic now, or nullopt when it does. Without `discovered`
  // it is what GET /ready answers 503 with: "draining" (drain announced), "syncing" (the
  // replicas' first sync, gateway/sync/replica_sync.h). With `discovered` also
  // "discovering" while a pool's discovery has not taken a first list from each of its
  // sources, unless the pool has endpoints of its own in the config: the Endpoint
  // Picker's readiness (docs/epp.md). Any thread.
  std::optional<std::string_view> unready(bool discovered = false) const;

  GatewayMetrics& metrics();
  // The running pools (control plane: admin API, autoscaler), in config order; nullptr
  // for an unknown name. They live as long as the gateway.
  std::vector<PoolRuntime*> pools();
  PoolRuntime* pool(std::string_view name);
  // The admin API (admin_api.h) when the config has an `admin:` section, else nullptr;
  // other components register their sections on it. Its bound port.
  AdminApi* admin();
  std::optional<uint16_t> admin_port() const;
  // Warm-up before traffic (gateway/control/warmup.h): every pool's warm-up state as JSON, for
  // the admin API.
  std::string warmup_status_json() const;

  // External routing (gateway/data/external.h: the Endpoint Picker): the request is checked
  // and routed as this gateway's own are, then handed back instead of proxied. `done`
  // runs exactly once (it must not block): on the calling thread before this returns
  // when the request waits for nothing (the front door answers it, or its pool's strand
  // is free: DataPlane::external_now), else on one of the gateway's I/O threads. Returns
  // the cancel: the data plane gave up before the pick (out of the queue at once, then
  // `done` still runs, with an answer). Any thread.
  std::function<void()> pick_external(ExternalRequest request,
                                      std::function<void(ExternalPick)> done);
  // The end of an answer the data plane carried: the router's load released, the usage
  // charged to the tenant, the request's metrics recorded, as serve's own. Any thread.
  void external_done(ExternalPick pick, ExternalOutcome outcome);

  struct Impl;

 private:
  explicit Gateway(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvgate::gateway
