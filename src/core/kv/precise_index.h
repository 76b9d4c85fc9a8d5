// PreciseIndex: the prefix index fed by the engines' KV cache events.
//
// vLLM-style engines publish BlockStored / BlockRemoved / AllBlocksCleared events (see
// docs/protocols.md). Their block hashes are opaque: they depend on engine version,
// settings and a per-process seed, so the index never tries to reproduce them. It
// recomputes its own chained keys (block_hash.h) from each event's token ids and keeps,
// per endpoint, the engine-hash -> own-key mapping that removals and parent lookups need.
//
// A bad event (unknown parent, removal of an unknown block, block-size mismatch) never
// corrupts the index: it is ignored and counted per endpoint in EventStats, and the
// caller should resync that endpoint (clear_endpoint, then replay).
//
// Memory is bounded by `capacity_blocks` distinct blocks; beyond it the least recently
// stored-or-matched blocks are forgotten for every endpoint (LRU).
//
//   PreciseIndex index({.model = "qwen3", .block_size = 16});
//   index.apply_stored(ep, {.block_hashes = h, .token_ids = t, .block_size = 16});
//   index.match(request_keys, now, matches);
//
// Thread-safety: none; owned by the router's strand.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/kv/prefix_index.h"

namespace kvgate::kv {

// Without token_ids (and parent), an event names blocks the endpoint already stored, by
// their engine hashes, that now also sit in `medium`: what vLLM's CPU offloading
// connector sends when it copies blocks to host memory (and a disk tier when it writes
// them to disk). The index keeps per (block, endpoint) the set of media it is held in;
// match() reports the GPU run, the run in any tier, and the blocks of that run past the
// GPU run held on disk only (EndpointMatch). Each such block gains the medium;
// one the endpoint never stored is counted (EventStats::unknown_copied) and skipped.
struct BlockStoredEvent {
  std::span<const uint64_t> block_hashes;     // the engine's own hashes, one per block
  std::optional<uint64_t> parent_block_hash;  // engine hash of the parent; none = root
  std::span<const TokenId> token_ids;         // block_hashes.size() * block_size tokens
  uint32_t block_size = 0;
  std::string_view lora_name;  // empty: the base model
  // The request's cache salt, read only when the chain starts at the root (no parent):
  // the root is then seeded as block_seed(model, lora_name, cache_salt), the seed the
  // gateway gives a request with that salt. Empty: no salt.
  std::string_view cache_salt;
  Medium medium = Medium::kGpu;
};

struct BlockRemovedEvent {
  std::span<const uint64_t> block_hashes;
  Medium medium = Medium::kGpu;
};

// Per-endpoint event accounting; the anomalies tell the caller to resync.
struct EventStats {
  uint64_t stored_blocks = 0;
  uint64_t removed_blocks = 0;
  uint64_t cleared = 0;
  uint64_t unknown_parent = 0;       // BlockStored whose parent the endpoint never stored
  uint64_t unknown_removed = 0;      // BlockRemoved of a block the endpoint does not hold
  uint64_t block_size_mismatch = 0;  // wrong block_size, or token count != n * block_size
  uint64_t unknown_copied = 0;       // BlockStored without tokens of a block never stored
  uint64_t anomalies() const {
    return unknown_parent + unknown_removed + block_size_mismatch + unknown_copied;
  }
};

class PreciseIndex final : public PrefixIndex {
 public:
  struct Options {
    std::string model;           // mixed into the root seed (block_seed)
    uint32_t block_size = 16;    // the pool's block size; events must match it
    size_t capacity_blocks = 0;  // distinct blocks kept; 0 = unbounded
  };

  explicit PreciseIndex(Options options);
  ~PreciseIndex() override;
  PreciseIndex(const PreciseIndex&) = delete;
  PreciseIndex& operator=(const PreciseIndex&) = delete;

  // REQUIRES: endpoint < kMaxEndpoints (for all endpoint arguments below).
  void apply_stored(EndpointId endpoint, const BlockStoredEvent& event);
  void apply_removed(EndpointId endpoint, const BlockRemovedEvent& event);
  void apply_all_cleared(EndpointId endpoint);

  // Forgets what `endpoint` holds but keeps its statistics (for a resync).
  void clear_endpoint(EndpointId endpoint);

  // Stats of an endpoint; all zero for one never seen.
  EventStats stats(EndpointId endpoint) const;
  // Distinct blocks `endpoint` holds in any tier.
  size_t blocks_held(EndpointId endpoint) const;

  // PrefixIndex
  void match(std::span<const BlockKey> keys, Nanos now, std::vector<EndpointMatch>& out) override;
  void remove_endpoint(EndpointId endpoint) override;
  size_t memory_bytes() const override;
  size_t distinct_blocks() const override;
  size_t held_pairs() const override;

 private:
  // apply_stored of an event without tokens: copies of known blocks in another medium.
  void apply_copied(EndpointId endpoint, const BlockStoredEvent& event);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvgate::kv
