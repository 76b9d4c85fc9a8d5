// EppServer: the Endpoint Picker's gRPC listener: Envoy's ExternalProcessor service
// (one Exchange per stream, exchange.h) and the gRPC health service (grpc.health.v1)
// with the names the Endpoint Picker protocol lists: "liveness", "readiness" and
// "envoy.service.ext_proc.v3.ExternalProcessor" (and "", the server as a whole). Over
// TLS when given a certificate (self_signed.h makes one); optionally a second, plaintext
// port with the health service alone, for probes that speak no TLS (the kubelet's): any
// other method there, ext_proc's included, is unknown to gRPC (UNIMPLEMENTED). The health
// service is kvgate's own (health_service.h), not gRPC's default one.
//
// Readiness ("readiness", "" and the ext_proc name) is NOT_SERVING until `ready` says
// so, polled every 100 ms (the gateway's own readiness and discovery's first lists), and
// again from stop() on; "liveness" is SERVING while the server runs (on the main port,
// until its shutdown begins).
//
// Both services are on gRPC's async API, on completion queues of the server's own, each
// polled by one thread of it (`threads`, 1 by default; queue_call.h). Every step of a call
// runs on the thread of the queue that accepted it, and that thread, as it polls, also
// does gRPC's own work (reading and writing the messages) whenever it is the one polling
// when the work is due (with one thread and no health port, always). No callback service
// is registered, so gRPC starts no callback threads of its own. An ext_proc stream reads
// one message, feeds it to its Exchange, and, once the request is whole, starts the pick
// (Picker::start_pick). For the gateway's picker the decision comes back on that same thread,
// before start_pick returns, when the pick waits for nothing (GatewayPicker::start_pick), and the
// responses are written from it; else it comes on one of the gateway's I/O threads, which hands it
// back to the stream's queue (an alarm already due on that queue wakes its thread) and
// touches nothing of gRPC's call. One operation is out per stream at a time (a read, the
// pick, or a write; further responses queue), in the order the messages came, so the
// protocol's exchange is the one a blocking server would have. A stream whose data plane
// leaves has its pick cancelled (Picker::start_pick's cancel).
//
// The health service (health_service.h) runs on the main port's queues beside ext_proc,
// and on the health port's own queue and thread.
//
// Only its .cc and health_service.{h,cc} include gRPC's headers: they are heavy, and
// the message handling (exchange.h) needs none of them.
//
//   auto server = EppServer::start({.address = "0.0.0.0", .port = 0}, picker);
//   uint16_t port = (*server)->port();
//   ...
//   (*server)->stop();   // readiness NOT_SERVING, then streams get a grace to finish
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "core/common/result.h"
#include "epp/exchange.h"
#include "epp/self_signed.h"

namespace kvgate::epp {

struct EppServerOptions {
  std::string address = "0.0.0.0";
  uint16_t port = 9002;  // 0: an ephemeral port (port())
  // A request body longer than this is refused (413), as serve's limits.max_body_bytes.
  size_t max_body_bytes = 8u << 20;
  // stop(): how long streams in flight may go on before they are cancelled.
  std::chrono::milliseconds grace{30'000};
  // x-gateway-inference-objective's names and their priorities (request_class.h).
  std::map<std::string, int, std::less<>> objectives;
  // Distinct x-gateway-inference-fairness-id values kept as tenants.
  size_t max_fairness_ids = 1000;
  // Fallbacks after the pick in x-gateway-destination-endpoint (0..4).
  uint8_t fallbacks = 0;
  // TLS on `port`: the certificate chain and key (PEM); nullopt: plaintext.
  std::optional<PemPair> tls;
  // A plaintext port with the health service alone (0: ephemeral, health_port());
  // nullopt: none, the health service is on `port` only.
  std::optional<uint16_t> health_port;
  // Whether the picker is ready (readiness SERVING), polled from a thread of the server's
  // own; it must be cheap and thread-safe. Null: ready from the start.
  std::function<bool()> ready;
  // The main port's threads (1..64; below 1 counts as 1): each polls a completion queue
  // of its own and runs the calls it accepted (ext_proc streams, health checks), each
  // call on that thread alone. The health port has one more thread.
  uint32_t threads = 1;
};

class EppServer {
 public:
  // Binds and serves: ext_proc and health on `threads` threads of the server's own (and
  // one more for the health port).
  // `picker` must outlive the server; its start_pick is called from the server's threads
  // and must not block (its `decided` may run on any thread). Errors: an address cannot be
  // bound (or the TLS pair is refused).
  static Result<std::unique_ptr<EppServer>> start(const EppServerOptions& options, Picker& picker);
  ~EppServer();  // stop()
  EppServer(const EppServer&) = delete;
  EppServer& operator=(const EppServer&) = delete;

  uint16_t port() const;
  // The health port's bound port; nullopt without one.
  std::optional<uint16_t> health_port() const;
  // Readiness ("readiness", "" and the ext_proc service's name) on every port:
  // NOT_SERVING while false. The `ready` poller (options) calls it on each change.
  void set_ready(bool ready);
  // Readiness NOT_SERVING, no new streams, streams in flight up to `grace` (then
  // cancelled: a pick under way is cancelled and still answered, as the data plane left).
  // Returns when every stream has ended. Idempotent.
  void stop();

  struct Impl;

 private:
  explicit EppServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvgate::epp
