#include "gateway/sync/replica_sync.h"

#include <fmt/format.h>
#include <hiredis.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/json.hpp>
#include <charconv>
#include <chrono>
#include <future>
#include <limits>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "core/cluster/fleet_fairness.h"
#include "core/cluster/fleet_room.h"
#include "core/cluster/hot_prefix_share.h"
#include "core/cluster/index_snapshot.h"
#include "core/cluster/peer_sync.h"
#include "core/cluster/sync_cycle.h"
#include "core/metrics/prometheus_text.h"
#include "gateway/control/warmup.h"
#include "gateway/data/pool_flow.h"
#include "io/clock_timer.h"
#include "io/redis_async.h"

namespace kvgate::gateway {
namespace asio = boost::asio;

namespace {

constexpr Nanos kHeartbeat = kSecond;
constexpr size_t kReadCount = 256;  // stream entries per stream and XREAD
// A caught-up read waits this long in Redis for a peer's entry (XREAD ... BLOCK); then an
// empty reply comes and it is sent again. With peers, their heartbeats come sooner.
constexpr Nanos kReadBlock = kSecond;
// A failed read is sent again after `poll`, and never sooner than this.
constexpr Nanos kReadRetry = 5 * kMillisecond;
// Deferred replies: a cycle whose replies were not all back when looked at is looked at
// again this much later (a slow Redis; the connection's deadline ends the wait).
constexpr Nanos kDeferredRetry = 2 * kMillisecond;
// Room sharing's window beyond flush + poll: Redis's round trips (the XADD, then the
// blocked or paced read's reply) and the hop onto the peer's strand
// (docs/flow-control.md, "Sharing the room").
constexpr Nanos kRoomMargin = 2 * kMillisecond;

std::string default_replica_id() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return fmt::format("{}-{}", host[0] ? host : "kvgate", ::getpid());
}

Nanos to_nanos(std::chrono::milliseconds ms) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(ms).count();
}

// One pool's stream entry, encoded on its strand (Impl::flush) and sent on the Redis
// executor (Impl::publish).
struct Outgoing {
  size_t events = 0;
  std::string wire;           // the routing batch (field "b"); empty: none
  std::string sessions_wire;  // its session bindings (field "s"); empty: none
  std::string fair_wire;      // the service report (field "f"); empty: none
  std::string room_wire;      // the demand report (field "q"); empty: none
  bool moved = false;         // it carries an event or a report, not a heartbeat alone
};

// What one XREAD reply brought (Impl::take_reply).
struct ReadOutcome {
  bool ok = false;     // Redis answered
  bool any = false;    // some stream had new entries (own ones or heartbeats included)
  bool moved = false;  // a peer's event or report came (not a heartbeat alone)
  bool full = false;   // a stream's page was full: more may be waiting
};

// One pool's sync state. The Outbox and PeerSync live on the pool's strand; the stream
// position on the Redis executor; the counters are read from anywhere.
struct PoolSync {
  PoolRuntime* pool = nullptr;
  size_t index = 0;  // in Impl::pools
  std::string stream;
  // On the pool's strand.
  std::unique_ptr<cluster::Outbox> outbox;
  std::unique_ptr<cluster::PeerSync> peers;
  Nanos last_heartbeat = 0;
  Nanos last_sent = 0;  // when this pool's last entry went out (the strand's clock)
  // When the Outbox goes out (set before the timers start): the config's flush rule, or,
  // with room sharing, every check (its window is one flush_ms, not flush_max_ms).
  cluster::FlushRule flush_rule;
  // Set before the timers start: the pool's reports (fleet fairness, room sharing) change
  // between events, so its checks run every `flush`; else a check runs only when the
  // Outbox is due (Outbox::due_at) or a heartbeat is.
  bool periodic = false;
  // On the Redis executor.
  std::string last_id;
  bool publish_in_flight = false;
  // Counters.
  std::atomic<uint64_t> batches_published{0}, events_published{0}, publish_failures{0};
  std::atomic<uint64_t> batches_applied{0}, events_applied{0}, read_failures{0};
  std::atomic<uint64_t> decode_errors{0}, gaps{0}, expired_requests{0}, dead_replicas{0};
  std::atomic<uint64_t> unknown_endpoint{0};
  std::atomic<uint64_t> peer_requests{0}, live_peers{0};
  // Index snapshots (cluster/index_snapshot.h): PREFIX:snapshot:POOL.
  std::string snapshot_key;
  bool snapshot_in_flight = false;  // the Redis executor only
  std::atomic<uint64_t> snapshots_written{0}, snapshot_failures{0}, snapshots_loaded{0};
  std::atomic<uint64_t> snapshot_pairs_restored{0};
  std::atomic<bool> started{false};  // the start's snapshot read and first tail read are done
  // Hot prefixes (cluster/hot_prefix_share.h): PREFIX:hot:POOL, a field per replica.
  std::string hot_key;
  PoolWarmup* warmup = nullptr;  // set before the timers start; null: not shared
  size_t hot_k = 16;
  bool hot_in_flight = false;  // the Redis executor only
  std::mutex hot_mu;
  std::vector<std::vector<kv::HotPrefix>> peer_hot;  // guarded by hot_mu
  std::atomic<uint64_t> hot_published{0}, hot_peer_lists{0};
  // Fleet fairness (cluster/fleet_fairness.h): pools with flow control, sync on and
  // `fleet_fairness` on. Service reports travel in the routing stream's entries, field
  // "f" beside the batch's "b" (readers that do not know it skip it).
  bool fair_enabled = false;                     // set before the timers start
  std::unique_ptr<cluster::FleetFairness> fair;  // on the pool's strand
  std::atomic<uint64_t> fair_peers{0}, fair_fallbacks{0}, fair_published{0}, fair_applied{0};
  std::atomic<uint64_t> fair_gaps{0};
  // Room sharing (cluster/fleet_room.h): pools with flow control, sync on and a
  // room_share other than none. Demand reports travel in field "q" of the same entries.
  bool room_enabled = false;                 // set before the timers start
  std::unique_ptr<cluster::FleetRoom> room;  // on the pool's strand
  std::atomic<uint64_t> room_peers{0}, room_fallbacks{0}, room_published{0}, room_applied{0};
  std::atomic<uint64_t> room_holds{0};
};

// A stream id "ms-seq" as its millisecond part (0 when malformed).
int64_t stream_millis(std::string_view id) {
  int64_t ms = 0;
  std::from_chars(id.data(), id.data() + id.size(), ms);
  return ms;
}

// Takes the lease when free (with a new fencing token) or renews it when held by
// ARGV[1]; returns {the holder's token, 0 when another replica holds it; the leader's
// latest desired count (KEYS[3]), -1 when none is recorded}.
constexpr std::string_view kLeaseScript =
    "local desired = tonumber(redis.call('GET', KEYS[3]) or '-1') or -1 "
    "local cur = redis.call('GET', KEYS[1]) "
    "if cur then "
    "  local holder, token = string.match(cur, '^(.*):(%d+)$') "
    "  if holder == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) "
    "    return {tonumber(token), desired} end "
    "  return {0, desired} "
    "end "
    "local token = redis.call('INCR', KEYS[2]) "
    "redis.call('SET', KEYS[1], ARGV[1] .. ':' .. token, 'PX', ARGV[2]) "
    "return {token, desired}";
// 1 when KEYS[1] still holds ARGV[1] ("replica:token"), and then the leader's desired
// count ARGV[2] is recorded in KEYS[2] for the other replicas (expiring with the lease,
// ARGV[3] ms); else 0.
constexpr std::string_view kFenceScript =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then "
    "  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3]) return 1 end "
    "return 0";

// A pool's leader lease. Written on the Redis executor, read from anywhere.
struct Lease {
  const Clock* clock = nullptr;  // the gateway's (set at creation)
  std::string pool, key, fence_key, desired_key;
  std::atomic<bool> held{false};
  std::atomic<int32_t> leader_desired{-1};  // the leader's count as last read; -1: none
  std::atomic<uint64_t> token{0};
  std::atomic<Nanos> valid_until{0};  // clock time the lease surely lasts to
  bool in_flight = false;             // the Redis executor only
  std::atomic<uint64_t> acquisitions{0}, losses{0}, actuations{0}, refusals{0};

  bool valid() const { return held && clock->now() < valid_until; }
};

}  // namespace

struct ReplicaSync::Impl : std::enable_shared_from_this<Impl> {
  Impl(const ClusterConfig& c, asio::any_io_executor ex, const Clock& clk)
      : config(c),
        id(c.replica_id.empty() ? default_replica_id() : c.replica_id),
        cycle_mode(c.sync_mode == ClusterConfig::SyncMode::kCycle),
        clock(clk),
        executor(ex),
        redis(ex, {.host = c.redis.host,
                   .port = c.redis.port,
                   .password = c.redis.password,
                   .connect_timeout = to_nanos(c.redis.timeout),
                   .command_timeout = to_nanos(c.redis.timeout),
                   .clock = &clk}),
        // A blocked read holds its connection for kReadBlock, or longer: Redis before 6
        // checks a blocked client's timeout about once a second. Its deadline allows twice
        // that plus the usual timeout (a paused Redis is seen sooner on `redis`). On the
        // OS's clock: Redis measures the BLOCK so, and a test's ManualClock jumping ahead
        // must not take a blocked read for a dead Redis.
        reader(ex, {.host = c.redis.host,
                    .port = c.redis.port,
                    .password = c.redis.password,
                    .connect_timeout = to_nanos(c.redis.timeout),
                    .command_timeout = 2 * kReadBlock + to_nanos(c.redis.timeout)}),
        flush_timer(ex, clk),
        read_timer(ex, clk) {}

