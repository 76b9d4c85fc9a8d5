// LoRA placement: which endpoint of a pool holds which LoRA adapter (issue #40).
//
// vLLM loads an adapter at run time (POST /v1/load_lora_adapter) and runs at most
// max_loras of them at once. A pool with placement does not need every engine to hold
// every adapter: the gateway loads an adapter where its requests can go, on more
// endpoints as its demand grows (up to its max_replicas), and unloads it where it has
// been idle. The router then sends an adapter's request only where it is loaded
// (Endpoint::lora_placed, router.cc's keep_lora_placed).
//
// Two parts, both pure (time passed in, no I/O, deterministic):
//   - plan_lora(): one planning round over a full description of the pool, the rules;
//   - LoraPlacement: the bookkeeping between rounds that the shell feeds (what was loaded
//     where, the action in flight per endpoint, last uses, back-offs after failures) and
//     that builds plan_lora's input from it and the pool's endpoints.
// The gateway (gateway/control/lora_placer.h) runs a round every `interval` and carries out the
// actions; the results come back through on_done().
//
// The rules of a round (plan_lora):
//   1. an adapter loaded on an endpoint, not in use there (no running or waiting request
//      in its scrape) and unused for `idle_unload` is unloaded, unless it is the last
//      replica of an adapter that has demand;
//   2. an adapter with demand loaded nowhere (nor loading) is loaded on the least loaded
//      endpoint with a free slot; when none has one, on the endpoint whose least recently
//      used adapter is idle (not in use there and unused for one `interval`; the oldest
//      first), which that round unloads first (the load follows in a later round, once
//      the slot is free);
//   3. an adapter whose demand per replica exceeds `replica_demand` and that has fewer
//      than max_replicas replicas gets one more, chosen as in 2, one at a time (no second
//      while a load of it is in flight);
//   4. an endpoint has at most one action (load or unload) in flight, so never two loads
//      of one adapter on it; an endpoint where loading an adapter failed is not chosen
//      for it again for `load_backoff` (it goes elsewhere meanwhile); only endpoints that
//      are routable (healthy) get actions.
//
// Demand: requests for the adapter that reached the pool per second over the last round,
// plus those waiting for it to be loaded somewhere. The gateway counts them as they come
// (it sees every request and its adapter, even one that no endpoint can serve yet),
// whereas the scrape's vllm:lora_requests_info only says whether an adapter has any
// running or waiting request on an endpoint, not how many, and says nothing of an
// adapter that is loaded nowhere.
//
//   LoraPlacement placement(config);
//   std::vector<LoraAction> todo = placement.plan(endpoints, demand, now);
//   ... POST each; then placement.on_done(action, ok, now);
//   router.pool().set_lora_placed(id, placement.placed(id));
//
// Thread-safety: none; the owner serializes calls.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/common/result.h"
#include "core/common/time.h"
#include "core/route/endpoint.h"
#include "core/route/endpoint_pool.h"

namespace kvgate::route {

struct LoraPlacementConfig {
  bool enabled = false;               // off: adapters are where the engines were started with them
  Nanos interval = kSecond;           // between planning rounds
  Nanos idle_unload = 300 * kSecond;  // unused this long on an endpoint: unloaded there
  // Requests per second per replica above which an adapter gets one more replica.
  double replica_demand = 4;
  // After a failed load on an endpoint, how long the adapter is not placed there again.
  Nanos load_backoff = 30 * kSecond;
  // How long a request for an adapter loaded nowhere waits for a load (gateway).
  Nanos max_wait = 10 * kSecond;
  // Adapter slots of an endpoint that has not reported max_lora (vLLM shows
  // vllm:lora_requests_info only once it has served a request).
  uint32_t default_slots = 1;

