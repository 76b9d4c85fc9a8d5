#include "core/engine/host_tier.h"

namespace kvgate::engine {

HostTier::HostTier(uint32_t capacity) : nodes_(capacity) {
  free_.reserve(capacity);
  for (uint32_t i = capacity; i > 0; --i) free_.push_back(i - 1);
  index_.reserve(capacity);
}

bool HostTier::offload(kv::EngineBlockHash hash, std::vector<kv::EngineBlockHash>& dropped) {
  if (nodes_.empty()) return false;
  if (auto it = index_.find(hash); it != index_.end()) {
    unlink(it->second);
    push_back(it->second);
    return false;
  }
  if (free_.empty()) {
    const uint32_t victim = lru_.head;
    unlink(victim);
    dropped.push_back(nodes_[victim].hash);
    index_.erase(nodes_[victim].hash);
    free_.push_back(victim);
  }
  const uint32_t n = free_.back();
  free_.pop_back();
  nodes_[n].hash = hash;
  push_back(n);
  index_.emplace(hash, n);
  return true;
}

bool HostTier::touch(kv::EngineBlockHash hash) {
  auto it = index_.find(hash);
  if (it == index_.end()) return false;
  unlink(it->second);
  push_back(it->second);
  return true;
}

void HostTier::clear() {
  index_.clear();
  free_.clear();
  for (uint32_t i = capacity(); i > 0; --i) free_.push_back(i - 1);
  for (Node& n : nodes_) n = Node{};
  lru_ = IndexList{};
}

void HostTier::unlink(uint32_t n) { lru_.unlink(nodes_, n); }

void HostTier::push_back(uint32_t n) { lru_.push_back(nodes_, n); }

}  // namespace kvgate::engine
