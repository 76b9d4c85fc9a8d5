// Gateway::Impl: the gateway assembled, its data plane (DataPlane, which it is:
// gateway/data/data_plane.h) and the control plane and replica sync around it. gateway.cc
// wires them at start (feeds, warm-up, LoRA placement, autoscalers, discovery, replica
// sync, admin sections; the data plane's hooks, gateway/data/hooks.h), drains and stops
// them. It implements what the data plane asks of the planes above: unready() and
// metrics_text().
// Not a public header: only gateway.cc includes it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/control/admin_api.h"
#include "gateway/control/autoscale_loop.h"
#include "gateway/control/live_feed.h"
#include "gateway/control/lora_placer.h"
#include "gateway/control/pool_discovery.h"
#include "gateway/control/warmup.h"
#include "gateway/data/data_plane.h"
#include "gateway/gateway.h"
#include "gateway/sync/replica_sync.h"

namespace kvgate::gateway {

struct Gateway::Impl : DataPlane {
  Impl(int threads, const Clock& c) : DataPlane(threads, c) {}
  // Before any member goes: coroutine frames the context destroys later (with their
  // route leases) must not call the pools, which are destroyed first.
  ~Impl() override { pools_alive->store(false, std::memory_order_release); }

  // Destroyed before the data plane's members (the pools, the upstream client, the I/O
  // context), in this order's reverse.
  std::vector<std::unique_ptr<LiveFeed>> feeds;
  std::vector<std::unique_ptr<PoolWarmup>> warmups;  // by pool index (gateway/control/warmup.h)
  // By pool index; null for a pool without LoRA placement (gateway/control/lora_placer.h).
  std::vector<std::unique_ptr<LoraPlacer>> lora_placers;
  std::vector<std::unique_ptr<AutoscaleLoop>> autoscalers;  // stopped first in stop_all
  std::vector<std::unique_ptr<PoolDiscovery>> discoveries;  // docs/discovery.md
  std::vector<std::unique_ptr<io::HttpServer>> servers;
  std::unique_ptr<AdminApi> admin;       // config.admin set; destroyed before the pools
  std::unique_ptr<ReplicaSync> cluster;  // config.cluster set (gateway/sync/replica_sync.h)

  std::vector<const PoolWarmup*> all_warmups() const {
    std::vector<const PoolWarmup*> out;
    for (const auto& w : warmups) out.push_back(w.get());
    return out;
  }

  // Gateway::unready: the one rule of /ready and the Endpoint Picker's readiness.
  std::optional<std::string_view> unready(bool discovered) const override {
    if (not_ready.load()) return "draining";
    if (cluster && !cluster->started()) return "syncing";
    if (!discovered) return std::nullopt;
    for (const auto& d : discoveries) {
      bool own_endpoints = false;
      for (const auto& p : pools) {
        if (p->name() == d->pool_name()) own_endpoints = !p->config().endpoints.empty();
      }
      if (!own_endpoints && !d->synced()) return "discovering";
    }
    return std::nullopt;
  }

  // GET /metrics: the request path's metrics and every plane's.
  std::string metrics_text() const override {
    return metrics.render() + render_warmup_metrics(all_warmups()) + fault_metrics.render() +
           discovery_metrics() + render_flow_metrics(all_flows()) +
           (cluster ? cluster->render_metrics() : "") + (tracer ? tracer->render_metrics() : "");
  }

  std::string discovery_metrics() const {
    std::vector<const PoolDiscovery*> d;
    for (const auto& p : discoveries) d.push_back(p.get());
    return render_discovery_metrics(d);
  }

  void stop_all();
};

}  // namespace kvgate::gateway
