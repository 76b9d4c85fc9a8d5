#include "sim/replica_group.h"

#include <fmt/format.h>

namespace kvgate::sim {

ReplicaGroup::ReplicaGroup(ReplicaSyncOptions options, uint64_t seed)
    : options_(options), pick_(seed ^ 0x7265706c6963ULL) {}

Result<std::unique_ptr<ReplicaGroup>> ReplicaGroup::create(
    const route::RouterConfig& config, kv::PreciseIndex* precise, bool want_approx,
    const kv::ApproxIndex::Options& approx, ReplicaSyncOptions options, uint64_t seed) {
  if (options.replicas < 1) return Error("replicas must be at least 1");
  std::unique_ptr<ReplicaGroup> g(new ReplicaGroup(options, seed));
  for (uint32_t i = 0; i < options.replicas; ++i) {
    Replica r;
    if (want_approx) r.approx = std::make_unique<kv::ApproxIndex>(approx);
    auto router = route::Router::create(config, {.precise = precise, .approx = r.approx.get()});
    if (!router) return Error(router.error());
    r.router = std::move(*router);
    const std::string name = fmt::format("replica-{}", i);
    r.outbox = std::make_unique<cluster::Outbox>(name, "sim");
    // No replica dies in a simulation: peers are never timed out.
    r.sync = std::make_unique<cluster::PeerSync>(
        *r.router, name,
        cluster::PeerSync::Options{.peer_timeout = INT64_MAX / 2,
                                   .max_request_age = INT64_MAX / 2});
    g->replicas_.push_back(std::move(r));
  }
  return g;
}

Result<route::EndpointId> ReplicaGroup::add_endpoint(const route::EndpointSpec& spec, Nanos now) {
  std::optional<route::EndpointId> id;
  for (Replica& r : replicas_) {
    auto got = r.router->add_endpoint(spec, now);
    if (!got) return Error(got.error());
    if (id && *id != *got) return Error("replicas numbered an endpoint differently");
    id = *got;
  }
  return *id;
}

void ReplicaGroup::remove_endpoint(route::EndpointId id) {
  for (Replica& r : replicas_) r.router->remove_endpoint(id);
}

void ReplicaGroup::set_health(route::EndpointId id, route::Health health) {
  for (Replica& r : replicas_) r.router->pool().set_health(id, health);
}

void ReplicaGroup::set_lora_placed(route::EndpointId id, const route::LoraPlaced& placed) {
  for (Replica& r : replicas_) r.router->pool().set_lora_placed(id, placed);
}

void ReplicaGroup::on_metrics(route::EndpointId id, const route::ScrapedMetrics& metrics,
                              Nanos now) {
  deliver(now);  // the scrape's baseline is the load each replica knows by now
  for (Replica& r : replicas_) r.router->pool().on_metrics(id, metrics, now);
}

route::Decision ReplicaGroup::route(const route::RouteRequest& request, Nanos now, Rng& rng) {
  if (replicas_.size() == 1) return replicas_[0].router->route(request, now, rng);
  deliver(now);
  const auto i = static_cast<uint32_t>(pick_.below(replicas_.size()));
  const route::Decision d = replicas_[i].router->route(request, now, rng);
  if (!d.accepted()) return d;
  committed(i, request, d, now);
  return d;
}

uint32_t ReplicaGroup::pick_replica(Nanos now) {
  if (replicas_.size() == 1) return 0;
  deliver(now);
  return static_cast<uint32_t>(pick_.below(replicas_.size()));
}

void ReplicaGroup::committed(uint32_t replica, const route::RouteRequest& request,
                             const route::Decision& d, Nanos now) {
  if (replicas_.size() == 1 || !d.accepted()) return;
  owner_[request.id] = {replica};
  if (!options_.sync) return;
  Replica& r = replicas_[replica];
  const route::Endpoint* ep = r.router->pool().get(d.endpoint);
  const route::Endpoint* pre =
      d.prefill_endpoint ? r.router->pool().get(*d.prefill_endpoint) : nullptr;
  r.outbox->routed(request, d, ep ? ep->spec.url : "", pre ? pre->spec.url : "", now);
  publish(replica, now);
}

void ReplicaGroup::enable_fleet_fairness(std::span<route::FlowQueue* const> queues) {
  if (replicas_.size() == 1 || !options_.sync || !options_.fleet_fairness) return;
  for (uint32_t i = 0; i < replicas_.size() && i < queues.size(); ++i) {
    // No replica dies in a simulation: peers are never timed out.
    replicas_[i].fair = std::make_unique<cluster::FleetFairness>(
        *queues[i], fmt::format("replica-{}", i), "sim",
        cluster::FleetFairness::Options{.peer_timeout = INT64_MAX / 2});
  }
}

void ReplicaGroup::service_changed(uint32_t from, Nanos now) {
  if (!replicas_[from].fair) return;
  std::optional<cluster::ServiceReport> r = replicas_[from].fair->take();
  if (!r) return;
  pending_.push_back(
      {now + options_.lag, from, cluster::EventBatch{}, std::move(*r), std::nullopt});
  if (options_.lag == 0) deliver(now);
}

void ReplicaGroup::enable_room_share(std::span<route::FlowController* const> flows) {
  if (replicas_.size() == 1 || !options_.sync) return;
  for (uint32_t i = 0; i < replicas_.size() && i < flows.size(); ++i) {
    // The lag is how long a release stays unseen by the peers. No replica dies: peers
    // are never timed out.
    replicas_[i].room = std::make_unique<cluster::FleetRoom>(
        *flows[i], fmt::format("replica-{}", i), "sim",
        cluster::FleetRoom::Options{.peer_timeout = INT64_MAX / 2, .window = options_.lag});
  }
}

void ReplicaGroup::demand_changed(uint32_t from, Nanos now) {
  if (!replicas_[from].room) return;
  std::optional<cluster::DemandReport> r = replicas_[from].room->take();
  if (!r) return;
  pending_.push_back(
      {now + options_.lag, from, cluster::EventBatch{}, std::nullopt, std::move(*r)});
  if (options_.lag == 0) deliver(now);
}

void ReplicaGroup::lifecycle(route::RequestId id, cluster::EventKind kind, Nanos now,
                             uint32_t output_tokens) {
  // Router::on_first_token / on_finished are the pool's calls plus the latency
  // predictor's learning (nothing more without latency_targets).
  if (replicas_.size() == 1) {
    route::Router& router = *replicas_[0].router;
    if (kind == cluster::EventKind::kPrefillDone) router.on_first_token(id, now);
    if (kind == cluster::EventKind::kFinished) router.on_finished(id, now, output_tokens);
    if (kind == cluster::EventKind::kFailed) router.pool().on_failed(id, now);
    return;
  }
  auto it = owner_.find(id);
  if (it == owner_.end()) return;
  const uint32_t i = it->second.replica;
  route::Router& router = *replicas_[i].router;
  if (kind == cluster::EventKind::kPrefillDone) {
    router.on_first_token(id, now);
  } else {
    if (kind == cluster::EventKind::kFinished) router.on_finished(id, now, output_tokens);
    if (kind == cluster::EventKind::kFailed) router.pool().on_failed(id, now);
    owner_.erase(it);
  }
  if (options_.sync) {
    replicas_[i].outbox->load(kind, id, now);
    publish(i, now);
  }
}

void ReplicaGroup::on_first_token(route::RequestId id, Nanos now) {
  lifecycle(id, cluster::EventKind::kPrefillDone, now);
}
void ReplicaGroup::on_finished(route::RequestId id, Nanos now, uint32_t output_tokens) {
  lifecycle(id, cluster::EventKind::kFinished, now, output_tokens);
}

namespace {
route::PredictionError sum_errors(const route::PredictionError& a,
                                  const route::PredictionError& b) {
  return {.count = a.count + b.count, .sum_ape = a.sum_ape + b.sum_ape};
}
}  // namespace

route::PredictionError ReplicaGroup::ttft_error() const {
  route::PredictionError sum;
  for (const Replica& r : replicas_) {
    if (const route::LatencyPredictor* p = r.router->predictor())
      sum = sum_errors(sum, p->ttft_error());
  }
  return sum;
}

route::PredictionError ReplicaGroup::tpot_error() const {
  route::PredictionError sum;
  for (const Replica& r : replicas_) {
    if (const route::LatencyPredictor* p = r.router->predictor())
      sum = sum_errors(sum, p->tpot_error());
  }
  return sum;
}
void ReplicaGroup::on_failed(route::RequestId id, Nanos now) {
  lifecycle(id, cluster::EventKind::kFailed, now);
}

void ReplicaGroup::publish(uint32_t from, Nanos now) {
  std::optional<cluster::EventBatch> b = replicas_[from].outbox->take(now);
  if (!b) return;
  pending_.push_back({now + options_.lag, from, std::move(*b), std::nullopt, std::nullopt});
  if (options_.lag == 0) deliver(now);
}

void ReplicaGroup::deliver(Nanos now) {
  while (!pending_.empty() && pending_.front().due <= now) {
    const Published& p = pending_.front();
    for (uint32_t i = 0; i < replicas_.size(); ++i) {
      if (i == p.from) continue;
      if (p.report) {
        if (replicas_[i].fair) replicas_[i].fair->apply(*p.report, now);
        continue;
      }
      if (p.demand) {
        if (replicas_[i].room) replicas_[i].room->apply(*p.demand, now);
        continue;
      }
      replicas_[i].sync->apply(p.batch, now);
      applied_ += p.batch.events.size();
    }
    pending_.pop_front();
  }
}

uint64_t ReplicaGroup::applied_events() const { return applied_; }

}  // namespace kvgate::sim