  const ClusterConfig config;
  const std::string id;
  // `sync_mode: cycle`: one timer; each cycle pipelines the pools' XADDs and one
  // non-blocking XREAD on `redis` (cycle()); `reader` and the flush timer stay unused.
  const bool cycle_mode;
  // The gateway's: router times (on the pools' strands, the same clock as the pools'),
  // lease validity, and wall time to compare with Redis's stream ids (milliseconds since
  // the epoch on the Redis host).
  const Clock& clock;
  asio::any_io_executor executor;
  io::RedisAsync redis;  // used on `executor` only
  // The peers' entries are read on a connection of their own: an XREAD ... BLOCK holds
  // its connection until a peer publishes, and Redis answers nothing else sent on it
  // meanwhile. Publishing, snapshots, leases and the rest stay on `redis`.
  io::RedisAsync reader;  // used on `executor` only
  // The sync's periods and the lease's renewals run on `clock`, as the times they are
  // compared with do (heartbeats, peer timeouts, lease validity): a ManualClock moves
  // them together. Redis's own timeouts stay on the OS's clock (io/redis_async.h).
  io::ClockTimer flush_timer;
  Nanos flush_at = -1;        // on `executor`: when flush_timer fires next; -1: not armed
  bool periodic = false;      // some pool's checks run every `flush` (PoolSync::periodic)
  io::ClockTimer read_timer;  // the pause before the next read (`poll`, or after a failure)
  io::ClockTimer snapshot_timer{executor, clock};
  std::vector<std::shared_ptr<PoolSync>> pools;
  std::vector<std::shared_ptr<Lease>> leases;  // set before the lease timer starts
  io::ClockTimer lease_timer{executor, clock};
  std::atomic<bool> stopped{false};
  std::atomic<bool> redis_up{false};
  // On `executor`. The read: one at a time; catching up (at start, after a failure, after
  // a full page), it does not block.
  bool read_in_flight = false;
  bool catching_up = true;
  Nanos last_read_sent = 0;  // on `clock`
  // What each connection last saw (redis_state): Redis is up while both answer.
  bool redis_link_up = false;
  bool reader_link_up = true;  // false from the start when there are reads (start())
  std::atomic<uint64_t> outages{0}, recoveries{0};
  // Cycle mode, on `executor`: when the next cycle runs (cluster::SyncCycle, set in
  // start()), its timer, and the cycle in flight: the pools' entries it waits for
  // (flush() on each pool's strand) before it sends them and its read.
  std::unique_ptr<cluster::SyncCycle> cycle_timing;
  io::ClockTimer cycle_timer{executor, clock};
  Nanos cycle_at = -1;       // when cycle_timer fires next; -1: not armed
  bool cycling = false;      // the start's snapshot reads are done: cycles may run
  size_t cycle_pending = 0;  // pools whose entry the cycle in flight still waits for
  std::vector<std::optional<Outgoing>> cycle_out;
  std::atomic<uint64_t> cycles{0}, cycle_snaps{0}, cycles_on_event{0};
  std::atomic<Nanos> cycle_wait{0};  // the current wait between cycles
  // When the next cycle is due (max: one is in flight). An own event at or after it runs
  // the cycle on the thread it woke anyway (nudge_cycle); the timer, armed `backstop`
  // later while own events flow, only runs it when no event comes.
  std::atomic<Nanos> cycle_due{std::numeric_limits<Nanos>::max()};
  std::atomic<bool> cycle_posted{false};  // a cycle_now() is posted and has not run
  Nanos cycle_backstop = 0;               // half a tick (set in start())
  // Deferred replies (`cycle_replies: deferred`, no room sharing; set in start()): the
  // cycles go over `reader`, whose socket nothing watches, and a cycle's replies are
  // taken when the next is due (cycle_attempt), on a thread awake for an own event.
  bool deferred = false;
  bool polling = false;  // cycle_attempt() is reading the deferred replies

  int64_t wall_millis() const { return clock.wall_now() / kMillisecond; }

  void hook(const std::shared_ptr<PoolSync>& ps) {
    PoolRuntime::RoutingHooks hooks;
    std::shared_ptr<PoolSync> p = ps;
    std::weak_ptr<Impl> weak = weak_from_this();
    hooks.routed = [p, weak](const route::Router& router, const route::RouteRequest& request,
                             const route::Decision& d, Nanos now) {
      if (!p->outbox) return;
      const route::Endpoint* ep = router.pool().get(d.endpoint);
      const route::Endpoint* pre =
          d.prefill_endpoint ? router.pool().get(*d.prefill_endpoint) : nullptr;
      if (!ep) return;
      const bool first = p->outbox->empty();
      p->outbox->routed(request, d, ep->spec.url, pre ? pre->spec.url : std::string_view(), now);
      if (first || p->outbox->requests() == p->flush_rule.batch) {
        wake_flush(weak, *p, now);
      } else {
        nudge_cycle(weak, now);
      }
    };
    hooks.lifecycle = [p, weak](route::RequestId id, cluster::EventKind kind, Nanos now) {
      if (!p->outbox) return;
      const bool first = p->outbox->empty();
      p->outbox->load(kind, id, now);
      if (first) {
        wake_flush(weak, *p, now);
      } else {
        nudge_cycle(weak, now);
      }
    };
    ps->pool->set_routing_hooks(std::move(hooks));
  }

