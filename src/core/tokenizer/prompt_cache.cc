#include "core/tokenizer/prompt_cache.h"

#include <xxhash.h>

#include <memory>

namespace kvgate::tokenizer {
namespace {
constexpr size_t kEntryOverhead = 96;  // map node, list node, vector header
}

void PromptCache::clear() {
  map_.clear();
  lru_.clear();
  bytes_ = 0;
}

bool PromptCache::collect(const Key& key, std::vector<uint32_t>& out) {
  chain_.clear();
  for (Key k = key; !(k == kRoot);) {
    auto it = map_.find(k);
    if (it == map_.end()) return false;
    chain_.push_back(&it->second);
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    k = it->second.parent;
  }
  for (size_t i = chain_.size(); i-- > 0;)
    out.insert(out.end(), chain_[i]->ids.begin(), chain_[i]->ids.end());
  return true;
}

void PromptCache::insert(const Key& key, const Key& parent, std::vector<uint32_t> ids) {
  if (map_.count(key)) return;
  const size_t cost = ids.size() * sizeof(uint32_t) + kEntryOverhead;
  if (cost > max_bytes_) return;
  lru_.push_front(key);
  map_.emplace(key, Entry{parent, std::move(ids), lru_.begin()});
  bytes_ += cost;
  evict();
}

void PromptCache::evict() {
  while (bytes_ > max_bytes_ && !lru_.empty()) {
    auto it = map_.find(lru_.back());
    bytes_ -= it->second.ids.size() * sizeof(uint32_t) + kEntryOverhead;
    map_.erase(it);
    lru_.pop_back();
  }
}

Status PromptCache::encode(const Tokenizer& tok, std::string_view text, std::vector<uint32_t>& out,
                           Stats* stats) {
  out.clear();
  // Boundaries of the whole text and the hash of the prefix before each.
  boundaries_.clear();
  if (Status st = tok.find_boundaries(text, boundaries_); !st) return st;
  keys_.clear();
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(),
                                                                 &XXH3_freeState);
  XXH3_128bits_reset(state.get());
  size_t hashed = 0;
  for (const Boundary& b : boundaries_) {
    XXH3_128bits_update(state.get(), text.data() + hashed, b.text_end - hashed);
    hashed = b.text_end;
    const XXH128_hash_t h = XXH3_128bits_digest(state.get());
    Key k{h.low64, h.high64};
    if (k == kRoot) k.lo = 1;
    keys_.push_back(k);
  }
  // Longest cached prefix whose whole chain is still present.
  size_t start = 0;
  Key parent = kRoot;
  size_t first_new = 0;  // index of the first boundary after the reused prefix
  for (size_t i = keys_.size(); i-- > 0;) {
    if (!map_.count(keys_[i])) continue;
    if (collect(keys_[i], out)) {
      start = boundaries_[i].text_end;
      parent = keys_[i];
      first_new = i + 1;
      break;
    }
    out.clear();
  }
  if (stats) {
    stats->reused_ids = out.size();
    stats->reused_bytes = start;
  }
  // Encode the rest and remember its prefixes.
  const size_t base = out.size();
  std::vector<Boundary> fresh;
  if (Status st = tok.encode_into(text.substr(start), out, &fresh); !st) return st;
  size_t prev_ids = 0;
  for (size_t j = 0; j < fresh.size() && first_new + j < keys_.size(); ++j) {
    // fresh[j] is boundaries_[first_new + j], shifted by `start`.
    const Key& k = keys_[first_new + j];
    std::vector<uint32_t> seg(out.begin() + static_cast<ptrdiff_t>(base + prev_ids),
                              out.begin() + static_cast<ptrdiff_t>(base + fresh[j].ids));
    insert(k, parent, std::move(seg));
    if (!map_.count(k)) break;  // too big for the cache: later links would dangle
    parent = k;
    prev_ids = fresh[j].ids;
  }
  return {};
}

}  // namespace kvgate::tokenizer
