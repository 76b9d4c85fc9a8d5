#include "core/engine/block_pool.h"

#include <algorithm>
#include <cassert>

namespace kvgate::engine {

BlockPool::BlockPool(uint32_t num_blocks, bool enable_caching)
    : blocks_(num_blocks), enable_caching_(enable_caching) {
  size_t slots = 1;
  while (slots < 2 * static_cast<size_t>(num_blocks)) slots <<= 1;
  slots_.assign(enable_caching ? slots : 1, kNoBlock);
  mask_ = slots_.size() - 1;
  for (BlockId b = 0; b < num_blocks; ++b) push_back(b);
}

double BlockPool::usage() const {
  if (blocks_.empty()) return 0;
  return static_cast<double>(blocks_.size() - num_free_) / static_cast<double>(blocks_.size());
}

size_t BlockPool::slot_of(EngineBlockHash hash) const {
  // Engine hashes are xxh3 outputs: their low bits are already uniform.
  size_t i = static_cast<size_t>(hash) & mask_;
  while (slots_[i] != kNoBlock && blocks_[slots_[i]].hash != hash) i = (i + 1) & mask_;
  return i;
}

void BlockPool::erase_slot(size_t i) {
  // Backward-shift deletion keeps every probe chain unbroken without tombstones.
  size_t j = i;
  while (true) {
    j = (j + 1) & mask_;
    if (slots_[j] == kNoBlock) break;
    const size_t home = static_cast<size_t>(blocks_[slots_[j]].hash) & mask_;
    // Move slots_[j] into the hole at i unless its home lies cyclically in (i, j].
    const bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
    if (stays) continue;
    slots_[i] = slots_[j];
    i = j;
  }
  slots_[i] = kNoBlock;
  --num_cached_;
}

BlockId BlockPool::lookup(EngineBlockHash hash) const {
  if (num_cached_ == 0) return kNoBlock;
  return slots_[slot_of(hash)];
}

void BlockPool::acquire(BlockId b) {
  Block& block = blocks_[b];
  if (block.refs++ == 0) unlink(b);
}

BlockId BlockPool::allocate(std::vector<EngineBlockHash>& evicted) {
  assert(num_free_ > 0);
  const BlockId b = free_list_.head;
  unlink(b);
  Block& block = blocks_[b];
  if (block.committed) {
    erase_slot(slot_of(block.hash));
    evicted.push_back(block.hash);
    block.committed = false;
  }
  block.refs = 1;
  return b;
}

void BlockPool::release(BlockId b) {
  Block& block = blocks_[b];
  assert(block.refs > 0);
  if (--block.refs > 0) return;
  if (block.committed) {
    push_back(b);
  } else {
    push_front(b);
  }
}

bool BlockPool::commit(BlockId b, EngineBlockHash hash) {
  Block& block = blocks_[b];
  if (!enable_caching_ || block.committed) return false;
  const size_t slot = slot_of(hash);
  if (slots_[slot] != kNoBlock) return false;
  block.hash = hash;
  block.committed = true;
  slots_[slot] = b;
  ++num_cached_;
  return true;
}

bool BlockPool::reset() {
  if (num_free_ != blocks_.size()) return false;
  std::fill(slots_.begin(), slots_.end(), kNoBlock);
  num_cached_ = 0;
  for (Block& block : blocks_) block.committed = false;
  return true;
}

void BlockPool::unlink(BlockId b) {
  free_list_.unlink(blocks_, b);
  --num_free_;
}

void BlockPool::push_front(BlockId b) {
  free_list_.push_front(blocks_, b);
  ++num_free_;
}

void BlockPool::push_back(BlockId b) {
  free_list_.push_back(blocks_, b);
  ++num_free_;
}

}  // namespace kvgate::engine
