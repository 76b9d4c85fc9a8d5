// ApproxIndex: the prefix index a router keeps from its own routing history.
//
// What SGLang's router does: every decision "request with these block keys went to
// endpoint E" is recorded, and later requests are assumed to find that prefix there.
// It needs nothing from the engines, but it cannot see evictions, so entries expire
// after a TTL (default 120 s, refreshed on reuse), and when the index exceeds its
// capacity it prunes to 80% of it, deepest blocks first, so that the shared prefixes
// (system prompts, early turns) survive longest.
//
//   ApproxIndex index({.ttl = 120 * kSecond, .capacity_pairs = 1 << 22});
//   index.record(endpoint, keys, now);  // after each routing decision
//   index.match(keys, now, matches);
//
// Thread-safety: none; owned by the router's strand.
#pragma once

#include <memory>

#include "core/kv/prefix_index.h"

namespace kvgate::kv {

class ApproxIndex final : public PrefixIndex {
 public:
  struct Options {
    Nanos ttl = 120 * kSecond;
    size_t capacity_pairs = size_t{1} << 22;  // (block, endpoint) pairs kept
  };

  explicit ApproxIndex(Options options);
  ~ApproxIndex() override;
  ApproxIndex(const ApproxIndex&) = delete;
  ApproxIndex& operator=(const ApproxIndex&) = delete;

  // Records that the request with `keys` was routed to `endpoint` at `now`; refreshes
  // the TTL of the keys already recorded there.
  // REQUIRES: endpoint < kMaxEndpoints.
  void record(EndpointId endpoint, std::span<const BlockKey> keys, Nanos now);

  // Drops every entry older than now - ttl. match ignores expired entries anyway; call
  // this now and then to reclaim their memory.
  void expire(Nanos now);

  // Blocks recorded per endpoint and not expired at `now`: out[id] (resized to cover
  // every endpoint that holds something). One walk over the whole index: for
  // inspection (the admin API), not the hot path.
  void blocks_held(Nanos now, std::vector<size_t>& out) const;

  // Snapshots of the index (several gateway replicas: cluster/index_snapshot.h). One
  // (block, endpoint) pair: `depth` is the block's position in the prompts that
  // recorded it, `last_use` when it was last recorded there.
  struct Held {
    BlockKey key = 0;
    uint32_t depth = 0;
    EndpointId endpoint = 0;
    Nanos last_use = 0;
  };
  // Appends every pair not expired at `now`, in the index's own order (restoring them in
  // this order keeps the layout that makes match() fast).
  void export_pairs(Nanos now, std::vector<Held>& out) const;
  // Adds a pair as record() would have left it at `held.last_use` (a later use already
  // recorded stays); false, and nothing changes, when it is expired at `now`.
  // REQUIRES: held.endpoint < kMaxEndpoints.
  bool restore(const Held& held, Nanos now);

  // PrefixIndex. Everything recorded counts as GPU-resident (gpu_blocks == total_blocks).
  void match(std::span<const BlockKey> keys, Nanos now, std::vector<EndpointMatch>& out) override;
  void remove_endpoint(EndpointId endpoint) override;
  size_t memory_bytes() const override;
  size_t distinct_blocks() const override;
  size_t held_pairs() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvgate::kv
