// LocalReplicaSet: a pool's replicas run as local processes, sized and drained by the
// autoscaler's decisions: what `kvgate serve`'s actuator of kind local acts on, as the
// kind kubernetes one acts on a Deployment.
//
// Each replica is launched from a command template (argv; "{port}" and "{id}" in any
// argument are replaced), e.g. {"kvgate", "engine", "--port", "{port}"} or
// {"vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--port", "{port}"}, on a free loopback
// port. The set then
//   - polls http://host:port/health until it answers 200 and reports the replica ready
//     through `on_change` (the gateway's admin API registers the endpoint there);
//   - on a Decision, launches desired - (current - drained) replicas and drains the
//     listed ones: on_change(kDraining) first (the router stops sending), then it waits
//     until `in_flight(id)` says the router holds nothing on it (or drain_timeout), and
//     stops the process (SIGTERM, then SIGKILL after stop_grace), on_change(kRemoved);
//   - notices a replica whose process exited on its own, reports it removed, and starts
//     a new one in its place (restart_crashed), so the pool keeps the size asked for;
//   - gives up on a replica that is not healthy within startup_timeout (stops it and
//     launches another).
// Processes go through io::Subprocess (own process group, SIGTERM/SIGKILL, reaped,
// killed if kvgate dies).
//
//   LocalReplicaSet a({.command = {"kvgate", "engine", "--port", "{port}"},
//                      .on_change = [&](const ReplicaChange& c) { admin.apply(c); }});
//   every control interval: a.poll(); d = autoscaler.decide(signals_with(a.replicas()), now);
//                           a.apply(d);
//
// Thread-safety: none; one owner thread calls apply/poll/replicas. poll() blocks for at
// most one health probe timeout per starting replica.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/common/result.h"
#include "core/common/time.h"
#include "core/scale/autoscaler.h"
#include "core/scale/signals.h"

namespace kvgate::io {

class Subprocess;

struct ReplicaChange {
  enum class Kind { kReady, kDraining, kRemoved };
  Kind kind;
  std::string id;        // "replica-N"
  std::string url;       // "http://127.0.0.1:PORT"
  bool crashed = false;  // kRemoved: the process exited without being asked to
};

struct LocalReplicaSetOptions {
  std::vector<std::string> command;  // argv template
  std::string host = "127.0.0.1";
  std::string health_path = "/health";
  std::chrono::milliseconds probe_timeout{300};
  std::chrono::milliseconds startup_timeout{std::chrono::minutes(15)};
  std::chrono::milliseconds drain_timeout{std::chrono::minutes(2)};
  std::chrono::milliseconds stop_grace{std::chrono::seconds(10)};
  bool restart_crashed = true;
  // Register / deregister with the router. Called on the owner thread.
  std::function<void(const ReplicaChange&)> on_change;
  // Requests the router still has on a draining replica; null: none (stop at once).
  std::function<uint32_t(const std::string& id)> in_flight;
  // Each replica's output lines (tagged with its id); null: discarded.
  std::function<void(const std::string& id, const std::string& line)> on_output;
  // The clock for ReplicaSignal times and the startup and drain timeouts (the gateway passes its
  // autoscaler's: the pool's clock anchored to the Unix epoch); null: the real clock's
  // now() (env::system_clock()).
  std::function<Nanos()> now;
};

class LocalReplicaSet {
 public:
  // Errors: an empty command.
  static Result<std::unique_ptr<LocalReplicaSet>> make(LocalReplicaSetOptions options);
  ~LocalReplicaSet();  // stops every process (SIGTERM, then SIGKILL)
  LocalReplicaSet(const LocalReplicaSet&) = delete;
  LocalReplicaSet& operator=(const LocalReplicaSet&) = delete;

  // Carries out a decision (launches now; drains progress in poll()). Returns the first
  // launch error, if any (the other launches are still attempted).
  Status apply(const scale::Decision& decision);
  // Launches `n` replicas (a pool's first replicas, before any decision).
  Status launch(int32_t n);
  // Health checks for starting replicas, drains, crash detection and restarts.
  void poll();

  // The replicas for the autoscaler's signals (in_flight from the callback).
  std::vector<scale::ReplicaSignal> replicas() const;
  size_t ready() const;
  size_t size() const { return replicas_.size(); }
  uint64_t restarts() const { return restarts_; }
  // The replica's process id (its process group leader); -1 when unknown.
  int pid(const std::string& id) const;

 private:
  struct Replica;
  explicit LocalReplicaSet(LocalReplicaSetOptions options);
  Status launch_one();
  void stop_replica(Replica& r);
  Nanos now() const;

  LocalReplicaSetOptions options_;
  std::vector<std::unique_ptr<Replica>> replicas_;
  uint64_t next_id_ = 0;
  uint64_t restarts_ = 0;
};

// A free TCP port on 127.0.0.1 (bound to port 0, then released).
Result<uint16_t> pick_free_port();

}  // namespace kvgate::io
