// Which ready replicas are the standby ones (the horizon policy's `standby`, horizon.h):
// started and kept out of routing so that a burst finds them warm.
//
// The youngest ready replicas are the standby ones (they have the least cache worth
// routing to), and never all of them: one replica at least keeps routing. The gateway
// and the simulator both call this through route::plan_standby
// (core/route/endpoint_holds.h), on their own notion of "ready at" (the endpoint's
// addition to the router, the replica's readiness).
//
//   std::vector<bool> out = pick_standby(ready_at, decision.standby);
//   // out[i]: replica i (of `ready_at`) is out of routing.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/common/time.h"

namespace kvgate::scale {

// `ready_at[i]`: when ready replica i became ready. Ties go by index: the later index is
// the younger. Returns one flag per replica; at most min(count, size - 1) are set.
std::vector<bool> pick_standby(std::span<const Nanos> ready_at, int32_t count);

}  // namespace kvgate::scale
