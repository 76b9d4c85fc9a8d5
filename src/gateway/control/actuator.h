// Actuator: what acts on a pool's autoscaling decisions inside `kvgate serve`: it reports
// the pool's replicas to the autoscaler and carries out its decisions on them. The
// interface; make_actuator() builds the implementation of the pool's ActuatorKind
// (`actuator.kind`, autoscale_config.h), each private to actuator.cc:
//
//   local       LocalActuator: an io::LocalReplicaSet launches replicas from the command
//               template; a replica whose /health answers is registered with the router
//               (PoolRuntime::add_endpoint_sync); one picked for scale-down is drained
//               through the router (remove_endpoint_sync: no new requests, wait for those
//               in flight), then stopped; one that crashes is deregistered and replaced.
//   kubernetes  KubernetesActuator: sets spec.replicas through an io::KubeScaleClient;
//               the replicas are counted from the scale subresource (spec and
//               status.replicas), the endpoints come from the config. Kubernetes picks
//               the pods it removes.
//   none        ExportOnlyActuator: nothing is launched: the pool's endpoints are its
//               replicas, and the decision is only exported (KEDA or an HPA scales on
//               kvgate_autoscaler_desired_replicas); replicas asked for and not yet
//               among the endpoints are reported starting, then ready after the
//               expected startup time, as the core's contract requires.
//
// Thread-safety: none; the AutoscaleLoop's thread owns it. poll() and apply() may block
// (health probes, process stops, Kubernetes API calls, router registration).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "core/common/result.h"
#include "core/route/pool_signals.h"
#include "core/scale/autoscaler.h"
#include "core/scale/signals.h"
#include "gateway/common/autoscale_config.h"

namespace kvgate::gateway {

class PoolRuntime;

class Actuator {
 public:
  virtual ~Actuator() = default;
  // Catches up before a decision: health checks, drains, crashes; reads the cluster.
  virtual void poll() = 0;
  // The replicas, times in the autoscaler's clock. `endpoints` is the router's view
  // (for requests in flight, and for kind none, the replicas themselves).
  virtual std::vector<scale::ReplicaSignal> replicas(
      std::span<const route::EndpointView> endpoints) = 0;
  virtual void apply(const scale::Decision& decision) = 0;
  // Replicas that exited on their own and were replaced.
  virtual uint64_t restarts() const { return 0; }
};

struct ActuatorContext {
  PoolRuntime& pool;
  // The autoscaler's clock, and its offset from router time (the pool's clock().now()).
  std::function<Nanos()> now;
  Nanos clock_offset = 0;
};

// Errors: a kubernetes actuator outside a pod without api_server; an empty command.
Result<std::unique_ptr<Actuator>> make_actuator(const PoolAutoscaleConfig& config,
                                                ActuatorContext context);

}  // namespace kvgate::gateway
