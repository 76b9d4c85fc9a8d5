// Room sharing: how the flow-control queues of several gateway replicas share the pool's
// room (docs/flow-control.md, "Sharing the room").
//
// Each replica keeps a queue of its own and releases from it while some endpoint has room
// (FlowController::has_capacity). Its view of the endpoints lags its peers' releases by
// the sync's staleness, so four replicas that see the same free slot each release into
// it: the engines' own queues fill again, and the order between tenants that the gateway
// queues kept is lost there (first come, first served in the engine). With room sharing
// each replica releases only its share of the room:
//
//   - the fleet's room F, as this replica sees it: the free slots of the pool in its view
//     (RoomSlots) plus its own releases its peers cannot have seen yet (those of the last
//     `window`, the staleness bound), since those slots were free before it took them;
//   - each replica's share x_i of F (room_shares): when the fleet's demand fits in F,
//     every replica its demand and an equal part of the rest; else, by RoomShare:
//       kSplit   max-min fair: equal parts, none above its demand (water-filling);
//       kDemand  one slot to each replica that has demand, the rest in proportion to its
//                demand beyond that one (when F has less than one slot per such replica,
//                equal parts: each holds the turn as often as the others);
//   - its whole slots (room_allotment): the shares laid end to end in replica-id order
//     and cut at the integers shifted by an offset in [0, 1) that every replica draws
//     alike from the current window (room_offset): each replica gets floor(x_i) or
//     ceil(x_i) slots, ceil(x_i) with probability x_i - floor(x_i) over the windows, and
//     the replicas' slots add up to F exactly when their views agree. So one free slot
//     goes to one replica, a different one from window to window.
//
// The replica releases while its releases within the window are fewer than its slots.
// Deterministic: the caller passes the time; pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "core/common/time.h"

namespace kvgate::route {

enum class RoomShare : uint8_t {
  kNone,    // each replica takes the whole room it sees (one replica: always)
  kSplit,   // max-min fair parts among the replicas with demand
  kDemand,  // in proportion to each replica's demand, one slot each first
};
std::string_view to_string(RoomShare share);
std::optional<RoomShare> parse_room_share(std::string_view text);  // none|split|demand

// Each replica's share of `room` slots (out[i] for demand[i]; out.size() ==
// demand.size()). The shares add up to `room` (0 when there is no replica).
void room_shares(RoomShare share, uint32_t room, std::span<const uint32_t> demand,
                 std::span<double> out);

// Replica `index`'s whole slots of `shares` (in replica-id order, every replica's), cut
// at the integers shifted by `offset` (in [0, 1)).
uint32_t room_allotment(std::span<const double> shares, size_t index, double offset);

// The offset of the window that holds `time` (a time the replicas agree on), the same in
// every replica: a hash of the window's index, in [0, 1). `window` > 0.
double room_offset(Nanos time, Nanos window);

}  // namespace kvgate::route
