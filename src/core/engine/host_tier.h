// HostTier: the host-memory copies of an engine's KV blocks (vLLM's CPU offloading); the
// EngineModel keeps a second one for its disk tier (EngineConfig::num_disk_blocks).
//
// A fixed number of block slots, keyed by the engine's block hash and kept in LRU order.
// The EngineModel offloads a cached block here when its GPU memory is handed out again,
// and a request whose prefix continues here past its GPU hits loads those blocks back
// (which touches them). When the tier is full an offload drops the least recently used
// copy. Every operation is O(1) expected; the slots are allocated once.
//
//   HostTier host(4096);
//   std::vector<EngineBlockHash> dropped;
//   if (host.offload(hash, dropped)) { /* a new copy: BlockStored(CPU) */ }
//   if (host.contains(next)) host.touch(next);  // a hit, loaded back
//
// Deterministic: the order of operations alone decides what is kept.
// Thread-safety: none; owned by one EngineModel.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "core/common/index_list.h"
#include "core/kv/kv_event.h"

namespace kvgate::engine {

class HostTier {
 public:
  // capacity 0: the tier is off (offload() keeps nothing).
  explicit HostTier(uint32_t capacity);

  uint32_t capacity() const { return static_cast<uint32_t>(nodes_.size()); }
  size_t size() const { return index_.size(); }
  bool contains(kv::EngineBlockHash hash) const { return index_.count(hash) != 0; }

  // Keeps a copy of `hash` as the most recently used. True if the copy is new; false if
  // it was already here (then only touched) or the tier is off. A new copy in a full tier
  // first drops the least recently used one, appended to `dropped`.
  bool offload(kv::EngineBlockHash hash, std::vector<kv::EngineBlockHash>& dropped);
  // Marks `hash` most recently used; nothing if it is not here. True if it is here.
  bool touch(kv::EngineBlockHash hash);
  // Forgets every copy.
  void clear();

 private:
  static constexpr uint32_t kNil = UINT32_MAX;
  struct Node {
    kv::EngineBlockHash hash = 0;
    uint32_t prev = kNil;  // towards the least recently used
    uint32_t next = kNil;  // towards the most recently used
  };
  void unlink(uint32_t n);
  void push_back(uint32_t n);

  std::vector<Node> nodes_;
  std::vector<uint32_t> free_;
  std::unordered_map<kv::EngineBlockHash, uint32_t> index_;
  IndexList lru_;  // head: the least recently used; tail: the most recently used
};

}  // namespace kvgate::engine
