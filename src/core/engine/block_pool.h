// BlockPool: the paged KV memory of one engine, with a prefix cache keyed by content.
//
// N blocks, each referenced by the requests using it. A block whose tokens are all
// computed can be committed under its content hash; from then on a request with the same
// prefix can take a reference to it instead of computing it. When its last reference is
// dropped a committed block stays cached but becomes free: it sits in an LRU free list
// and is evicted (its hash forgotten, a BlockRemoved reported) only when its memory is
// handed out again. Uncommitted free blocks are handed out first (they cost nothing).
//
// Every operation is O(1): an open-addressing hash table (linear probing, sized for the
// pool, never rehashed) plus an intrusive doubly-linked free list; nothing allocates
// after construction.
// Thread-safety: none; owned by one EngineModel.
#pragma once

#include <cstdint>
#include <vector>

#include "core/common/index_list.h"
#include "core/kv/kv_event.h"

namespace kvgate::engine {

using kv::EngineBlockHash;

using BlockId = uint32_t;
inline constexpr BlockId kNoBlock = UINT32_MAX;
static_assert(kNoBlock == kIndexNil);

class BlockPool {
 public:
  // REQUIRES: num_blocks > 0
  BlockPool(uint32_t num_blocks, bool enable_caching);

  uint32_t num_blocks() const { return static_cast<uint32_t>(blocks_.size()); }
  // Blocks with no reference, cached or not: what allocate() can hand out.
  uint32_t num_free() const { return num_free_; }
  // Fraction of blocks referenced by requests (vLLM's kv_cache_usage_perc).
  double usage() const;
  // Committed blocks (referenced or free).
  size_t num_cached() const { return num_cached_; }

  // The cached block holding `hash`, or kNoBlock.
  BlockId lookup(EngineBlockHash hash) const;
  // Starts loading the table slot lookup(hash) reads first (a hint; no effect on
  // results), so that a walk over a prompt's hashes overlaps its cache misses.
  void prefetch(EngineBlockHash hash) const {
    __builtin_prefetch(&slots_[static_cast<size_t>(hash) & mask_]);
  }
  // Takes a reference on a cached block (found by lookup); a free one leaves the free
  // list.
  void acquire(BlockId block);
  // Takes a block from the free list (uncommitted ones first, then least recently
  // freed) with one reference. If it was cached, its hash is forgotten and appended to
  // `evicted`. REQUIRES: num_free() > 0
  BlockId allocate(std::vector<EngineBlockHash>& evicted);
  // Drops a reference. At zero, a committed block goes to the tail of the LRU list (the
  // last to be evicted), an uncommitted one to the head.
  void release(BlockId block);
  // Commits `block` under `hash`. False (and nothing changes) if caching is off, the
  // block is already committed, or another block already holds `hash`.
  bool commit(BlockId block, EngineBlockHash hash);
  // Forgets every cached hash. False (and nothing changes) unless no block is
  // referenced, as vLLM's reset_prefix_cache.
  bool reset();

  uint32_t ref_count(BlockId block) const { return blocks_[block].refs; }
  bool is_cached(BlockId block) const { return blocks_[block].committed; }

 private:
  struct Block {
    EngineBlockHash hash = 0;
    uint32_t refs = 0;
    BlockId prev = kNoBlock;  // free-list links (free_list_), valid while refs == 0
    BlockId next = kNoBlock;
    bool committed = false;
  };

  // Hash table slot: a block id, or kNoBlock when empty; the key is blocks_[id].hash.
  size_t slot_of(EngineBlockHash hash) const;  // the slot holding hash, or an empty one
  void erase_slot(size_t slot);

  void unlink(BlockId b);
  void push_front(BlockId b);
  void push_back(BlockId b);

  std::vector<Block> blocks_;
  std::vector<BlockId> slots_;  // power of two >= 2 x blocks
  size_t mask_ = 0;
  size_t num_cached_ = 0;
  // The free blocks: head next to hand out, tail the most recently freed committed block.
  IndexList free_list_;
  uint32_t num_free_ = 0;
  bool enable_caching_;
};

}  // namespace kvgate::engine