  // Error naming the first bad field.
  Status validate() const;
};

struct LoraAction {
  enum class Kind : uint8_t { kLoad, kUnload };
  Kind kind = Kind::kLoad;
  EndpointId endpoint = 0;
  std::string adapter;
  bool operator==(const LoraAction&) const = default;
};

std::string_view to_string(LoraAction::Kind kind);  // "load", "unload"

// One adapter of the pool, as a round sees it.
struct AdapterDemand {
  std::string name;
  double rate = 0;       // requests per second that asked for it in the last round
  uint32_t waiting = 0;  // requests waiting for it to be loaded somewhere
  uint32_t max_replicas = 1;
  bool wanted() const { return rate > 0 || waiting > 0; }
};

// One endpoint as plan_lora sees it (LoraPlacement builds it).
struct LoraEndpointState {
  EndpointId id = 0;
  bool routable = true;  // healthy: takes new loads
  uint32_t slots = 1;    // adapters it may hold (max_loras)
  double load = 0;       // requests in flight and waiting: "least loaded" compares it
  struct Held {
    std::string adapter;
    Nanos last_used = 0;  // last request routed to it here (or its load)
    bool active = false;  // running or waiting requests in the last scrape
  };
  std::vector<Held> loaded;
  bool busy = false;                   // an action is in flight here
  std::optional<std::string> loading;  // the adapter being loaded, if any
  std::vector<std::string> backoff;    // adapters whose load failed here recently
};

// One planning round: the actions to start now, at most one per endpoint, in a
// deterministic order (endpoints and adapters as given; ties by load, then id).
std::vector<LoraAction> plan_lora(const LoraPlacementConfig& config,
                                  std::span<const LoraEndpointState> endpoints,
                                  std::span<const AdapterDemand> demand, Nanos now);

// An endpoint of the pool as the shell reports it at each round.
struct LoraEndpointView {
  EndpointId id = 0;
  bool routable = true;
  double load = 0;
  LoraActivity activity;  // from its last scrape (max_loras 0: not reported)
};

// The placement's view of every endpoint of `pool`: routable when healthy, its load the
// router's in-flight count plus the scrape's waiting requests, its LoRA activity the
// scrape's. What the gateway's placer and the simulator both report each round.
std::vector<LoraEndpointView> lora_views(const EndpointPool& pool);

class LoraPlacement {
 public:
  explicit LoraPlacement(LoraPlacementConfig config) : config_(std::move(config)) {}
  const LoraPlacementConfig& config() const { return config_; }

  // One round. `endpoints`: the pool's endpoints now (one gone is forgotten, its
  // actions in flight with it); adapters its scrape shows in use count as loaded there
  // and used now. Returns the actions to carry out; each is in flight until on_done.
  std::vector<LoraAction> plan(std::span<const LoraEndpointView> endpoints,
                               std::span<const AdapterDemand> demand, Nanos now);
  // The result of an action plan() returned. A load that succeeded makes the adapter
  // loaded there (used now); one that failed keeps it off that endpoint for
  // load_backoff. An unload forgets the adapter there even when it failed (the engine
  // no longer has it, or will be asked again when it shows it in use). Unknown actions
  // (the endpoint left meanwhile) are ignored.
  void on_done(const LoraAction& action, bool ok, Nanos now);
  // A request for `adapter` was routed to `endpoint`.
  void on_routed(EndpointId endpoint, std::string_view adapter, Nanos now);

  // What `endpoint` holds, for the router (EndpointPool::set_lora_placed).
  LoraPlaced placed(EndpointId endpoint) const;
  // Whether some endpoint has `adapter` loaded.
  bool loaded_anywhere(std::string_view adapter) const;
  // Actions in flight.
  size_t in_flight() const;

 private:
  struct Known {
    std::map<std::string, Nanos, std::less<>> loaded;  // adapter -> last used
    std::optional<LoraAction> in_flight;
    std::map<std::string, Nanos, std::less<>> backoff;  // adapter -> until
  };

  LoraPlacementConfig config_;
  std::map<EndpointId, Known> known_;
};

}  // namespace kvgate::route
