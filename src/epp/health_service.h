// HealthService: gRPC's health checking protocol (grpc.health.v1.Health, written from the
// spec in proto/grpc/health/v1/health.proto) over a table of service names, each SERVING
// or NOT_SERVING. kvgate serves it itself, not through gRPC's default health service: a
// server of the health service alone (epp.health_port) is then a server with one service
// of ours, and every other method there, the ext_proc one included, is unknown to gRPC,
// which answers UNIMPLEMENTED. (gRPC 1.51's ServerBuilder builds no server without a
// registered service: the default health service is added only when the server starts.)
//
// Check: the name's status, NOT_FOUND for a name not in the table (as gRPC's default).
// Watch: the name's status (SERVICE_UNKNOWN when not in the table), then each change,
// until the client leaves or shutdown().
//
// On gRPC's callback API (the ext_proc service is on the async API, epp_server.cc): its
// calls run on gRPC's callback threads, no thread pool of the server's, and a Watch holds
// no thread while it waits: set() and shutdown() start its writes.
//
// One instance per server: gRPC binds a service to the server it is registered on. It
// must outlive that server's Shutdown (each Watch ends before it returns).
//
//   HealthService health;
//   health.set("liveness", true);
//   builder.RegisterService(&health);
//   ...
//   health.shutdown();   // all NOT_SERVING, watches end; then the server's Shutdown
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include "grpc/health/v1/health.grpc.pb.h"

namespace kvgate::epp {

namespace health_pb = ::grpc::health::v1;

class HealthService final : public health_pb::Health::CallbackService {
 public:
  // `name`'s status: SERVING when `serving`, NOT_SERVING otherwise; a new name joins the
  // table. Ignored after shutdown(). Thread-safe.
  void set(std::string_view name, bool serving);
  // Every name NOT_SERVING from now on (later set()s are ignored); each Watch sends that
  // and ends. Idempotent.
  void shutdown();

  ::grpc::ServerUnaryReactor* Check(::grpc::CallbackServerContext* context,
                                    const health_pb::HealthCheckRequest* request,
                                    health_pb::HealthCheckResponse* response) override;
  ::grpc::ServerWriteReactor<health_pb::HealthCheckResponse>* Watch(
      ::grpc::CallbackServerContext* context,
      const health_pb::HealthCheckRequest* request) override;

 private:
  class Watcher;

  // Under mu_: the name's status as Watch reports it.
  health_pb::HealthCheckResponse::ServingStatus status_of(const std::string& name) const;
  // Under mu_: each watch sends what changed (or ends, after shutdown()).
  void notify_locked();

  mutable std::mutex mu_;
  std::map<std::string, bool, std::less<>> serving_;  // under mu_
  bool shut_down_ = false;                            // under mu_
  std::set<Watcher*> watchers_;                       // under mu_: the watches running
};

}  // namespace kvgate::epp
