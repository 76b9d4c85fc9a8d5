// ReplicaGroup: N gateway replicas in front of one simulated fleet.
//
// Each replica has router objects of its own (Router, EndpointPool, ApproxIndex), as
// separate `kvgate serve` processes do; the precise index, fed by the engines' KV events
// that every replica subscribes to, is shared (the replicas would hold the same one).
// Every request goes to a replica drawn at random (a Kubernetes Service spreads clients
// so), and its lifecycle calls go to that replica's pool. With sync on, each replica's
// routing events (cluster::Outbox) reach the others through cluster::PeerSync after
// `lag`, applied before any later decision; with sync off, each routes on its own
// history alone. One replica (or sync on with lag 0 and one replica) is exactly the
// single router of before: the same calls in the same order.
//
// Control-plane calls (endpoints joining and leaving, health, scrapes) go to every
// replica, so endpoint ids agree across replicas (they are added in the same order).
//
// Deterministic (a seeded Rng of its own picks the replicas); not thread-safe.
#pragma once

#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/cluster/peer_sync.h"
#include "core/common/rng.h"
#include "core/kv/approx_index.h"
#include "core/route/router.h"

namespace kvgate::sim {

struct ReplicaSyncOptions {
  uint32_t replicas = 1;
  bool sync = true;
  Nanos lag = 0;  // publish -> applied at the peers
};

class ReplicaGroup {
 public:
  // REQUIRES: options.replicas >= 1. `precise` (may be null) is shared by all replicas;
  // each gets an ApproxIndex of `approx` options when `want_approx`.
  static Result<std::unique_ptr<ReplicaGroup>> create(const route::RouterConfig& config,
                                                      kv::PreciseIndex* precise, bool want_approx,
                                                      const kv::ApproxIndex::Options& approx,
                                                      ReplicaSyncOptions options, uint64_t seed);

  // Replica 0's router: the view the simulator's autoscaler and reports read.
  route::Router& primary() { return *replicas_.front().router; }
  size_t size() const { return replicas_.size(); }

  // Control plane, on every replica. add_endpoint errors when the replicas disagree on
  // the id.
  Result<route::EndpointId> add_endpoint(const route::EndpointSpec& spec, Nanos now);
  void remove_endpoint(route::EndpointId id);
  void set_health(route::EndpointId id, route::Health health);
  void on_metrics(route::EndpointId id, const route::ScrapedMetrics& metrics, Nanos now);
  // LoRA placement's view of the endpoint (EndpointPool::set_lora_placed).
  void set_lora_placed(route::EndpointId id, const route::LoraPlaced& placed);

  // Data plane: a replica at random routes the request (after applying what reached it
  // by `now`); the lifecycle calls go to that replica.
  route::Decision route(const route::RouteRequest& request, Nanos now, Rng& rng);
  void on_first_token(route::RequestId id, Nanos now);
  void on_finished(route::RequestId id, Nanos now);
  void on_failed(route::RequestId id, Nanos now);

  // Peers' events applied, in all replicas.
  uint64_t applied_events() const;

 private:
  struct Replica {
    std::unique_ptr<kv::ApproxIndex> approx;
    std::unique_ptr<route::Router> router;
    std::unique_ptr<cluster::Outbox> outbox;
    std::unique_ptr<cluster::PeerSync> sync;
  };
  struct InFlight {
    uint32_t replica = 0;
  };
  explicit ReplicaGroup(ReplicaSyncOptions options, uint64_t seed);
  // Publishes what `from` did just now (sync on, several replicas).
  void publish(uint32_t from, Nanos now);
  // Applies every published batch due by `now`.
  void deliver(Nanos now);
  void lifecycle(route::RequestId id, cluster::EventKind kind, Nanos now);

  ReplicaSyncOptions options_;
  Rng pick_;
  std::vector<Replica> replicas_;
  std::unordered_map<route::RequestId, InFlight> owner_;
  struct Published {
    Nanos due = 0;
    uint32_t from = 0;
    cluster::EventBatch batch;
  };
  std::deque<Published> pending_;  // in publishing order = due order (one lag)
  uint64_t applied_ = 0;
};

}  // namespace kvgate::sim
