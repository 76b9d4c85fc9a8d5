#include "core/engine/block_pool.h"

#include <cassert>

namespace kvgate::engine {

BlockPool::BlockPool(uint32_t num_blocks, bool enable_caching)
    : blocks_(num_blocks), enable_caching_(enable_caching) {
  by_hash_.reserve(enable_caching ? num_blocks : 0);
  for (BlockId b = 0; b < num_blocks; ++b) push_back(b);
}

double BlockPool::usage() const {
  if (blocks_.empty()) return 0;
  return static_cast<double>(blocks_.size() - num_free_) / static_cast<double>(blocks_.size());
}

BlockId BlockPool::lookup(EngineBlockHash hash) const {
  auto it = by_hash_.find(hash);
  return it == by_hash_.end() ? kNoBlock : it->second;
}

void BlockPool::acquire(BlockId b) {
  Block& block = blocks_[b];
  if (block.refs++ == 0) unlink(b);
}

BlockId BlockPool::allocate(std::vector<EngineBlockHash>& evicted) {
  assert(num_free_ > 0);
  const BlockId b = head_;
  unlink(b);
  Block& block = blocks_[b];
  if (block.committed) {
    by_hash_.erase(block.hash);
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
  auto [it, inserted] = by_hash_.try_emplace(hash, b);
  if (!inserted) return false;
  block.hash = hash;
  block.committed = true;
  return true;
}

bool BlockPool::reset() {
  if (num_free_ != blocks_.size()) return false;
  by_hash_.clear();
  for (Block& block : blocks_) block.committed = false;
  return true;
}

void BlockPool::unlink(BlockId b) {
  Block& block = blocks_[b];
  if (block.prev != kNoBlock) {
    blocks_[block.prev].next = block.next;
  } else {
    head_ = block.next;
  }
  if (block.next != kNoBlock) {
    blocks_[block.next].prev = block.prev;
  } else {
    tail_ = block.prev;
  }
  block.prev = block.next = kNoBlock;
  --num_free_;
}

void BlockPool::push_front(BlockId b) {
  Block& block = blocks_[b];
  block.prev = kNoBlock;
  block.next = head_;
  if (head_ != kNoBlock) {
    blocks_[head_].prev = b;
  } else {
    tail_ = b;
  }
  head_ = b;
  ++num_free_;
}

void BlockPool::push_back(BlockId b) {
  Block& block = blocks_[b];
  block.next = kNoBlock;
  block.prev = tail_;
  if (tail_ != kNoBlock) {
    blocks_[tail_].next = b;
  } else {
    head_ = b;
  }
  tail_ = b;
  ++num_free_;
}

}  // namespace kvgate::engine