  // The checks: at each, every pool's batch goes out when the flush rule says so (and a
  // heartbeat once a second), peers' stale load expires. A pool with reports (`periodic`)
  // is checked every `flush`. Otherwise a check is only armed for when something is due:
  // the pool's Outbox by the flush rule (Outbox::due_at: its first event arms it, a full
  // batch brings it forward) or its next heartbeat. Events go out when they did with a
  // check every `flush` (a full batch sooner), and an idle or lightly loaded replica
  // does not wake every `flush` for nothing.
  void arm_flush() {
    periodic = std::any_of(pools.begin(), pools.end(),
                           [](const std::shared_ptr<PoolSync>& ps) { return ps->periodic; });
    schedule_flush(clock.now() + to_nanos(config.flush));
  }
  // On `executor`: `timer` armed for `at` (kept in `armed_at`, -1 when not armed) unless it
  // is armed for then or sooner; when it fires (not aborted, not stopped), `armed_at` is
  // -1 again and `fire` runs. A later time armed before is aborted: this one replaces it.
  template <typename F>
  void arm_sooner(io::ClockTimer& timer, Nanos& armed_at, Nanos at, F fire) {
    if (armed_at >= 0 && armed_at <= at) return;
    armed_at = at;
    timer.expires_at(at);
    timer.async_wait([self = shared_from_this(), &armed_at, fire](boost::system::error_code ec) {
      if (ec || self->stopped) return;
      armed_at = -1;
      fire(*self);
    });
  }
  // On `executor`: a check at `at`, unless one is armed for then or sooner.
  void schedule_flush(Nanos at) {
    if (stopped) return;
    arm_sooner(flush_timer, flush_at, at, [](Impl& self) {
      for (const auto& ps : self.pools) self.flush(ps);
      // Without periodic pools, each pool's check arms its own next one (flush()).
      if (self.periodic) self.schedule_flush(self.clock.now() + to_nanos(self.config.flush));
    });
  }
  // From a routing hook on `pool`'s strand: its Outbox got its first event or a full
  // batch, so its check may be due sooner than the one armed.
  // In cycle mode: the next cycle runs within a tick (an idle wait snaps back), or, for a
  // full batch, as soon as the last cycle is `flush` old.
  static void wake_flush(const std::weak_ptr<Impl>& weak, const PoolSync& pool, Nanos now) {
    const std::shared_ptr<Impl> self = weak.lock();
    if (!self) return;
    if (self->cycle_mode) {
      const bool full = pool.outbox->requests() >= pool.flush_rule.batch;
      asio::dispatch(self->executor, [self, now, full] { self->wake_cycle(now, full); });
      return;
    }
    if (pool.periodic) return;
    const Nanos at = std::max(now, pool.outbox->due_at(pool.flush_rule).value_or(now));
    asio::dispatch(self->executor, [self, at] { self->schedule_flush(at); });
  }
  // From a routing hook on a pool's strand, cycle mode: an own event came while a cycle
  // is due (or overdue): the cycle runs after the handler that routed it, on a thread
  // awake anyway, instead of waking the replica for its timer. Posted, never run inside
  // the hook (the router is mid-operation there), and once until it has run.
  static void nudge_cycle(const std::weak_ptr<Impl>& weak, Nanos now) {
    const std::shared_ptr<Impl> self = weak.lock();
    if (!self || !self->cycle_mode) return;
    if (now < self->cycle_due.load(std::memory_order_relaxed)) return;
    self->post_cycle_now();
  }
  // cycle_now() after the running handler, posted once until it has run.
  void post_cycle_now() {
    if (cycle_posted.exchange(true, std::memory_order_relaxed)) return;
    asio::post(executor, [self = shared_from_this()] {
      self->cycle_posted.store(false, std::memory_order_relaxed);
      self->cycle_now();
    });
  }
  // On `ps`'s strand, after its check: arms its next (unless the pool is periodic).
  void next_flush(const PoolSync& ps, Nanos now) {
    if (ps.periodic || cycle_mode) return;
    Nanos at = ps.outbox ? ps.last_heartbeat + kHeartbeat : now + to_nanos(config.flush);
    if (ps.outbox) {
      if (std::optional<Nanos> due = ps.outbox->due_at(ps.flush_rule)) at = std::min(at, *due);
    }
    at = std::max(at, now);
    asio::dispatch(executor, [self = shared_from_this(), at] { self->schedule_flush(at); });
  }
  // A pool's check, on its strand: its stream entry when one is due, handed to
  // flushed(). In cycle mode every cycle checks every pool and sends whatever waits (the
  // tick is the batching: an entry wakes no peer), the reports with it when they changed.
  void flush(const std::shared_ptr<PoolSync>& ps) {
    ps->pool->post([self = shared_from_this(), ps](route::Router&, kv::PreciseIndex&) {
      const Nanos now = self->clock.now();
      if (!ps->outbox) {
        self->next_flush(*ps, now);
        self->flushed(ps, std::nullopt);
        return;
      }
      const bool heartbeat = now - ps->last_heartbeat >= kHeartbeat;
      // The routing events go out under the flush rule (a batch of requests, or the oldest
      // about to wait flush_max), or with the heartbeat. The reports (fleet fairness,
      // demand) go with them, or on their own once the pool's last entry is flush_max
      // old, so that a change waits no longer than an event does. An entry that goes out
      // takes everything waiting along: a peer wakes once for it all.
      const cluster::FlushRule& rule = ps->flush_rule;
      const bool events_due =
          heartbeat || (self->cycle_mode ? !ps->outbox->empty() : ps->outbox->due(now, rule));
      const bool reports_due = self->cycle_mode || events_due || rule.waited(ps->last_sent, now);
      std::optional<cluster::ServiceReport> report;
      if (ps->fair) {
        if (reports_due) report = ps->fair->take(heartbeat);
        ps->fair->expire(now);
      }
      std::optional<cluster::DemandReport> demand;
      if (ps->room) {
        ps->room->set_epoch_offset(self->clock.wall_now() - now);
        if (reports_due) demand = ps->room->take(heartbeat);
        ps->room->expire(now);
      }
      if (ps->peers) {
        ps->peers->expire(now);
        self->copy_stats(*ps);
      }
      std::optional<cluster::EventBatch> b;
      if (events_due || report || demand) b = ps->outbox->take(now, heartbeat);
      if (heartbeat) ps->last_heartbeat = now;  // a heartbeat always takes a batch
      self->next_flush(*ps, now);
      if (!b && !report && !demand) {
        self->flushed(ps, std::nullopt);
        return;
      }
      ps->last_sent = now;
      Outgoing out;
      out.events = b ? b->events.size() : 0;
      if (b) {
        out.wire = cluster::encode(*b);
        cluster::encode_sessions(*b, out.sessions_wire);
      }
      if (report) out.fair_wire = cluster::encode(*report);
      if (demand) out.room_wire = cluster::encode(*demand);
      // A heartbeat's empty batch and report do not count: an idle fleet's cycles may
      // lengthen (cluster::SyncCycle).
      out.moved = out.events > 0 || (report && !report->tenants.empty()) || (demand && !heartbeat);
      self->flushed(ps, std::move(out));
    });
  }
  // On `ps`'s strand, after its check: the entry goes out at once (blocking mode), or
  // joins the cycle in flight, which waits for every pool's check (cycle mode).
  void flushed(const std::shared_ptr<PoolSync>& ps, std::optional<Outgoing> out) {
    if (cycle_mode) {
      asio::dispatch(
          executor, [self = shared_from_this(), index = ps->index, out = std::move(out)]() mutable {
            self->cycle_collect(index, std::move(out));
          });
      return;
    }
    if (!out) return;
    asio::dispatch(executor, [self = shared_from_this(), ps, out = std::move(*out)] {
      self->publish(ps, out);
    });
  }
  // One stream entry: the routing batch (field "b", when there is one), its session
  // bindings (field "s", when it has any: a field of its own, which replicas that know
  // no session affinity skip), the service report (field "f", when there is one) and the
  // demand report (field "q", when there is one).
  void publish(const std::shared_ptr<PoolSync>& ps, const Outgoing& out, bool on_reader = false) {
    const std::string max_len = std::to_string(config.max_len);
    std::vector<std::string_view> args = {"XADD", ps->stream, "MAXLEN", "~", max_len, "*"};
    if (!out.wire.empty()) {
      args.push_back("b");
      args.push_back(out.wire);
      if (!out.sessions_wire.empty()) {
        args.push_back("s");
        args.push_back(out.sessions_wire);
      }
    }
    if (!out.fair_wire.empty()) {
      args.push_back("f");
      args.push_back(out.fair_wire);
    }
    if (!out.room_wire.empty()) {
      args.push_back("q");
      args.push_back(out.room_wire);
    }
    const bool batch = !out.wire.empty(), report = !out.fair_wire.empty(),
               demand = !out.room_wire.empty();
    (on_reader ? reader : redis)
        .command(std::span<const std::string_view>(args),
                 [self = shared_from_this(), ps, events = out.events, batch, report, demand,
                  on_reader](const redisReply* r, std::string_view error) {
                   if (r == nullptr || r->type == REDIS_REPLY_ERROR) {
                     // Lost: peers learn of these requests' load only through their age
                     // limit, of their prefixes from the next decisions, and never of
                     // the service reported.
                     ps->publish_failures.fetch_add(1, std::memory_order_relaxed);
                     self->redis_state(false, r ? std::string_view(r->str, r->len) : error,
                                       on_reader);
                     return;
                   }
                   if (batch) {
                     ps->batches_published.fetch_add(1, std::memory_order_relaxed);
                     ps->events_published.fetch_add(events, std::memory_order_relaxed);
                   }
                   if (report) ps->fair_published.fetch_add(1, std::memory_order_relaxed);
                   if (demand) ps->room_published.fetch_add(1, std::memory_order_relaxed);
                   self->redis_state(true, {}, on_reader);
                 });
  }

  // Cycle mode (docs/replicas.md, "One cycle per tick"): every pool's check on its
  // strand, then, on `redis`, their XADDs and one non-blocking XREAD of every pool's
  // stream since the last id, pipelined: one round trip, one wake-up for the reply. The
  // next cycle is armed when the reply is in (cluster::SyncCycle says when), so one runs
  // at a time and the read's ids are the last ones seen.
  void cycle() {
    if (stopped || !cycling || cycle_timing->in_flight()) return;
    cycle_due.store(std::numeric_limits<Nanos>::max(), std::memory_order_relaxed);
    cycle_timing->started(clock.now());
    cycles.fetch_add(1, std::memory_order_relaxed);
    cycle_out.assign(pools.size(), std::nullopt);
    cycle_pending = pools.size();
    for (const auto& ps : pools) flush(ps);
  }
  void cycle_collect(size_t index, std::optional<Outgoing> out) {
    if (stopped || cycle_pending == 0) return;
    cycle_out[index] = std::move(out);
    if (--cycle_pending > 0) return;
    bool moved = false;
    for (size_t p = 0; p < pools.size(); ++p) {
      if (!cycle_out[p]) continue;
      moved = moved || cycle_out[p]->moved;
      publish(pools[p], *cycle_out[p], deferred);
    }
    cycle_out.clear();
    send_read(deferred ? reader : redis, /*block=*/false,
              [self = shared_from_this(), moved](const redisReply* r, std::string_view error) {
                self->cycle_done(r, error, moved);
              });
    if (!deferred) return;
    // Deferred: written now; the replies are taken when the next cycle would be due (an own
    // event's, sooner, included), by an own event then or the timer a little later.
    reader.flush();
    Nanos due = cycle_timing->reply_due();
    if (const std::optional<Nanos> wake = cycle_timing->pending_wake()) due = std::min(due, *wake);
    cycle_due.store(due, std::memory_order_relaxed);
    schedule_cycle(moved ? due + cycle_backstop : due);
  }
  void cycle_done(const redisReply* r, std::string_view error, bool published) {
    if (stopped) return;  // stop() closed the connection: no outage
    const ReadOutcome o = take_reply(r, error, /*on_reader=*/deferred);
    // A failed read: the next cycle retries it, at the cycle's pace.
    const Nanos next = cycle_timing->done(clock.now(), published || o.moved, o.ok && o.full);
    cycle_wait.store(cycle_timing->wait(), std::memory_order_relaxed);
    cycle_snaps.store(cycle_timing->snaps(), std::memory_order_relaxed);
    cycle_due.store(next, std::memory_order_relaxed);
    // Deferred replies taken by cycle_attempt(): a cycle due now runs right after.
    if (polling && next <= clock.now()) return;
    // Own events flowing (this cycle published some): the next is likely to be run by one
    // of them (nudge_cycle); the timer is the backstop, half a tick later.
    schedule_cycle(next > clock.now() && published ? next + cycle_backstop : next);
  }
  // Posted by nudge_cycle: the due cycle, now, the timer's wait cancelled.
  void cycle_now() {
    if (stopped || !cycling || (!deferred && cycle_timing->in_flight())) return;
    if (clock.now() < cycle_due.load(std::memory_order_relaxed)) return;
    cycles_on_event.fetch_add(1, std::memory_order_relaxed);
    cycle_at = -1;
    cycle_timer.cancel();
    cycle_attempt();
  }
  // A due cycle (its timer, or an own event): with deferred replies, the last cycle's
  // replies first (they came meanwhile: taking them wakes nothing), then the cycle when
  // done() says it is due.
  void cycle_attempt() {
    if (stopped || !cycling) return;
    if (cycle_timing->in_flight()) {
      if (!deferred) return;
      polling = true;
      reader.poll();  // cycle_done() runs in it when the read's reply is there
      polling = false;
      if (stopped) return;
      if (cycle_timing->in_flight()) {
        // Not all back yet (a slow Redis): again shortly; poll() fails it past its deadline.
        schedule_cycle(clock.now() + kDeferredRetry);
        return;
      }
      if (clock.now() < cycle_due.load(std::memory_order_relaxed)) return;  // armed by done
    }
    cycle();
  }
  // From a routing hook (through wake_flush): an own event came.
  void wake_cycle(Nanos now, bool full) {
    if (!cycle_timing) return;
    std::optional<Nanos> at = cycle_timing->woken(now, full);
    cycle_wait.store(cycle_timing->wait(), std::memory_order_relaxed);
    cycle_snaps.store(cycle_timing->snaps(), std::memory_order_relaxed);
    // A cycle in flight: its end takes the event into account; with deferred replies its
    // replies are then taken by the time the event asks for.
    if (!at && deferred) at = cycle_timing->pending_wake();
    if (!at) return;
    cycle_due.store(std::min(cycle_due.load(std::memory_order_relaxed), *at),
                    std::memory_order_relaxed);
    if (*at <= now) {
      // Due already (an idle wait snapped back past its tick, or a full batch): run it
      // after the handler that routed the event, as nudge_cycle does.
      post_cycle_now();
      return;
    }
    // Later events may run it when due; the timer is the backstop for a full batch at
    // its time, else half a tick after.
    schedule_cycle(full ? *at : *at + cycle_backstop);
  }
  // On `executor`: a cycle at `at`, unless one is armed for then or sooner.
  void schedule_cycle(Nanos at) {
    if (stopped || !cycling) return;
    arm_sooner(cycle_timer, cycle_at, at, [](Impl& self) { self.cycle_attempt(); });
  }

