// FleetRoom: the demand reports through which the flow-control queues of several gateway
// replicas learn who shares the pool's room with them, and how much waits in each queue
// (docs/flow-control.md, "Sharing the room"; the rule is route/room_share.h).
//
// Each replica publishes, beside its routing events, a DemandReport: the requests waiting
// in its queue by band. It goes out when the queue's length changed since the last one,
// and with the once-a-second heartbeat (the gateway: stream field "q" of the routing
// stream's entry; the simulator: after the sync lag). Each replica keeps its peers' last
// reports and hands them to its FlowController (set_room_fleet), which releases only its
// share of the room. A peer silent for `peer_timeout` is forgotten. With no peer (one
// replica, or the sync lost: fall_back()) the controller takes the whole room, as a
// single gateway; the first peer's report after a fall-back shares it again.
//
// Staleness: a peer's demand here is one publish interval plus one read interval plus
// Redis's round trips old (the simulator: the sync lag); `window` (the controller's) is
// the same bound for this replica's own releases.
//
//   FleetRoom room(flow, "gw-1", "chat", {.window = 12 * kMillisecond});
//   ... every flush:  if (auto r = room.take(heartbeat)) publish(encode(*r));
//   ... on a peer's:  room.apply(decode_demand_report(wire).value(), now);
//   ... now and then: room.expire(now);
//
// Deterministic; thread-safety: none (on the strand of the controller it borrows).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/cluster/peer_reports.h"
#include "core/common/result.h"
#include "core/common/time.h"
#include "core/route/flow_control.h"

namespace kvgate::cluster {

// What one replica's queue holds, for the others.
struct DemandReport {
  std::string replica;  // the publisher's replica_id
  std::string pool;
  uint64_t seq = 0;                              // per publisher and pool, +1 per report
  std::array<uint32_t, route::kBands> queued{};  // requests waiting, by band

  bool operator==(const DemandReport&) const = default;
};

// A version byte, the replica and pool as text, varints: the sequence number and the
// three bands' counts. About 10 bytes plus the two names.
void encode(const DemandReport& report, std::string& out);
std::string encode(const DemandReport& report);
// Error on a truncated, malformed or unknown-version input (never reads past it).
Result<DemandReport> decode_demand_report(std::string_view wire);

class FleetRoom {
 public:
  struct Options {
    Nanos peer_timeout = 15 * kSecond;  // silent this long: forgotten
    Nanos window = 0;                   // FlowController::RoomFleet::window
  };
  struct Stats {
    uint64_t reports_published = 0;
    uint64_t reports_applied = 0;
    uint64_t dead_peers = 0;  // forgotten after peer_timeout of silence
    uint64_t fallbacks = 0;   // times the room fell back to this replica's whole view
  };

  // Borrows `flow` for its lifetime. `self` is this replica's id (its own reports, read
  // back from a shared stream, are skipped).
  FleetRoom(route::FlowController& flow, std::string self, std::string pool, Options options);

  // This replica's demand as a report (sequence number assigned) when it changed since
  // the last one, or always with `heartbeat`; nullopt otherwise.
  std::optional<DemandReport> take(bool heartbeat = false);
  // A peer's report at `now`: its demand replaces what it said before, and the
  // controller shares the room with it. Own reports are skipped; the pool is the caller's
  // to check.
  void apply(const DemandReport& report, Nanos now);
  // Forgets the peers silent for peer_timeout.
  void expire(Nanos now);
  // The sync is lost (Redis away): every peer is forgotten and the controller takes the
  // whole room until a peer's report comes again. Counted once per loss.
  void fall_back();
  // Wall clock less the controller's clock (the gateway), so that the replicas agree on
  // the window's offset; the simulator leaves it 0.
  void set_epoch_offset(Nanos offset);

  size_t peers() const { return peers_.size(); }
  const Stats& stats() const { return stats_; }

 private:
  // Hands the peers to the controller.
  void update();

  route::FlowController& flow_;
  std::string self_;
  std::string pool_;
  Options options_;
  Nanos epoch_offset_ = 0;
  uint64_t next_seq_ = 1;
  std::optional<std::array<uint32_t, route::kBands>> last_sent_;
  PeerReports<std::array<uint32_t, route::kBands>> peers_;  // queued, by band
  bool fallen_back_ = false;
  Stats stats_;
};

}  // namespace kvgate::cluster
