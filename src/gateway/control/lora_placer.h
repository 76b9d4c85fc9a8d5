// LoraPlacer: runs one pool's LoRA placement in `kvgate serve` (docs/gateway.md, "LoRA
// adapters"; the rules are the core's, route/lora_placement.h).
//
// Every `lora_placement.interval` (on the pool's clock, io::ClockTimer), and at once when
// a request finds its adapter loaded nowhere or an action ends, a round reads the pool's
// endpoints on its strand (health, load, the scrape's vllm:lora_requests_info), runs the
// planner with the demand counted since, and carries out its actions as vLLM's runtime
// LoRA endpoints, through the gateway's upstream client:
//   POST /v1/load_lora_adapter   {"lora_name": NAME, "lora_path": SOURCE}
//   POST /v1/unload_lora_adapter {"lora_name": NAME}
// A 200 is success (so is a load answered "already been loaded": another gateway replica
// or --lora-modules put it there); anything else, or no answer, a failure (the planner
// backs off from that endpoint). Each result goes back to the planner, the router gets
// what each endpoint holds (EndpointPool::set_lora_placed), and
// kvgate_lora_adapter_{loads,unloads}_total count it.
//
// Request path: arrive() counts the request as its adapter's demand and, when the adapter
// is loaded on no endpoint the router knows of, waits for a load (polling every 10 ms, up
// to lora_placement.max_wait); routed() records which endpoint served the adapter (its
// last use there, which keeps it from the idle unload).
//
// Thread-safe: arrive() and routed() from any I/O thread; rounds and actions run on the
// placer's own strand. The pool and the upstream client must outlive it, and it must
// outlive the coroutines on `executor` (the gateway stops its io_context first).
//
//   auto placer = LoraPlacer::create(pool, adapters, upstream, metrics, executor);
//   if (placer) co_await placer->arrive("sql-lora");   // then route
//   placer->routed(endpoint_id, "sql-lora");
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/route/endpoint.h"
#include "gateway/common/metrics.h"
#include "gateway/data/hooks.h"
#include "gateway/data/pool_runtime.h"

namespace kvgate::io {
class UpstreamClient;
}

namespace kvgate::gateway {

// The request path reaches it as its pool's AdapterPlacement (gateway/data/hooks.h).
class LoraPlacer final : public AdapterPlacement {
 public:
  // One adapter of the pool (the config's `adapters:` whose base is in it).
  struct Adapter {
    std::string name;
    std::string source;  // lora_path
    uint32_t max_replicas = 1;
  };

  // Null when the pool's lora_placement is off or it has no adapters; else started.
  static std::unique_ptr<LoraPlacer> create(PoolRuntime& pool, std::vector<Adapter> adapters,
                                            io::UpstreamClient& upstream, GatewayMetrics& metrics,
                                            boost::asio::any_io_executor executor);
  ~LoraPlacer();

  // A request for `adapter` reached the pool: counted, and when the adapter is loaded
  // nowhere, completes once it is (or after max_wait: the router then decides as it can).
  boost::asio::awaitable<void> arrive(std::string adapter) override;
  // A request for `adapter` was routed to `endpoint`.
  void routed(route::EndpointId endpoint, std::string_view adapter) override;

  struct Impl;

 private:
  explicit LoraPlacer(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace kvgate::gateway
