// ReplicaSync: the `cluster:` section of `kvgate serve`: several gateway replicas that
// route as one by sharing their routing events through Redis Streams (docs/replicas.md).
//
// Per pool, one stream PREFIX:routing:POOL. Each replica
//   - records its own decisions and their load deltas in a cluster::Outbox, on the
//     pool's strand, through PoolRuntime's routing hooks (no Redis on the data path);
//   - publishes the batch with one XADD (MAXLEN ~ max_len bounds the stream) under the
//     flush rule (cluster::FlushRule), checked every `flush`: when it holds
//     `flush_batch` requests, or its oldest event would otherwise wait more than
//     `flush_max` (pools with room sharing: at every check); an empty batch once a
//     second as a heartbeat;
//   - reads the peers' batches as they come (XREAD ... BLOCK over every pool's stream from
//     the last id it saw, on a Redis connection of its own; after a reply with entries
//     the next read is sent `poll` after the previous one, so that under traffic they
//     come in one reply per `poll`) and applies them on the pool's strand with cluster::PeerSync:
//     the same Router::commit / on_first_token / on_finished calls as its own requests;
//   - every `snapshot` writes its approximate index (cluster/index_snapshot.h) to
//     PREFIX:snapshot:POOL; at start loads the newest one, then reads the stream from the
//     id it includes (or the tail of `replay`, whichever is later), so it does not route
//     blind even when the stream is trimmed or Redis lost it; /ready waits for that;
//   - after an outage resumes from the last id read; a peer silent for `peer_timeout`
//     has its load released.
// With `sync_mode: cycle` the publishing and the reading above are one cycle instead, on
// one timer: each cycle checks every pool on its strand, then sends the pools' XADDs
// (whatever waits in each Outbox, no flush rule: the cycle is the batching) and one
// non-blocking XREAD of every stream since the last id, pipelined on the one connection:
// one round trip and one wake-up per cycle however many peers publish. Cycles run every
// `flush_max` (`flush` with a room-sharing pool), sooner for a full batch (never within
// `flush` of the last), and while nothing moves the wait doubles up to `cycle_idle_max`;
// an own event snaps it back at once, a peer's at the next cycle that reads one
// (cluster::SyncCycle).
// When Redis is away, each replica routes on its own view: publishing and reading fail
// fast (RedisAsync's timeouts; a failed read is retried every `poll`, in cycle mode at
// the next cycle), are counted, and reading resumes from the last id once Redis answers
// again. stop() closes both
// connections, which ends a blocked read at once. Redis calls run on one executor (a strand, or the
// gateway's one thread); per-pool sync state lives on the pool's strand.
//
// Thread-safety: start/stop/leader_check from the gateway's control thread (before
// traffic); the metrics and status readers, and the leader checks, from any thread.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gateway/common/config.h"
#include "gateway/control/autoscale_loop.h"
#include "gateway/data/pool_runtime.h"

namespace kvgate::gateway {

class PoolWarmup;

class ReplicaSync {
 public:
  // Hooks into every pool and starts the timers on `redis_executor`. `pools` and `clock`
  // (the pools' own: the peers' events are applied in router time; the flush, poll,
  // cycle, snapshot and lease timers run on it, io::ClockTimer) must outlive this object.
  // `warmups` (optional, any order): the pools' warm-ups; with sync on, those enabled
  // share their hot prefixes every `snapshot` and warm new endpoints with the fleet's.
  static std::unique_ptr<ReplicaSync> start(const ClusterConfig& config,
                                            std::vector<PoolRuntime*> pools,
                                            boost::asio::any_io_executor redis_executor,
                                            const Clock& clock,
                                            std::vector<PoolWarmup*> warmups = {});
  ~ReplicaSync();

  // Cancels the timers; call while the executor still runs, or after it stopped for good.
  void stop();

  // One autoscaler actor per pool: the replicas compete for a lease in Redis
  // (PREFIX:leader:POOL = "replica:token", taken with a fencing token from
  // PREFIX:fence:POOL, set with PX and renewed every third of `lease`). The link's
  // may_actuate (for AutoscaleLoop, called on its own thread) is true only while this
  // replica holds the lease, confirmed in Redis with its fencing token right before the
  // actuation, and then records the leader's desired count (PREFIX:desired:POOL); the
  // other replicas read it back at each renewal and export it. A dead leader's lease
  // runs out and another replica takes it.
  LeaderLink leader_link(const std::string& pool);

  // True once every pool's start is done: the newest index snapshot loaded (or none
  // found, or Redis away) and the stream read up to its end. /ready waits for it, so a
  // new replica does not take traffic on an empty index.
  bool started() const;
  const std::string& replica_id() const;
  // Prometheus text of the kvgate_cluster_* metrics (appended to /metrics).
  std::string render_metrics() const;
  // GET /admin/cluster: the replica, Redis's state and per-pool counters, as JSON text.
  std::string status_json() const;

 private:
  struct Impl;
  explicit ReplicaSync(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace kvgate::gateway