  // XREAD COUNT kReadCount [BLOCK kReadBlock] STREAMS <every pool's stream> <its last id>.
  void send_read(io::RedisAsync& conn, bool block, io::RedisAsync::Callback done) {
    const std::string count = std::to_string(kReadCount);
    const std::string block_ms = std::to_string(kReadBlock / kMillisecond);
    std::vector<std::string_view> args = {"XREAD", "COUNT", count};
    if (block) {
      args.push_back("BLOCK");
      args.push_back(block_ms);
    }
    args.push_back("STREAMS");
    for (const auto& ps : pools) args.push_back(ps->stream);
    for (const auto& ps : pools) args.push_back(ps->last_id);
    conn.command(std::span<const std::string_view>(args), std::move(done));
  }
  // The peers' entries of every pool: one XREAD over the pools' streams, on `reader`.
  // Caught up, it blocks in Redis until an entry comes (or kReadBlock passes: an empty
  // reply, and it is sent again at once), so an idle replica does not wake every `poll`.
  // After a reply that brought entries the next read is sent `poll` after the previous
  // one was (0: at once): under traffic the entries of one `poll` come in one reply, as
  // they did with a read every `poll`, rather than one reply per XADD (every replica's
  // reader wakes for each entry of the stream, its own ones too). So an entry arrives at
  // most `poll` plus Redis's round trips after it was published, and when the previous
  // reply is older than `poll` (a quiet fleet: heartbeats a second apart) within the
  // round trips. Catching up (at start, after a failure, after a full page) it does not
  // block: /ready and the resumption after an outage do not wait for a peer to publish.
  void read() {
    if (read_in_flight || stopped || pools.empty()) return;
    read_in_flight = true;
    last_read_sent = clock.now();
    send_read(reader, /*block=*/!catching_up,
              [self = shared_from_this()](const redisReply* r, std::string_view error) {
                self->read_done(r, error);
              });
  }
  // The next read after `delay`, on `clock` (a ManualClock moves it), or at once.
  void read_after(Nanos delay) {
    if (delay <= 0) {
      read();
      return;
    }
    read_timer.expires_after(delay);
    read_timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec || self->stopped) return;
      self->read();
    });
  }
  void read_done(const redisReply* r, std::string_view error) {
    read_in_flight = false;
    if (stopped) return;  // stop() closed the reader, cancelling a blocked read: no outage
    const ReadOutcome o = take_reply(r, error, /*on_reader=*/true);
    if (!o.ok) {
      catching_up = true;
      // Never at once: this may run inside the connection's teardown, and while the
      // reader waits to reconnect every read fails at once.
      read_after(std::max(to_nanos(config.poll), kReadRetry));
      return;
    }
    catching_up = o.full;
    if (o.full || !o.any) {
      read();
    } else {
      read_after(last_read_sent + to_nanos(config.poll) - clock.now());
    }
  }
  // An XREAD's reply (either mode): the entries applied, the failure or the recovery
  // counted, the pools caught up marked started.
  ReadOutcome take_reply(const redisReply* r, std::string_view error, bool on_reader) {
    ReadOutcome o;
    if (r == nullptr || r->type == REDIS_REPLY_ERROR) {
      for (const auto& ps : pools) {
        ps->started = true;  // Redis is away: route on the own view, do not wait for it
        ps->read_failures.fetch_add(1, std::memory_order_relaxed);
      }
      redis_state(false, r ? std::string_view(r->str, r->len) : error, on_reader);
      return o;
    }
    o.ok = true;
    redis_state(true, {}, on_reader);
    // An array of [stream, entries] pairs, one per stream with new entries; nil when the
    // BLOCK ran out with none (or, not blocking, when there were none).
    std::vector<const redisReply*> entries_of(pools.size(), nullptr);
    if (r->type == REDIS_REPLY_ARRAY) {
      for (size_t i = 0; i < r->elements; ++i) {
        const redisReply* stream = r->element[i];
        if (stream->type != REDIS_REPLY_ARRAY || stream->elements != 2) continue;
        const redisReply* name = stream->element[0];
        const redisReply* entries = stream->element[1];
        if (name->type != REDIS_REPLY_STRING || entries->type != REDIS_REPLY_ARRAY) continue;
        const std::string_view stream_name(name->str, name->len);
        for (size_t p = 0; p < pools.size(); ++p) {
          if (pools[p]->stream == stream_name) entries_of[p] = entries;
        }
      }
    }
    for (size_t p = 0; p < pools.size(); ++p) {
      const size_t n = entries_of[p] != nullptr ? entries_of[p]->elements : 0;
      if (n > 0) {
        o.any = true;
        if (take_entries(pools[p], *entries_of[p])) o.moved = true;
      }
      // A full page: more may be waiting, read on at once. Else this stream is caught up.
      if (n >= kReadCount) {
        o.full = true;
      } else {
        pools[p]->started = true;
      }
    }
    return o;
  }
  // One pool's new entries: the peers' batches and reports, applied on its strand.
  // Whether a peer's event or report came (not a heartbeat alone: cluster::SyncCycle).
  bool take_entries(const std::shared_ptr<PoolSync>& ps, const redisReply& entries) {
    const std::shared_ptr<Impl> self = shared_from_this();
    std::vector<cluster::EventBatch> batches;
    std::vector<cluster::ServiceReport> reports;
    std::vector<cluster::DemandReport> demands;
    bool moved = false;
    for (size_t i = 0; i < entries.elements; ++i) {
      const redisReply* e = entries.element[i];
      if (e->type != REDIS_REPLY_ARRAY || e->elements != 2) continue;
      ps->last_id.assign(e->element[0]->str, e->element[0]->len);
      const redisReply* fields = e->element[1];
      // The entry's batch ("b") and its session bindings ("s"), in either order.
      std::optional<std::string_view> batch_wire, sessions_wire;
      for (size_t f = 0; f + 1 < fields->elements; f += 2) {
        const std::string_view name(fields->element[f]->str, fields->element[f]->len);
        if (name == "f" && ps->fair_enabled) {
          const std::string_view wire(fields->element[f + 1]->str, fields->element[f + 1]->len);
          Result<cluster::ServiceReport> rep = cluster::decode_service_report(wire);
          if (!rep) {
            ps->decode_errors.fetch_add(1, std::memory_order_relaxed);
          } else if (rep->replica != self->id) {
            moved = moved || !rep->tenants.empty();
            reports.push_back(std::move(*rep));
          }
          continue;
        }
        if (name == "q" && ps->room_enabled) {
          const std::string_view wire(fields->element[f + 1]->str, fields->element[f + 1]->len);
          Result<cluster::DemandReport> rep = cluster::decode_demand_report(wire);
          if (!rep) {
            ps->decode_errors.fetch_add(1, std::memory_order_relaxed);
          } else if (rep->replica != self->id) {
            moved = true;
            demands.push_back(std::move(*rep));
          }
          continue;
        }
        const std::string_view wire(fields->element[f + 1]->str, fields->element[f + 1]->len);
        if (name == "b") batch_wire = wire;
        if (name == "s") sessions_wire = wire;
      }
      if (!batch_wire) continue;
      if (cluster::batch_replica(*batch_wire) == std::string_view(self->id)) continue;  // own
      Result<cluster::EventBatch> b = cluster::decode(*batch_wire);
      if (!b) {
        ps->decode_errors.fetch_add(1, std::memory_order_relaxed);
      } else if (b->replica != self->id) {
        // Bad bindings cost the bindings only: the batch applies without them.
        if (sessions_wire && !cluster::decode_sessions(*sessions_wire, *b)) {
          ps->decode_errors.fetch_add(1, std::memory_order_relaxed);
        }
        moved = moved || !b->events.empty();
        batches.push_back(std::move(*b));
      }
    }
    if (batches.empty() && reports.empty() && demands.empty()) return false;
    ps->pool->post([self, ps, batches = std::move(batches), reports = std::move(reports),
                    demands = std::move(demands)](route::Router&, kv::PreciseIndex&) {
      const Nanos now = self->clock.now();
      if (ps->fair && !reports.empty()) {
        for (const cluster::ServiceReport& r : reports) ps->fair->apply(r, now);
        if (PoolFlow* flow = ps->pool->flow()) flow->counters_changed(now);
      }
      const bool repump = ps->room && !demands.empty();
      if (repump) {
        for (const cluster::DemandReport& r : demands) ps->room->apply(r, now);
      }
      if (!ps->peers) return;
      for (const cluster::EventBatch& b : batches) {
        ps->peers->apply(b, now);
        ps->batches_applied.fetch_add(1, std::memory_order_relaxed);
        ps->events_applied.fetch_add(b.events.size(), std::memory_order_relaxed);
      }
      // The share changed (and a new window may have begun): release what it allows, on
      // the view with the peers' latest events.
      if (PoolFlow* flow = ps->pool->flow(); repump && flow) flow->pump(now);
      ps->pool->publish_sessions();  // the peers' decisions bind their sessions here too
      self->copy_stats(*ps);
    });
    return moved;
  }

  // Every third of the lease: take or renew each pool's lease.
  void arm_lease() {
    lease_timer.expires_after(config.lease / 3);
    lease_timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec || self->stopped) return;
      for (const auto& l : self->leases) self->renew(l);
      self->arm_lease();
    });
  }
  void renew(const std::shared_ptr<Lease>& l) {
    if (l->in_flight) return;
    l->in_flight = true;
    const Nanos sent = clock.now();
    const std::string ms = std::to_string(config.lease.count());
    const std::string_view args[] = {"EVAL",       kLeaseScript,   "3", l->key,
                                     l->fence_key, l->desired_key, id,  ms};
    redis.command(args, [self = shared_from_this(), l, sent](const redisReply* r,
                                                             std::string_view error) {
      l->in_flight = false;
      if (r == nullptr || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
          r->element[0]->type != REDIS_REPLY_INTEGER ||
          r->element[1]->type != REDIS_REPLY_INTEGER) {
        // Unknown: the lease, if held, lasts until valid_until and no longer.
        self->redis_state(
            false, r && r->type == REDIS_REPLY_ERROR ? std::string_view(r->str, r->len) : error);
        return;
      }
      self->redis_state(true, {});
      const long long token = r->element[0]->integer;
      l->leader_desired = static_cast<int32_t>(
          std::clamp<long long>(r->element[1]->integer, -1, std::numeric_limits<int32_t>::max()));
      if (token > 0) {
        // Counted from when the renewal was sent, less a margin for clock drift.
        l->valid_until = sent + to_nanos(self->config.lease) * 9 / 10;
        l->token = static_cast<uint64_t>(token);
        if (!l->held.exchange(true)) {
          l->acquisitions.fetch_add(1, std::memory_order_relaxed);
          spdlog::info("cluster: replica {} leads pool {} (fencing token {})", self->id, l->pool,
                       token);
        }
      } else if (l->held.exchange(false)) {
        l->losses.fetch_add(1, std::memory_order_relaxed);
        spdlog::warn("cluster: replica {} lost the lead of pool {}", self->id, l->pool);
      }
    });
  }
  // On the autoscaler's thread: the lease is ours, and Redis still says so with our
  // token, right now; then `desired` is recorded as the pool's count for the others.
  bool confirm(const std::shared_ptr<Lease>& l, int32_t desired) {
    if (!l->valid()) {
      l->refusals.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    auto done = std::make_shared<std::promise<bool>>();
    std::future<bool> answer = done->get_future();
    const std::string value = fmt::format("{}:{}", id, l->token.load());
    const std::string count = std::to_string(desired);
    const std::string ms = std::to_string(config.lease.count());
    asio::dispatch(executor, [self = shared_from_this(), l, done, value, count, ms] {
      const std::string_view args[] = {"EVAL",         kFenceScript, "2",   l->key,
                                       l->desired_key, value,        count, ms};
      self->redis.command(args, [done](const redisReply* r, std::string_view) {
        done->set_value(r != nullptr && r->type == REDIS_REPLY_INTEGER && r->integer == 1);
      });
    });
    const auto wait = 2 * config.redis.timeout + std::chrono::milliseconds(50);
    const bool ok =
        answer.wait_for(wait) == std::future_status::ready && answer.get() && l->valid();
    (ok ? l->actuations : l->refusals).fetch_add(1, std::memory_order_relaxed);
    return ok;
  }

  // At start: the newest snapshot of the pool's index, if any, then the stream from the
  // id it includes (or the tail of `replay`, whichever is later); then reading starts.
  // Without Redis the replica starts on its own view at once.
  void load_snapshots(std::shared_ptr<size_t> pending) {
    for (const auto& ps : pools) {
      const std::string_view args[] = {"GET", ps->snapshot_key};
      redis.command(args, [self = shared_from_this(), ps, pending](const redisReply* r,
                                                                   std::string_view error) {
        if (r == nullptr || r->type == REDIS_REPLY_ERROR) {
          self->redis_state(false, r ? std::string_view(r->str, r->len) : error);
          ps->started = true;  // Redis is away: route on the own view, do not wait for it
        } else if (r->type == REDIS_REPLY_STRING) {
          self->redis_state(true, {});
          self->apply_snapshot(ps, std::string_view(r->str, r->len));
        }
        if (--*pending == 0) self->begin_reading();
      });
    }
  }
  // After the start's snapshots: the blocking reads, or the cycles (their first reads
  // catch up: a full page runs the next cycle at once).
  void begin_reading() {
    if (!cycle_mode) {
      read();
      return;
    }
    cycling = true;
    cycle();
  }
  void apply_snapshot(const std::shared_ptr<PoolSync>& ps, std::string_view wire) {
    Result<cluster::IndexSnapshot> snap = cluster::decode_snapshot(wire);
    if (!snap) {
      ps->decode_errors.fetch_add(1, std::memory_order_relaxed);
      spdlog::warn("cluster: pool {}: snapshot not loaded: {}", ps->pool->name(), snap.error());
      return;
    }
    const int64_t taken = stream_millis(snap->stream_id);
    if (taken > stream_millis(ps->last_id)) ps->last_id = snap->stream_id;
    const Nanos elapsed = std::max<int64_t>(0, wall_millis() - taken) * kMillisecond;
    ps->pool->post([self = shared_from_this(), ps,
                    snap = std::make_shared<cluster::IndexSnapshot>(std::move(*snap)),
                    elapsed](route::Router& router, kv::PreciseIndex&) {
      kv::ApproxIndex* approx = router.indexes().approx;
      if (approx == nullptr) return;
      const cluster::RestoreStats r =
          cluster::restore_snapshot(*snap, *approx, router.pool(), self->clock.now(), elapsed);
      ps->snapshots_loaded.fetch_add(1, std::memory_order_relaxed);
      ps->snapshot_pairs_restored.fetch_add(r.restored, std::memory_order_relaxed);
      spdlog::info(
          "cluster: pool {}: loaded {}'s index snapshot: {} pairs restored, {} of unknown "
          "endpoints, {} expired",
          ps->pool->name(), snap->replica, r.restored, r.unknown_endpoint, r.expired);
    });
  }

  // Every `snapshot`: this replica's index, as its peers will load it at their start.
  void arm_snapshot() {
    snapshot_timer.expires_after(config.snapshot);
    snapshot_timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec || self->stopped) return;
      for (const auto& ps : self->pools) {
        self->write_snapshot(ps);
        self->share_hot(ps);
      }
      self->arm_snapshot();
    });
  }
  void write_snapshot(const std::shared_ptr<PoolSync>& ps) {
    if (ps->snapshot_in_flight || !ps->started) return;
    ps->snapshot_in_flight = true;
    // The stream id this replica's view includes, read here on the Redis executor.
    std::string through = ps->last_id;
    ps->pool->post([self = shared_from_this(), ps, through = std::move(through)](
                       route::Router& router, kv::PreciseIndex&) mutable {
      // The index is walked here, on its strand; it is encoded on the Redis executor.
      kv::ApproxIndex* approx = router.indexes().approx;
      std::optional<cluster::IndexSnapshot> snap;
      if (approx != nullptr && approx->held_pairs() > 0) {
        snap = cluster::take_snapshot(*approx, router.pool(), self->clock.now(), self->id,
                                      std::move(through));
      }
      asio::dispatch(self->executor, [self, ps, snap = std::move(snap)] {
        if (!snap || self->stopped) {
          ps->snapshot_in_flight = false;
          return;
        }
        const std::string wire = cluster::encode(*snap);
        const std::string px = std::to_string(self->config.replay.count());
        const std::string_view args[] = {"SET", ps->snapshot_key, wire, "PX", px};
        self->redis.command(args, [self, ps](const redisReply* r, std::string_view error) {
          ps->snapshot_in_flight = false;
          if (r == nullptr || r->type == REDIS_REPLY_ERROR) {
            ps->snapshot_failures.fetch_add(1, std::memory_order_relaxed);
            self->redis_state(false, r ? std::string_view(r->str, r->len) : error);
            return;
          }
          ps->snapshots_written.fetch_add(1, std::memory_order_relaxed);
          self->redis_state(true, {});
        });
      });
    });
  }

  // Every `snapshot` too: this replica's hot prefixes out, the peers' in (fresh ones:
  // written within three intervals; a dead replica's field is then ignored, and removed).
  void share_hot(const std::shared_ptr<PoolSync>& ps) {
    if (ps->warmup == nullptr || ps->hot_in_flight) return;
    ps->hot_in_flight = true;
    const int64_t now_ms = wall_millis();
    const std::string wire = cluster::encode_hot_prefixes(id, now_ms, ps->warmup->top(ps->hot_k));
    const std::string px = std::to_string(config.replay.count());
    const std::string_view set[] = {"HSET", ps->hot_key, id, wire};
    redis.command(set, [ps](const redisReply* r, std::string_view) {
      if (r != nullptr && r->type != REDIS_REPLY_ERROR) {
        ps->hot_published.fetch_add(1, std::memory_order_relaxed);
      }
    });
    const std::string_view expire[] = {"PEXPIRE", ps->hot_key, px};
    redis.command(expire, [](const redisReply*, std::string_view) {});
    const std::string_view get[] = {"HGETALL", ps->hot_key};
    redis.command(get,
                  [self = shared_from_this(), ps, now_ms](const redisReply* r, std::string_view) {
                    ps->hot_in_flight = false;
                    if (r == nullptr || r->type != REDIS_REPLY_ARRAY) return;
                    const int64_t fresh_ms = 3 * self->config.snapshot.count();
                    std::vector<std::vector<kv::HotPrefix>> lists;
                    for (size_t i = 0; i + 1 < r->elements; i += 2) {
                      const redisReply* field = r->element[i];
                      const redisReply* value = r->element[i + 1];
                      if (field->type != REDIS_REPLY_STRING || value->type != REDIS_REPLY_STRING)
                        continue;
                      const std::string_view replica(field->str, field->len);
                      if (replica == self->id) continue;
                      Result<cluster::SharedHotPrefixes> h =
                          cluster::decode_hot_prefixes(std::string_view(value->str, value->len));
                      if (!h) {
                        ps->decode_errors.fetch_add(1, std::memory_order_relaxed);
                        continue;
                      }
                      if (now_ms - h->written_ms > fresh_ms) {
                        const std::string_view del[] = {"HDEL", ps->hot_key, replica};
                        self->redis.command(del, [](const redisReply*, std::string_view) {});
                        continue;
                      }
                      lists.push_back(std::move(h->prefixes));
                    }
                    ps->hot_peer_lists.store(lists.size(), std::memory_order_relaxed);
                    std::lock_guard lock(ps->hot_mu);
                    ps->peer_hot = std::move(lists);
                  });
  }

  void copy_stats(PoolSync& ps) {
    const cluster::PeerSync::Stats& s = ps.peers->stats();
    ps.gaps = s.gaps;
    ps.expired_requests = s.expired_requests;
    ps.dead_replicas = s.dead_replicas;
    ps.unknown_endpoint = s.unknown_endpoint;
    ps.peer_requests = ps.peers->peer_requests();
    ps.live_peers = ps.peers->live_peers(clock.now());
    if (ps.fair) {
      const cluster::FleetFairness::Stats& f = ps.fair->stats();
      const Nanos now = clock.now();
      ps.fair_peers = ps.fair->fleet(now) ? ps.fair->live_peers(now) : 0;
      ps.fair_fallbacks = f.fallbacks;
      ps.fair_applied = f.reports_applied;
      ps.fair_gaps = f.gaps;
    }
    if (ps.room) {
      const cluster::FleetRoom::Stats& q = ps.room->stats();
      ps.room_peers = ps.room->peers();
      ps.room_fallbacks = q.fallbacks;
      ps.room_applied = q.reports_applied;
      if (PoolFlow* flow = ps.pool->flow()) ps.room_holds = flow->controller().room_holds();
    }
  }

  // What a command's reply said of Redis: on `reader` (the peers' reads), else on
  // `redis`. Redis is up while both connections answer: they fail and recover a moment
  // apart, and one outage counts once.
  void redis_state(bool up, std::string_view error, bool on_reader = false) {
    (on_reader ? reader_link_up : redis_link_up) = up;
    // With deferred replies the cycles (every tick) go over `reader`, and `redis` carries
    // only the occasional snapshot or lease: the cycles say whether Redis answers.
    up = deferred ? reader_link_up : (redis_link_up && reader_link_up);
    const bool was = redis_up.exchange(up);
    if (was == up) return;
    if (!up) {
      // No peer's service or demand comes any more: with fleet fairness each queue orders
      // by its own counters, with room sharing each takes the whole room.
      for (const auto& ps : pools) {
        if (!ps->fair_enabled && !ps->room_enabled) continue;
        ps->pool->post([ps](route::Router&, kv::PreciseIndex&) {
          if (ps->fair) {
            ps->fair->fall_back();
            ps->fair_peers = 0;
            ps->fair_fallbacks = ps->fair->stats().fallbacks;
          }
          if (ps->room) {
            ps->room->fall_back();
            ps->room_peers = 0;
            ps->room_fallbacks = ps->room->stats().fallbacks;
          }
        });
      }
    }
    if (up) {
      recoveries.fetch_add(1, std::memory_order_relaxed);
      spdlog::info("cluster: Redis {}:{} answers again: sync resumes", config.redis.host,
                   config.redis.port);
    } else {
      outages.fetch_add(1, std::memory_order_relaxed);
      spdlog::warn("cluster: Redis {}:{} unavailable ({}): routing on this replica's own view",
                   config.redis.host, config.redis.port, error);
    }
  }
};

