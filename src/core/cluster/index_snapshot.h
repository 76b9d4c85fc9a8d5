// IndexSnapshot: one gateway replica's approximate prefix index as its peers can load it.
//
// The routing stream (routing_event.h) carries every decision, but it is bounded
// (MAXLEN) and gone when Redis restarts without persistence; a replica that starts, or
// comes back after such an outage, would route blind until new decisions fill its
// index. So each replica now and then writes its index, named by endpoint URL (peers
// number their endpoints differently), with the stream id its view includes; a
// starting replica loads the newest snapshot, then reads the stream from that id on.
// Ages, not times, travel (each process has its own monotonic clock): a pair restored
// `elapsed` after the snapshot was taken is as old as it was then plus `elapsed`.
//
//   IndexSnapshot s = take_snapshot(approx, router.pool(), now, "gw-1", last_stream_id);
//   std::string wire = encode(s);                  // SET PREFIX:snapshot:POOL
//   ...
//   Result<IndexSnapshot> back = decode_snapshot(wire);
//   RestoreStats r = restore_snapshot(*back, approx, router.pool(), now, elapsed);
//
// Deterministic; thread-safety: none (the index's owner, the router's strand).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.h"
#include "core/common/time.h"
#include "core/kv/approx_index.h"
#include "core/route/endpoint_pool.h"

namespace kvgate::cluster {

struct IndexSnapshot {
  std::string replica;                 // who took it
  std::string stream_id;               // the routing stream's last id its view includes; "" none
  std::vector<std::string> endpoints;  // URLs; Pair::endpoint indexes this
  struct Pair {
    kv::BlockKey key = 0;
    uint32_t depth = 0;
    uint32_t endpoint = 0;
    Nanos age = 0;  // since last recorded, when the snapshot was taken
  };
  std::vector<Pair> pairs;  // in the index's own order
};

// The index's pairs not expired at `now`; endpoints the pool no longer has are left out.
IndexSnapshot take_snapshot(const kv::ApproxIndex& index, const route::EndpointPool& pool,
                            Nanos now, std::string replica, std::string stream_id);

struct RestoreStats {
  size_t restored = 0;
  size_t unknown_endpoint = 0;  // pairs of endpoints this pool lacks
  size_t expired = 0;           // older than the index's TTL by now
};
// Loads `s` into `index` at `now`, `elapsed` after it was taken; endpoints are matched by
// URL in `pool`.
RestoreStats restore_snapshot(const IndexSnapshot& s, kv::ApproxIndex& index,
                              const route::EndpointPool& pool, Nanos now, Nanos elapsed);

// Compact binary form: varints, keys as 8 bytes, ages in milliseconds; consecutive
// pairs of one block share its key.
std::string encode(const IndexSnapshot& s);
Result<IndexSnapshot> decode_snapshot(std::string_view wire);

}  // namespace kvgate::cluster
