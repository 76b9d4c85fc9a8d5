#include "core/tokenizer/engine_id_cache.h"

#include <algorithm>

namespace kvgate::tokenizer {
namespace {
constexpr size_t kEntryOverhead = 112;  // map node, list node, vector header
constexpr PrefixKey kNone{};
}  // namespace

size_t EngineIdCache::cost(const Entry& e) {
  return e.ids.size() * sizeof(uint32_t) + kEntryOverhead;
}

void EngineIdCache::clear() {
  map_.clear();
  lru_.clear();
  bytes_ = 0;
}

bool EngineIdCache::collect(const PrefixKey& key, std::vector<uint32_t>& out) {
  chain_.clear();
  uint64_t serial = 0;  // the version the entry below was built on; 0: any
  for (PrefixKey k = key; !(k == kNone);) {
    auto it = map_.find(k);
    if (it == map_.end()) return false;
    if (serial != 0 && it->second.serial != serial) return false;  // replaced since
    chain_.push_back(&it->second);
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    serial = it->second.parent_serial;
    k = it->second.parent;
  }
  out.clear();
  for (size_t i = chain_.size(); i-- > 0;) {
    const Entry& e = *chain_[i];
    out.resize(std::min<size_t>(e.shared, out.size()));
    out.insert(out.end(), e.ids.begin(), e.ids.end());
  }
  return true;
}

size_t EngineIdCache::lookup(std::span<const PrefixKey> chain, std::vector<uint32_t>& out) {
  for (size_t i = chain.size(); i-- > 0;) {
    auto it = map_.find(chain[i]);
    if (it == map_.end()) continue;
    if (collect(chain[i], out)) return i + 1;
    erase(it);  // an ancestor is gone: so is this entry's meaning
  }
  out.clear();
  return 0;
}

void EngineIdCache::insert(std::span<const PrefixKey> chain, std::span<const uint32_t> ids) {
  if (chain.empty()) return;
  const PrefixKey key = chain.back();
  std::vector<uint32_t> before;
  if (auto it = map_.find(key); it != map_.end()) {
    // Stored already (two requests asked at once): kept when equal, so that the later
    // turns stored on it stay valid.
    if (collect(key, before) && std::equal(before.begin(), before.end(), ids.begin(), ids.end()))
      return;
    erase(map_.find(key));
  }
  // Shares with the longest stored earlier turn.
  Entry e;
  size_t found = lookup(chain.first(chain.size() - 1), before);
  if (found > 0) {
    const size_t shared =
        std::mismatch(before.begin(), before.end(), ids.begin(), ids.end()).first - before.begin();
    if (shared > 0) {
      e.parent = chain[found - 1];
      e.parent_serial = map_.find(e.parent)->second.serial;
      e.shared = static_cast<uint32_t>(shared);
    }
  }
  e.ids.assign(ids.begin() + e.shared, ids.end());
  e.serial = next_serial_++;
  if (cost(e) > max_bytes_) return;
  lru_.push_front(key);
  e.lru = lru_.begin();
  bytes_ += cost(e);
  map_.emplace(key, std::move(e));
  evict();
}

void EngineIdCache::erase(std::unordered_map<PrefixKey, Entry, KeyHash>::iterator it) {
  bytes_ -= cost(it->second);
  lru_.erase(it->second.lru);
  map_.erase(it);
}

void EngineIdCache::evict() {
  while (bytes_ > max_bytes_ && !lru_.empty()) erase(map_.find(lru_.back()));
}

}  // namespace kvgate::tokenizer
