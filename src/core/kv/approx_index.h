// ApproxIndex: the prefix index a router keeps from its own routing history.
//
// What SGLang's router does: every decision "request with these block keys went to
// endpoint E" is recorded, and later requests are assumed to find that prefix there.
// It needs nothing from the engines, but it cannot see evictions, so entries expire
// after a TTL (default 120 s, refreshed on reuse), and when the index exceeds its
// capacity it prunes to 80% of it, deepest blocks first, so that the shared prefixes
// (system prompts, early turns) survive longest.
//
// An optional host tier (host_ttl > 0; off by default) models engines that offload
// evicted blocks to CPU memory (vLLM's CPU offloading, the engine model's host tier): a
// (block, endpoint) pair whose GPU TTL runs out, or that capacity pruning would drop,
// moves to the host tier for host_ttl more instead of being dropped. There it counts
// toward the match's any-tier run (total_blocks) but not its GPU run (gpu_blocks), so
// kv-cost credits it with cpu_block_credit, as it does the precise index's CPU blocks.
// Recording the block again on that endpoint brings it back to the GPU tier.
//
//   ApproxIndex index({.ttl = 120 * kSecond, .capacity_pairs = 1 << 22});
//   index.record(endpoint, keys, now);  // after each routing decision
//   index.match(keys, now, matches);
//
// State: per (block, endpoint) pair its endpoint, a host flag and the time of its last
// record (16 bytes), per block its key and depth; nothing else grows. A pair is on the
// GPU tier while unflagged and last_use >= now - ttl, held in either tier while
// last_use >= now - ttl - host_ttl (a pair moved for capacity at t gets last_use
// t - ttl - 1). Flags are set when the index is pruned or expire() runs (between those,
// match() reads the tiers from the times alone). Memory: at most capacity_pairs
// unflagged pairs plus host_capacity_pairs flagged ones after each record() (0: no
// bound), plus the pairs of the request being recorded.
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
    // (block, endpoint) pairs kept on the GPU tier (0: no bound). Over it, the index
    // prunes to 80% of it, deepest blocks first: dropping them, or with a host tier
    // moving them there.
    size_t capacity_pairs = size_t{1} << 22;
    // The host tier: how long a pair stays there after leaving the GPU tier (0: no host
    // tier; everything behaves as without one).
    Nanos host_ttl = 0;
    // Pairs kept on the host tier (0: no bound). Over it, the host tier is pruned to 80%
    // of it, deepest blocks first.
    size_t host_capacity_pairs = size_t{1} << 22;
  };

  explicit ApproxIndex(Options options);
  ~ApproxIndex() override;
  ApproxIndex(const ApproxIndex&) = delete;
  ApproxIndex& operator=(const ApproxIndex&) = delete;

  // Records that the request with `keys` was routed to `endpoint` at `now`; refreshes
  // the TTL of the keys already recorded there (back on the GPU tier if they had left it).
  // REQUIRES: endpoint < kMaxEndpoints.
  void record(EndpointId endpoint, std::span<const BlockKey> keys, Nanos now);

  // Drops every entry older than now - ttl - host_ttl (with a host tier, also moves the
  // ones past the GPU tier to the host tier's count, and prunes that tier to its
  // capacity). match ignores expired entries anyway; call this now and then to reclaim
  // their memory.
  void expire(Nanos now);

  // Blocks recorded per endpoint and not expired at `now`, in either tier: out[id] (resized to
  // cover every endpoint that holds something). One walk over the whole index: for inspection (the
  // admin API), not the hot path.
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
  // Appends every pair not expired at `now` (in either tier), in the index's own order
  // (restoring them in this order keeps the layout that makes match() fast).
  void export_pairs(Nanos now, std::vector<Held>& out) const;
  // Adds a pair as record() would have left it at `held.last_use` (a later use already
  // recorded stays; on the host tier when that use is older than now - ttl); false, and
  // nothing changes, when it is expired at `now`.
  // REQUIRES: held.endpoint < kMaxEndpoints.
  bool restore(const Held& held, Nanos now);

  // PrefixIndex. Without a host tier everything recorded counts as GPU-resident
  // (gpu_blocks == total_blocks); with one, gpu_blocks is the leading run on the GPU tier
  // and total_blocks the leading run in either tier.
  void match(std::span<const BlockKey> keys, Nanos now, std::vector<EndpointMatch>& out) override;
  void remove_endpoint(EndpointId endpoint) override;
  size_t memory_bytes() const override;
  size_t distinct_blocks() const override;
  size_t held_pairs() const override;
  // Pairs flagged as on the host tier (0 without one); held_pairs() counts them too.
  size_t host_pairs() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvgate::kv
