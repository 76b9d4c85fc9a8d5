// PoolFlow: a pool's flow-control queue in the running gateway (docs/flow-control.md).
//
// Wraps the core's FlowController (core/route/flow_control.h) for one pool (PoolRouting,
// pool_routing.h): it lives on the pool's strand, next to the Router it borrows.
// PoolRouting::admit() hands it a request and a completion; the completion runs (on the
// strand) when the request is routed, refused, or at once when it need not wait.
// Whenever capacity may have appeared (a request finished, a first token, an endpoint
// added, a scrape) the pool calls pump(); a timer on the strand fires at the queue's next expiry
// (max wait, deadlines), in the pool's clock's time (io::ClockTimer: a test advances a ManualClock
// past a max wait and the request is refused, without sleeping). A client that goes away
// while queued is cancel()ed at once; on stop, refuse_all() answers whatever still waits.
//
// Metrics are kept beside the queue under a mutex, so /metrics (another thread) reads
// them without touching the strand:
//   kvgate_flow_queued_requests{pool,band,tenant}      gauge
//   kvgate_flow_queued_tokens{pool,band,tenant}        gauge (prompt + expected output)
//   kvgate_flow_dispatched_total{pool,band,tenant}     counter (left the queue, routed)
//   kvgate_flow_evicted_total{pool,band,tenant}        counter (made room for a higher band)
//   kvgate_flow_timed_out_total{pool,band,tenant}      counter (queue_timeout)
//   kvgate_flow_refused_total{pool,band,tenant,reason} counter (queue_full, deadline_unmeetable,
//                                                      saturated, decode_full, ..., shutting_down)
//   kvgate_flow_cancelled_total{pool,band,tenant}      counter (client gone while queued)
//   kvgate_flow_wait_seconds{pool,band}                histogram (of dispatched requests)
//
// Thread-safety: admit, pump, cancel, refuse_all, queue_json on the strand; queued() and
// snapshot() from any thread.
#pragma once

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/common/clock.h"
#include "core/common/rng.h"
#include "core/metrics/histogram.h"
#include "core/route/flow_control.h"
#include "io/clock_timer.h"

namespace kvgate::gateway {

// Who a request is, for the queue.
struct FlowTicket {
  std::string_view tenant;        // the keys file's tenant ("anonymous" without keys)
  double weight = 1;              // its fair share (keys file `weight`)
  std::optional<Nanos> deadline;  // absolute (the pool's clock): dispatch by then
};

class PoolFlow {
 public:
  // Why a queued request's wait ended: its outcome (kDispatched or kRefused), the
  // gateway stopping (answer 503 shutting_down), or its client gone (cancel()).
  enum class End : uint8_t { kOutcome, kStopping, kClientGone };
  // Runs on the strand, exactly once per admitted request.
  using Deliver = std::function<void(const route::FlowOutcome&, End)>;

  // Borrows `router` and `rng` (the pool's, on `strand`) and `clock` (the pool's: the
  // queue's times, deadlines included, are in it).
  PoolFlow(route::Router& router, route::FlowQueueConfig config,
           boost::asio::any_io_executor strand, Rng& rng, const Clock& clock, std::string pool);
  ~PoolFlow();

  // On the strand. `request` is borrowed until `deliver` ran (or cancel() returned true).
  void admit(const route::RouteRequest& request, const FlowTicket& ticket, Nanos now,
             Deliver deliver);
  // Capacity may have appeared: dispatch in order while some endpoint has room.
  void pump(Nanos now);
  // A dispatched request ended: its tenant's counter is charged the actual output (and
  // the admin view follows).
  void finished(std::string_view tenant, uint32_t charged, uint32_t actual) {
    fc_.finished(tenant, charged, actual);
    refresh_view(clock_.now());
  }
  // The client went away: removed from the queue; its Deliver runs with kClientGone.
  bool cancel(route::RequestId id);
  // Stop: everything still queued is refused (`reason` shutting_down, status 503), and
  // from then on every request that would wait (admit() still dispatches what it can).
  void refuse_all(Nanos now);
  // GET /admin/pools/NAME/queue: the queue's size, its head (the next request of each
  // backlogged tenant per band, up to `limit`) and every tenant's counters. JSON, built
  // on the strand.
  std::string queue_json(size_t limit, Nanos now) const;
  // The same as of the last change (at most 50 ms old), readable from any thread.
  std::string queue_view() const;

  // Fleet fairness (replica_sync.h, cluster/fleet_fairness.h), on the strand: the queue,
  // whose counters the peers' service is added to; and counters_changed() after adding
  // it, so that queue_view() follows.
  route::FlowQueue& queue() { return fc_.queue(); }
  void counters_changed(Nanos now) { refresh_view(now); }
  // Room sharing (cluster/fleet_room.h), on the strand: the controller whose share of the
  // pool's room the peers' demand sets; pump() after a change releases what it allows.
  route::FlowController& controller() { return fc_; }

  size_t queued() const { return queued_.load(std::memory_order_relaxed); }
  const route::FlowQueueConfig& config() const { return fc_.queue().config(); }

  // The metrics' values (a copy, taken under the lock).
  struct Counts {
    int64_t queued = 0, queued_tokens = 0;
    uint64_t dispatched = 0, evicted = 0, timed_out = 0, cancelled = 0;
  };
  using Key = std::tuple<std::string, std::string>;  // band, tenant
  struct Snapshot {
    std::string pool;
    std::map<Key, Counts> counts;
    std::map<std::tuple<std::string, std::string, std::string>, uint64_t> refused;  // + reason
    std::map<std::string, metrics::HistogramSnapshot> wait;                         // by band
  };
  Snapshot snapshot() const;

 private:
  struct Waiting {
    Deliver deliver;
    route::Criticality band;
    std::string tenant;
    uint64_t tokens = 0;
  };
  // Delivers `o` to its waiting request (if any) and counts it. `evicted`: a queued
  // request refused to make room for another.
  void settle(const route::FlowOutcome& o, Nanos now, bool evicted);
  void arm_timer(Nanos now);
  // Rebuilds queue_view's text, at most every 50 ms (a timer catches the last change).
  void refresh_view(Nanos now);
  void count_queued(route::Criticality band, std::string_view tenant, int64_t n, int64_t tokens);

  route::FlowController fc_;
  boost::asio::any_io_executor strand_;
  Rng& rng_;
  const Clock& clock_;
  const std::string pool_;
  std::unordered_map<route::RequestId, Waiting> waiting_;  // on the strand
  std::vector<route::FlowOutcome> out_;                    // scratch, on the strand
  // On clock_ (io::ClockTimer): the queue's next expiry, and the view's next rebuild.
  io::ClockTimer timer_;
  Nanos timer_at_ = 0;  // 0: not armed
  io::ClockTimer view_timer_;
  bool view_timer_armed_ = false;
  Nanos view_at_ = -1;
  std::shared_ptr<bool> alive_;
  std::atomic<size_t> queued_{0};
  bool stopping_ = false;  // refuse_all() ran (on the strand)

  // Metrics, under mu_.
  mutable std::mutex mu_;
  std::map<Key, Counts> counts_;
  std::map<std::tuple<std::string, std::string, std::string>, uint64_t> refused_;
  std::map<std::string, metrics::Histogram> wait_;  // by band
  std::string view_;
};

// The flow-control text of /metrics for every pool that has a queue.
std::string render_flow_metrics(const std::vector<const PoolFlow*>& flows);

}  // namespace kvgate::gateway
