// FleetFairness: the flow-control queues of several gateway replicas ordered by the
// fleet's service to each tenant, not each replica's own (docs/flow-control.md, "Fleet
// fairness").
//
// A replica's FlowQueue orders tenants by their virtual token counters (VTC): the
// service it gave them. Behind one Service, a tenant that spreads its requests over N
// replicas would get N fair shares if each replica ordered by its own service alone. So
// each replica
//   - hands out, in a ServiceReport, the service it gave each tenant since its previous
//     report: deltas in counter units (prompt x input_weight + output x output_weight,
//     divided by the tenant's weight; an output correction may be negative). The shell
//     publishes it beside its routing events (the gateway: a field of the same stream
//     entry; the simulator: after the sync lag);
//   - adds its peers' reported service to its counters (FlowQueue::add_peer_service),
//     so its queue orders by its own plus the peers' service. Its own is never counted
//     twice: its own reports are skipped, and what it adds from peers is not service of
//     its own, so it is never reported on.
//
// Staleness: a peer's service reaches this replica's order one publish interval plus one
// read interval plus Redis's latency after it was given (the gateway: flush_max_ms, or
// flush_ms in a pool with room sharing, + poll_ms + a round trip or two); in the
// simulator, the sync lag.
//
// Per peer it keeps the last sequence number (a gap is counted; what the lost reports
// carried is not counted anywhere) and when the peer was last heard from; a peer silent
// for `peer_timeout` is forgotten. What a peer added stays in the counters: VTC counters
// keep the service given, and taking a dead peer's service back out would put the
// tenants it served ahead of every other tenant until they caught up again. (A tenant
// that comes back from idle is lifted to the backlogged tenants' floor anyway, so old
// service weighs only on tenants that stay backlogged.)
//
// When the shell loses the sync (Redis away) it calls fall_back(): no report arrives, so
// the queue orders by this replica's own service from then on (its counters keep what
// they had learnt); fleet() says so, stats().fallbacks counts it, and the first peer's
// report applied after it ends it.
//
//   FleetFairness fair(flow.queue(), "gw-1", "chat", {});
//   ... every flush:  if (auto r = fair.take(heartbeat)) publish(encode(*r));
//   ... on a peer's:  fair.apply(decode_service_report(wire).value(), now);
//   ... now and then: fair.expire(now);
//
// Deterministic; thread-safety: none (on the strand of the queue it borrows).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/cluster/peer_reports.h"
#include "core/common/result.h"
#include "core/common/time.h"
#include "core/route/flow_queue.h"

namespace kvgate::cluster {

struct TenantService {
  std::string tenant;
  double service = 0;  // counter units given since the publisher's previous report

  bool operator==(const TenantService&) const = default;
};

// What one replica tells the others about its service, for one pool.
struct ServiceReport {
  std::string replica;  // the publisher's replica_id
  std::string pool;
  uint64_t seq = 0;  // per publisher and pool, +1 per report (from 1)
  std::vector<TenantService> tenants;

  bool operator==(const ServiceReport&) const = default;
};

// Compact binary form: a version byte, the replica and pool as text, varints, each
// tenant's name and its service as an 8-byte IEEE double. About 12 bytes plus the name
// per tenant.
void encode(const ServiceReport& report, std::string& out);
std::string encode(const ServiceReport& report);
// Error on a truncated, malformed or unknown-version input, or a service that is not
// finite (never reads past the input).
Result<ServiceReport> decode_service_report(std::string_view wire);

class FleetFairness {
 public:
  struct Options {
    Nanos peer_timeout = 15 * kSecond;  // silent this long: forgotten
  };
  struct Stats {
    uint64_t reports_published = 0;  // reports take() handed out
    uint64_t reports_applied = 0;    // peers' reports applied
    uint64_t tenants_applied = 0;    // peers' per-tenant service added
    uint64_t gaps = 0;               // peers' reports missed (sequence numbers skipped)
    uint64_t dead_peers = 0;         // forgotten after peer_timeout of silence
    uint64_t fallbacks = 0;          // times the order fell back to this replica's own service
  };

  // Borrows `queue` for its lifetime (and sets it to track its service: take()). `self`
  // is this replica's id: its own reports, read back from a shared stream, are skipped.
  FleetFairness(route::FlowQueue& queue, std::string self, std::string pool, Options options);

  // The service given here since the last report, per tenant, as one report (sequence
  // number assigned); nullopt when there was none, unless `heartbeat`: then an empty
  // report, so that the peers know this replica lives.
  std::optional<ServiceReport> take(bool heartbeat = false);
  // Adds a peer's reported service to this replica's counters, at `now`. Reports of this
  // replica itself are skipped; the pool name is the caller's to check.
  void apply(const ServiceReport& report, Nanos now);
  // Forgets the peers silent for peer_timeout.
  void expire(Nanos now);
  // The sync is lost (Redis away): the order is by this replica's own service until a
  // peer's report is applied again. Counted once per loss.
  void fall_back();

  // True while the order counts some peer's service: the sync is not lost and a peer was
  // heard from within peer_timeout.
  bool fleet(Nanos now) const { return !fallen_back_ && live_peers(now) > 0; }
  bool fallen_back() const { return fallen_back_; }
  size_t live_peers(Nanos now) const;
  // The service each peer added here since it was first heard from, by tenant (admin
  // views and tests).
  double peer_service(std::string_view peer, std::string_view tenant) const;
  const Stats& stats() const { return stats_; }

 private:
  struct Peer {
    uint64_t last_seq = 0;
    std::unordered_map<std::string, double> service;  // by tenant
  };

  route::FlowQueue& queue_;
  std::string self_;
  std::string pool_;
  uint64_t next_seq_ = 1;
  PeerReports<Peer> peers_;  // forgotten after options.peer_timeout
  bool fallen_back_ = false;
  Stats stats_;
  std::vector<std::pair<std::string_view, double>> scratch_;
};

}  // namespace kvgate::cluster
