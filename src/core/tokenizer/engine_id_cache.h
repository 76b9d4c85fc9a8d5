// EngineIdCache: token ids the engines computed for requests (POST /tokenize, the engine
// fallback), by conversation prefix, so that an engine is asked once per conversation
// turn at most and a follow-up can be routed on the ids of the conversation so far.
//
// Keyed by a request's key chain (tokenize_call.h): the last key names the whole
// request, key i the conversation through message i. lookup() finds the longest prefix
// of the chain whose ids are stored: the whole request (an exact hit), or an earlier
// turn of the same conversation (a follow-up: the turns before its new messages).
//
// Storage is shared along a conversation: an entry holds the key of the longest stored
// earlier turn (its parent), how many of the parent's ids it starts with, and only the
// ids after those. A conversation of n turns costs its final length once, not n times.
// (A turn's ids need not all be a prefix of the next turn's: its generation prompt, or
// a template that renders the last turn differently, may differ, hence the count.)
// Bounded by `max_bytes`, least recently used entries go first; using an entry uses its
// ancestors. An entry whose ancestor was evicted or replaced (other ids for the same key)
// is no longer found.
//
// Not thread-safe: lock around it.
//
//   EngineIdCache cache(64 << 20);
//   std::vector<uint32_t> ids;
//   size_t n = cache.lookup(call.chain, ids);   // == call.chain.size(): exact
//   ... ask the engine on a miss ...
//   cache.insert(call.chain, engine_ids);
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/tokenizer/tokenize_call.h"

namespace kvgate::tokenizer {

class EngineIdCache {
 public:
  explicit EngineIdCache(size_t max_bytes) : max_bytes_(max_bytes) {}

  // The longest prefix of `chain` stored: returns how many keys it covers (0: none;
  // chain.size(): the whole request) and replaces `out` with its ids (left empty on 0).
  size_t lookup(std::span<const PrefixKey> chain, std::vector<uint32_t>& out);
  // Stores `ids` as the ids of the whole request `chain` names (replacing any).
  void insert(std::span<const PrefixKey> chain, std::span<const uint32_t> ids);

  size_t bytes() const { return bytes_; }
  size_t entries() const { return map_.size(); }
  void clear();

 private:
  struct KeyHash {
    size_t operator()(const PrefixKey& k) const { return k.lo; }
  };
  struct Entry {
    uint64_t serial = 0;         // this version of the key's ids (a replaced one gets another)
    PrefixKey parent;            // {0, 0}: none
    uint64_t parent_serial = 0;  // the parent's version this entry was built on
    uint32_t shared = 0;         // the parent's first `shared` ids start this entry's
    std::vector<uint32_t> ids;   // the ids after those
    std::list<PrefixKey>::iterator lru;
  };

  // Replaces `out` with the ids of `key`; false when it or an ancestor is gone.
  bool collect(const PrefixKey& key, std::vector<uint32_t>& out);
  void erase(std::unordered_map<PrefixKey, Entry, KeyHash>::iterator it);
  void evict();
  static size_t cost(const Entry& e);

  size_t max_bytes_;
  size_t bytes_ = 0;
  uint64_t next_serial_ = 1;
  std::unordered_map<PrefixKey, Entry, KeyHash> map_;
  std::list<PrefixKey> lru_;         // front = most recently used
  std::vector<const Entry*> chain_;  // scratch of collect
};

}  // namespace kvgate::tokenizer
