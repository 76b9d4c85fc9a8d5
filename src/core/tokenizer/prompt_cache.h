// Multi-turn reuse of token ids: a chat re-sends its earlier turns, so the ids of the
// prompt's already-seen prefix are taken from this cache and only the new text is
// tokenized. The result is always identical to Tokenizer::encode of the whole text.
//
// Why it is exact: prefixes are cut only right after an added token (e.g. <|im_end|>).
// Added tokens are split out before normalization and pre-tokenization, so nothing
// (BPE merges, the split regex, NFC) crosses such a point: encoding text[0, p) and
// text[p, n) separately gives the ids of text[0, n). (tokenizer.h, Boundary.)
//
// Entries are keyed by a 128-bit hash of the prefix text; each holds the ids between its
// boundary and the previous one plus the key of that previous prefix, so a conversation
// costs its token count once, not once per turn. Bounded by `max_bytes`, least recently
// used entries go first. Not thread-safe: one cache per thread, or lock around it. Use
// one cache per tokenizer.
//
//   PromptCache cache(64 << 20);
//   std::vector<uint32_t> ids;
//   Status st = cache.encode(tok, prompt_text, ids);
#pragma once

#include <cstdint>
#include <list>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/common/result.h"
#include "core/tokenizer/tokenizer.h"

namespace kvgate::tokenizer {

class PromptCache {
 public:
  explicit PromptCache(size_t max_bytes) : max_bytes_(max_bytes) {}

  struct Stats {
    size_t reused_ids = 0;    // ids taken from the cache
    size_t reused_bytes = 0;  // text bytes not tokenized again
  };
  // Replaces `out` with the ids of `text`; errors as Tokenizer::encode.
  Status encode(const Tokenizer& tok, std::string_view text, std::vector<uint32_t>& out,
                Stats* stats = nullptr);

  size_t bytes() const { return bytes_; }
  size_t entries() const { return map_.size(); }
  void clear();

 private:
  struct Key {
    uint64_t lo, hi;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const { return k.lo; }
  };
  struct Entry {
    Key parent;                 // key of the previous boundary's prefix; kRoot at start
    std::vector<uint32_t> ids;  // ids from the previous boundary to this one
    std::list<Key>::iterator lru;
  };
  static constexpr Key kRoot{0, 0};

  // Appends the ids of the prefix `key` to `out` (oldest first); false when a link is gone.
  bool collect(const Key& key, std::vector<uint32_t>& out);
  void insert(const Key& key, const Key& parent, std::vector<uint32_t> ids);
  void evict();

  size_t max_bytes_;
  size_t bytes_ = 0;
  std::unordered_map<Key, Entry, KeyHash> map_;
  std::list<Key> lru_;  // front = most recently used
  // Scratch, kept to avoid allocations.
  std::vector<Boundary> boundaries_;
  std::vector<Key> keys_;
  std::vector<const Entry*> chain_;
};

}  // namespace kvgate::tokenizer