ReplicaSync::ReplicaSync(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

ReplicaSync::~ReplicaSync() { stop(); }

std::unique_ptr<ReplicaSync> ReplicaSync::start(const ClusterConfig& config,
                                                std::vector<PoolRuntime*> pools,
                                                asio::any_io_executor redis_executor,
                                                const Clock& clock,
                                                std::vector<PoolWarmup*> warmups) {
  auto impl = std::make_shared<Impl>(config, std::move(redis_executor), clock);
  const std::string replay_from = fmt::format("{}-0", impl->wall_millis() - config.replay.count());
  for (PoolRuntime* pool : pools) {
    auto ps = std::make_shared<PoolSync>();
    ps->pool = pool;
    ps->stream = fmt::format("{}:routing:{}", config.stream_prefix, pool->name());
    ps->snapshot_key = fmt::format("{}:snapshot:{}", config.stream_prefix, pool->name());
    ps->hot_key = fmt::format("{}:hot:{}", config.stream_prefix, pool->name());
    ps->last_id = replay_from;
    ps->started = !config.sync;
    for (PoolWarmup* w : warmups) {
      if (w == nullptr || !w->enabled() || &w->pool() != pool || !config.sync) continue;
      ps->warmup = w;
      ps->hot_k = w->prefixes();
      w->set_peers([ps] {
        std::lock_guard lock(ps->hot_mu);
        return ps->peer_hot;
      });
    }
    const cluster::PeerSync::Options options{.peer_timeout = to_nanos(config.peer_timeout)};
    ps->fair_enabled = config.sync && config.fleet_fairness && pool->flow() != nullptr;
    ps->room_enabled = config.sync && pool->flow() != nullptr &&
                       pool->flow()->config().room_share != route::RoomShare::kNone;
    // A release here is unseen by the peers for at most: one flush (the batching here:
    // pools with room sharing publish at every check, below); one `poll`, the peer's
    // read pacing (its read is blocked in Redis and answers at once, unless it brought
    // entries less than `poll` ago: then the next is sent `poll` after the last, so the
    // entry waits that long at most; a quiet fleet sees it sooner, but the window holds
    // the worst case); and Redis's round trips (the XADD, the read's reply) with the hop
    // onto the peer's strand (kRoomMargin). `poll` 0: flush + margin. The peers' `poll`
    // is taken to be this replica's. In cycle mode a replica with a room-sharing pool
    // cycles every `flush` (never longer): the release goes out at this replica's next
    // cycle and is read at the peer's next, two `flush` + the margin (the peers' tick
    // taken to be this replica's).
    const Nanos room_window = impl->cycle_mode
                                  ? 2 * to_nanos(config.flush) + kRoomMargin
                                  : to_nanos(config.flush) + to_nanos(config.poll) + kRoomMargin;
    // The flush rule (cluster::FlushRule): a batch of `flush_batch` requests, or the
    // oldest event about to wait `flush_max`, checked every `flush`. A pool with room
    // sharing publishes at every check instead: its window (above) is how long its
    // releases stay unseen, and a longer one keeps a freed slot idle longer; its demand
    // reports change with nearly every release anyway.
    ps->periodic = ps->fair_enabled || ps->room_enabled;
    ps->flush_rule = cluster::FlushRule{
        .period = to_nanos(config.flush),
        .batch = config.flush_batch,
        .max_wait = ps->room_enabled ? to_nanos(config.flush) : to_nanos(config.flush_max)};
    pool->post([ps, id = impl->id, options, room_window, name = pool->name()](route::Router& router,
                                                                              kv::PreciseIndex&) {
      ps->outbox = std::make_unique<cluster::Outbox>(id, name);
      ps->peers = std::make_unique<cluster::PeerSync>(router, id, options);
      if (ps->fair_enabled) {
        ps->fair = std::make_unique<cluster::FleetFairness>(
            ps->pool->flow()->queue(), id, name,
            cluster::FleetFairness::Options{.peer_timeout = options.peer_timeout});
      }
      if (ps->room_enabled) {
        ps->room = std::make_unique<cluster::FleetRoom>(
            ps->pool->flow()->controller(), id, name,
            cluster::FleetRoom::Options{.peer_timeout = options.peer_timeout,
                                        .window = room_window});
      }
    });
    if (config.sync) impl->hook(ps);
    ps->index = impl->pools.size();
    impl->pools.push_back(std::move(ps));
  }
  // With reads, Redis is up once the reader has answered too (before any handler runs).
  // In cycle mode the reads go over `redis` with the rest, or, with deferred replies, over
  // `reader` (set in start()): its first cycle's reply says so.
  impl->reader_link_up = !config.sync || impl->pools.empty() || impl->cycle_mode;
  if (impl->cycle_mode && config.sync) {
    // The tick: flush_max, the longest an own event waits in blocking mode too (each cycle
    // sends whatever waits); `flush` with a room-sharing pool (its window, above), and
    // then the wait never lengthens (a queue's demand changes without a routing event to
    // snap it back). A full batch brings a cycle forward to `flush` after the last.
    const bool any_room = std::any_of(impl->pools.begin(), impl->pools.end(),
                                      [](const auto& ps) { return ps->room_enabled; });
    const Nanos tick = to_nanos(any_room ? config.flush : config.flush_max);
    impl->cycle_timing = std::make_unique<cluster::SyncCycle>(
        cluster::SyncCycle::Options{.tick = tick,
                                    .min_gap = to_nanos(config.flush),
                                    .idle_max = any_room ? tick : to_nanos(config.cycle_idle_max)});
    impl->cycle_wait = impl->cycle_timing->wait();
    // Half a tick: how much later than due the timer runs a cycle while own events flow
    // (an event runs it first). None with room sharing: its window assumes the tick.
    impl->cycle_backstop = any_room ? 0 : tick / 2;
    // Deferred replies: not with room sharing (its window assumes replies read at once).
    impl->deferred = !any_room && config.cycle_replies == ClusterConfig::CycleReplies::kDeferred;
    if (impl->deferred) impl->reader.set_deferred(true, to_nanos(config.redis.timeout));
  }
  if (config.sync) {
    asio::dispatch(impl->executor, [impl] {
      if (!impl->cycle_mode) impl->arm_flush();
      if (impl->pools.empty()) return;
      impl->load_snapshots(std::make_shared<size_t>(impl->pools.size()));
      if (impl->config.snapshot.count() > 0) impl->arm_snapshot();
    });
  }
  spdlog::info("cluster: replica {}, sync {}{}, Redis {}:{}", impl->id, config.sync ? "on" : "off",
               config.sync && impl->cycle_mode ? " (cycle mode)" : "", config.redis.host,
               config.redis.port);
  return std::unique_ptr<ReplicaSync>(new ReplicaSync(std::move(impl)));
}

LeaderLink ReplicaSync::leader_link(const std::string& pool) {
  auto l = std::make_shared<Lease>();
  l->clock = &impl_->clock;
  l->pool = pool;
  l->key = fmt::format("{}:leader:{}", impl_->config.stream_prefix, pool);
  l->fence_key = fmt::format("{}:fence:{}", impl_->config.stream_prefix, pool);
  l->desired_key = fmt::format("{}:desired:{}", impl_->config.stream_prefix, pool);
  const bool first = impl_->leases.empty();
  impl_->leases.push_back(l);
  if (first) {
    asio::dispatch(impl_->executor, [impl = impl_] {
      for (const auto& l : impl->leases) impl->renew(l);
      impl->arm_lease();
    });
  }
  return {.may_actuate = [impl = impl_, l](int32_t desired) { return impl->confirm(l, desired); },
          .leader_desired = [l]() -> std::optional<int32_t> {
            const int32_t d = l->leader_desired;
            if (d < 0 || l->valid()) return std::nullopt;
            return d;
          }};
}

void ReplicaSync::stop() {
  if (impl_->stopped.exchange(true)) return;
  // The timers' handlers see `stopped` and do not re-arm; cancelling here could race
  // with a handler running on another thread. The connection closes on its executor:
  // commands still waiting fail and let go of this object (they hold it), or it and its
  // hiredis context would outlive the gateway. Waited for while the I/O threads run.
  // Closing the reader frees its connection, which ends a read blocked in Redis at once
  // (its callback sees `stopped`: not an outage).
  auto closed = std::make_shared<std::promise<void>>();
  std::future<void> done = closed->get_future();
  asio::dispatch(impl_->executor, [impl = impl_, closed] {
    impl->reader.close();
    impl->redis.close();
    closed->set_value();
  });
  (void)done.wait_for(std::chrono::seconds(1));
}

bool ReplicaSync::started() const {
  for (const auto& ps : impl_->pools) {
    if (!ps->started) return false;
  }
  return true;
}

const std::string& ReplicaSync::replica_id() const { return impl_->id; }

std::string ReplicaSync::render_metrics() const {
  metrics::PrometheusWriter w;
  w.header("kvgate_cluster_redis_up",
           "1 while the cluster's Redis answers (sync on), else 0: routing on the own view",
           "gauge");
  w.sample("kvgate_cluster_redis_up", {}, impl_->redis_up ? 1 : 0);
  w.header("kvgate_cluster_redis_outages_total", "Times the cluster's Redis stopped answering",
           "counter");
  w.sample("kvgate_cluster_redis_outages_total", {}, static_cast<double>(impl_->outages.load()));
  w.header("kvgate_cluster_redis_recoveries_total",
           "Times the cluster's Redis answered again (the first connection counts)", "counter");
  w.sample("kvgate_cluster_redis_recoveries_total", {},
           static_cast<double>(impl_->recoveries.load()));
  if (impl_->cycle_timing) {
    w.header("kvgate_cluster_cycles_total",
             "Publish-and-read cycles run (sync_mode: cycle; one round trip each)", "counter");
    w.sample("kvgate_cluster_cycles_total", {}, static_cast<double>(impl_->cycles.load()));
    w.header("kvgate_cluster_cycle_wait_seconds",
             "The current wait between cycles (the tick, or longer while idle)", "gauge");
    w.sample("kvgate_cluster_cycle_wait_seconds", {},
             static_cast<double>(impl_->cycle_wait.load()) / kSecond);
    w.header("kvgate_cluster_cycle_snaps_total",
             "Times an idle replica's lengthened wait snapped back to the tick", "counter");
    w.sample("kvgate_cluster_cycle_snaps_total", {},
             static_cast<double>(impl_->cycle_snaps.load()));
    w.header("kvgate_cluster_cycles_on_event_total",
             "Cycles run by an own routing event when due, not by the timer", "counter");
    w.sample("kvgate_cluster_cycles_on_event_total", {},
             static_cast<double>(impl_->cycles_on_event.load()));
  }
  struct Counter {
    const char* name;
    const char* help;
    std::atomic<uint64_t> PoolSync::*field;
    const char* type = "counter";
  };
  const Counter counters[] = {
      {"kvgate_cluster_batches_published_total", "Batches of own routing events published",
       &PoolSync::batches_published},
      {"kvgate_cluster_events_published_total", "Own routing events published",
       &PoolSync::events_published},
      {"kvgate_cluster_publish_failures_total", "Batches lost because Redis failed",
       &PoolSync::publish_failures},
      {"kvgate_cluster_batches_applied_total", "Peers' batches applied",
       &PoolSync::batches_applied},
      {"kvgate_cluster_events_applied_total", "Peers' routing events applied",
       &PoolSync::events_applied},
      {"kvgate_cluster_read_failures_total", "Stream reads that failed", &PoolSync::read_failures},
      {"kvgate_cluster_decode_errors_total", "Stream entries that did not decode",
       &PoolSync::decode_errors},
      {"kvgate_cluster_gaps_total", "Peers' batches missed (sequence gaps)", &PoolSync::gaps},
      {"kvgate_cluster_unknown_endpoint_total", "Peers' decisions for endpoints not in this pool",
       &PoolSync::unknown_endpoint},
      {"kvgate_cluster_expired_requests_total",
       "Peers' requests released without their end (dead peer, age)", &PoolSync::expired_requests},
      {"kvgate_cluster_dead_replicas_total", "Peers taken for dead (silent too long)",
       &PoolSync::dead_replicas},
      {"kvgate_cluster_peer_requests", "Peers' requests in flight, as this replica tracks them",
       &PoolSync::peer_requests, "gauge"},
      {"kvgate_cluster_live_peers", "Peers heard from within the peer timeout",
       &PoolSync::live_peers, "gauge"},
      {"kvgate_cluster_snapshots_written_total", "Snapshots of this replica's index written",
       &PoolSync::snapshots_written},
      {"kvgate_cluster_snapshot_failures_total", "Snapshots not written because Redis failed",
       &PoolSync::snapshot_failures},
      {"kvgate_cluster_snapshots_loaded_total", "Peers' index snapshots loaded at start",
       &PoolSync::snapshots_loaded},
      {"kvgate_cluster_snapshot_pairs_restored_total",
       "(block, endpoint) pairs restored from a loaded snapshot",
       &PoolSync::snapshot_pairs_restored},
      {"kvgate_cluster_hot_prefixes_published_total",
       "Times this replica's hot prefixes were published (warm-up pools)",
       &PoolSync::hot_published},
      {"kvgate_cluster_peer_hot_prefix_lists",
       "Peers whose fresh hot prefixes a warm-up here merges", &PoolSync::hot_peer_lists, "gauge"},
  };
  for (const Counter& c : counters) {
    w.header(c.name, c.help, c.type);
    for (const auto& ps : impl_->pools) {
      w.sample(c.name, {{"pool", ps->pool->name()}}, static_cast<double>(((*ps).*c.field).load()));
    }
  }
  const Counter fair_counters[] = {
      {"kvgate_flow_fleet_peers",
       "Peers whose service the pool's queue orders by (fleet fairness; 0: its own alone)",
       &PoolSync::fair_peers, "gauge"},
      {"kvgate_flow_fleet_fallbacks_total",
       "Times the pool's queue fell back to this replica's own service (sync lost)",
       &PoolSync::fair_fallbacks},
      {"kvgate_flow_fleet_reports_published_total",
       "Reports of the service given here published to the peers", &PoolSync::fair_published},
      {"kvgate_flow_fleet_reports_applied_total", "Peers' service reports applied to the queue",
       &PoolSync::fair_applied},
      {"kvgate_flow_fleet_gaps_total", "Peers' service reports missed (sequence gaps)",
       &PoolSync::fair_gaps},
  };
  const Counter room_counters[] = {
      {"kvgate_flow_room_peers",
       "Peers the pool's queue shares the room with (room sharing; 0: the whole room is its own)",
       &PoolSync::room_peers, "gauge"},
      {"kvgate_flow_room_holds_total",
       "Releases held back because this replica's share of the pool's room was used",
       &PoolSync::room_holds},
      {"kvgate_flow_room_fallbacks_total",
       "Times the pool's queue fell back to the whole room (sync lost)", &PoolSync::room_fallbacks},
      {"kvgate_flow_room_reports_published_total", "Demand reports of the queue published",
       &PoolSync::room_published},
      {"kvgate_flow_room_reports_applied_total", "Peers' demand reports applied",
       &PoolSync::room_applied},
  };
  const bool any_room = std::any_of(impl_->pools.begin(), impl_->pools.end(),
                                    [](const auto& ps) { return ps->room_enabled; });
  for (const Counter& c : room_counters) {
    if (!any_room) break;
    w.header(c.name, c.help, c.type);
    for (const auto& ps : impl_->pools) {
      if (!ps->room_enabled) continue;
      w.sample(c.name, {{"pool", ps->pool->name()}}, static_cast<double>(((*ps).*c.field).load()));
    }
  }
  const bool any_fair = std::any_of(impl_->pools.begin(), impl_->pools.end(),
                                    [](const auto& ps) { return ps->fair_enabled; });
  for (const Counter& c : fair_counters) {
    if (!any_fair) break;
    w.header(c.name, c.help, c.type);
    for (const auto& ps : impl_->pools) {
      if (!ps->fair_enabled) continue;
      w.sample(c.name, {{"pool", ps->pool->name()}}, static_cast<double>(((*ps).*c.field).load()));
    }
  }
  if (!impl_->leases.empty()) {
    w.header("kvgate_cluster_leader", "1 while this replica holds the pool's autoscaler lease",
             "gauge");
    for (const auto& l : impl_->leases) {
      w.sample("kvgate_cluster_leader", {{"pool", l->pool}}, l->valid() ? 1 : 0);
    }
    const std::pair<const char*, std::atomic<uint64_t> Lease::*> lease_counters[] = {
        {"kvgate_cluster_leader_acquisitions_total", &Lease::acquisitions},
        {"kvgate_cluster_leader_losses_total", &Lease::losses},
        {"kvgate_cluster_actuations_total", &Lease::actuations},
        {"kvgate_cluster_actuations_refused_total", &Lease::refusals}};
    for (const auto& [name, field] : lease_counters) {
      w.header(name, "The pool's autoscaler lease (docs/replicas.md)", "counter");
      for (const auto& l : impl_->leases) {
        w.sample(name, {{"pool", l->pool}}, static_cast<double>(((*l).*field).load()));
      }
    }
  }
  return w.take();
}

std::string ReplicaSync::status_json() const {
  boost::json::array pools;
  for (const auto& ps : impl_->pools) {
    pools.push_back(boost::json::object{
        {"pool", ps->pool->name()},
        {"stream", ps->stream},
        {"batches_published", ps->batches_published.load()},
        {"events_published", ps->events_published.load()},
        {"publish_failures", ps->publish_failures.load()},
        {"batches_applied", ps->batches_applied.load()},
        {"events_applied", ps->events_applied.load()},
        {"read_failures", ps->read_failures.load()},
        {"gaps", ps->gaps.load()},
        {"peer_requests", ps->peer_requests.load()},
        {"live_peers", ps->live_peers.load()},
        {"expired_requests", ps->expired_requests.load()},
        {"dead_replicas", ps->dead_replicas.load()},
        {"started", ps->started.load()},
        {"snapshots_written", ps->snapshots_written.load()},
        {"snapshots_loaded", ps->snapshots_loaded.load()},
        {"snapshot_pairs_restored", ps->snapshot_pairs_restored.load()},
        {"fleet_fairness", boost::json::object{{"enabled", ps->fair_enabled},
                                               {"peers", ps->fair_peers.load()},
                                               {"fallbacks", ps->fair_fallbacks.load()},
                                               {"reports_published", ps->fair_published.load()},
                                               {"reports_applied", ps->fair_applied.load()},
                                               {"gaps", ps->fair_gaps.load()}}},
        {"room_share",
         boost::json::object{
             {"enabled", ps->room_enabled},
             {"mode", ps->pool->flow() ? route::to_string(ps->pool->flow()->config().room_share)
                                       : std::string_view("none")},
             {"peers", ps->room_peers.load()},
             {"holds", ps->room_holds.load()},
             {"fallbacks", ps->room_fallbacks.load()},
             {"reports_published", ps->room_published.load()},
             {"reports_applied", ps->room_applied.load()}}}});
  }
  return boost::json::serialize(boost::json::object{
      {"replica_id", impl_->id},
      {"sync", impl_->config.sync},
      {"sync_mode", impl_->cycle_mode ? "cycle" : "blocking"},
      {"cycle", impl_->cycle_timing ? boost::json::value(boost::json::object{
                                          {"cycles", impl_->cycles.load()},
                                          {"wait_ms", impl_->cycle_wait.load() / kMillisecond},
                                          {"snaps", impl_->cycle_snaps.load()},
                                          {"on_event", impl_->cycles_on_event.load()},
                                          {"replies", impl_->deferred ? "deferred" : "prompt"}})
                                    : boost::json::value(nullptr)},
      {"redis", fmt::format("{}:{}", impl_->config.redis.host, impl_->config.redis.port)},
      {"redis_up", impl_->redis_up.load()},
      {"routing_on_own_view", impl_->config.sync && !impl_->redis_up.load()},
      {"outages", impl_->outages.load()},
      {"recoveries", impl_->recoveries.load()},
      {"pools", std::move(pools)},
      {"leases", [&] {
         boost::json::array leases;
         for (const auto& l : impl_->leases) {
           leases.push_back(boost::json::object{{"pool", l->pool},
                                                {"leader", l->valid()},
                                                {"token", l->token.load()},
                                                {"leader_desired", l->leader_desired.load()},
                                                {"acquisitions", l->acquisitions.load()},
                                                {"actuations", l->actuations.load()},
                                                {"refusals", l->refusals.load()}});
         }
         return leases;
       }()}});
}

}  // namespace kvgate::gateway
