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
// until the client leaves or shutdown(). One write is out per Watch: the changes made
// meanwhile are coalesced, the latest status goes next.
//
// On gRPC's async API, as the ext_proc service (epp_server.cc): its calls run on the
// completion queues it is served on (serve_on), each polled by a thread of the EPP's
// (queue_call.h), so no callback service is registered and gRPC starts no callback
// threads. A Watch holds no thread while it waits: set() and shutdown(), on their own
// threads, wake its queue's thread with an alarm already due on that queue, and the
// writes start there.
//
// One instance per server: gRPC binds a service to the server it is registered on. It
// must outlive that server and the calls on its queues (QueueCalls::wait_none()).
//
//   HealthService health;
//   health.set("liveness", true);
//   builder.RegisterService(&health);
//   auto cq = builder.AddCompletionQueue();
//   ... BuildAndStart; then on the queue's thread, before it polls:
//   health.serve_on(cq.get(), calls);
//   ...
//   health.shutdown();   // all NOT_SERVING, watches end; then the server's Shutdown
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include "epp/queue_call.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace kvgate::epp {

namespace health_pb = ::grpc::health::v1;

class HealthService final : public health_pb::Health::AsyncService {
 public:
  // `name`'s status: SERVING when `serving`, NOT_SERVING otherwise; a new name joins the
  // table. Ignored after shutdown(). Thread-safe.
  void set(std::string_view name, bool serving);
  // Every name NOT_SERVING from now on (later set()s are ignored); each Watch sends that
  // and ends. Idempotent. Thread-safe.
  void shutdown();

  // One Check and one Watch wait for a call on `cq`, a queue of the server this service
  // is registered on (after it started), each replaced by a new one when it gets its
  // call, as long as `calls` admits them (QueueCalls::admit). Their tags are CallTags,
  // for the queue's loop (queue_call.h); on the queue's thread.
  void serve_on(::grpc::ServerCompletionQueue* cq, QueueCalls& calls);

 private:
  class CheckCall;
  class WatchCall;

  // Under mu_: the name's status as Watch reports it.
  health_pb::HealthCheckResponse::ServingStatus status_of(const std::string& name) const;
  // Under mu_: each watch is woken on its queue's thread to send what changed (or end,
  // after shutdown()).
  void notify_locked();
  // A new call of each kind waiting on `cq`, when `calls` admits it.
  void await_check(::grpc::ServerCompletionQueue* cq, QueueCalls& calls);
  void await_watch(::grpc::ServerCompletionQueue* cq, QueueCalls& calls);

  mutable std::mutex mu_;
  std::map<std::string, bool, std::less<>> serving_;  // under mu_
  bool shut_down_ = false;                            // under mu_
  std::set<WatchCall*> watches_;                      // under mu_: the watches accepted
};

}  // namespace kvgate::epp
