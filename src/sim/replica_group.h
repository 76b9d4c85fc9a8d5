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
// Flow control: each replica has a queue of its own in front of its router (the
// simulator's FlowControllers over router(i)); a request reaches the queue of
// pick_replica(), and what the queue dispatches is committed() here, so its lifecycle and
// routing events are the replica's as a routed request's are. With sync on and
// `fleet_fairness`, each queue orders by the fleet's service (cluster/fleet_fairness.h):
// its reports (service_changed) reach the other replicas after the same lag. With sync
// on, each queue releases only its share of the pool's room (FlowQueueConfig::room_share,
// cluster/fleet_room.h): its demand reports (demand_changed) reach the others after the
// lag too, and the lag is the window in which a replica's own releases are unseen.
//
// Deterministic (a seeded Rng of its own picks the replicas); not thread-safe.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/cluster/fleet_fairness.h"
#include "core/cluster/fleet_room.h"
#include "core/cluster/peer_sync.h"
#include "core/common/rng.h"
#include "core/kv/approx_index.h"
#include "core/route/router.h"

namespace kvgate::sim {

struct ReplicaSyncOptions {
  uint32_t replicas = 1;
  bool sync = true;
  Nanos lag = 0;  // publish -> applied at the peers
  // With sync on and flow control: the replicas' queues share their tenants' service
  // (fleet fairness); off: each orders by its own.
  bool fleet_fairness = true;
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
  route::Router& router(uint32_t replica) { return *replicas_[replica].router; }
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
  // Through the replica's Router, so that its latency predictor (latency_targets on)
  // learns TTFT and, from `output_tokens`, TPOT; without it, the pool's calls alone.
  void on_first_token(route::RequestId id, Nanos now);
  void on_finished(route::RequestId id, Nanos now, uint32_t output_tokens = 0);
  // The latency predictors' errors summed over the replicas (count 0: no predictor).
  route::PredictionError ttft_error() const;
  route::PredictionError tpot_error() const;
  void on_failed(route::RequestId id, Nanos now);

  // Flow control (several replicas; with one, the caller's queue is the single router's
  // and none of these is needed). The replica a request reaches, drawn as route() draws
  // it, after applying what reached the replicas by `now`.
  uint32_t pick_replica(Nanos now);
  // A decision `replica`'s own queue made (FlowController over router(replica)): its
  // lifecycle calls go to that replica, and its peers hear of it (sync on).
  void committed(uint32_t replica, const route::RouteRequest& request, const route::Decision& d,
                 Nanos now);
  // Sync on with fleet_fairness and several replicas: each replica's queue (queues[i],
  // borrowed for the group's lifetime) orders by the fleet's service. Otherwise nothing.
  void enable_fleet_fairness(std::span<route::FlowQueue* const> queues);
  // `from`'s queue served a tenant or corrected a charge: its service report goes out,
  // applied at the others after the lag.
  void service_changed(uint32_t from, Nanos now);
  // Sync on and several replicas: each replica's controller (flows[i], borrowed for the
  // group's lifetime) shares the pool's room with the others' by its room_share (none:
  // nothing changes). Otherwise nothing.
  void enable_room_share(std::span<route::FlowController* const> flows);
  // `from`'s queue changed (a request queued, left or expired): its demand report goes
  // out when its length changed, applied at the others after the lag.
  void demand_changed(uint32_t from, Nanos now);
  // Applies every routing event and service report due by `now`.
  void catch_up(Nanos now) { deliver(now); }

  // Peers' events applied, in all replicas.
  uint64_t applied_events() const;

 private:
  struct Replica {
    std::unique_ptr<kv::ApproxIndex> approx;
    std::unique_ptr<route::Router> router;
    std::unique_ptr<cluster::Outbox> outbox;
    std::unique_ptr<cluster::PeerSync> sync;
    std::unique_ptr<cluster::FleetFairness> fair;  // flow control, fleet fairness
    std::unique_ptr<cluster::FleetRoom> room;      // flow control, sync on: room sharing
  };
  struct InFlight {
    uint32_t replica = 0;
  };
  explicit ReplicaGroup(ReplicaSyncOptions options, uint64_t seed);
  // Publishes what `from` did just now (sync on, several replicas).
  void publish(uint32_t from, Nanos now);
  // Applies every published batch due by `now`.
  void deliver(Nanos now);
  void lifecycle(route::RequestId id, cluster::EventKind kind, Nanos now,
                 uint32_t output_tokens = 0);

  ReplicaSyncOptions options_;
  Rng pick_;
  std::vector<Replica> replicas_;
  std::unordered_map<route::RequestId, InFlight> owner_;
  // A routing batch, a service report (fleet fairness) when `report` is set, or a
  // demand report (room sharing) when `demand` is.
  struct Published {
    Nanos due = 0;
    uint32_t from = 0;
    cluster::EventBatch batch;
    std::optional<cluster::ServiceReport> report;
    std::optional<cluster::DemandReport> demand;
  };
  std::deque<Published> pending_;  // in publishing order = due order (one lag)
  uint64_t applied_ = 0;
};

}  // namespace kvgate::sim
