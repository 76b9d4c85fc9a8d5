// HotPrefixes: the pool's most used prompt prefixes, kept so that a new replica can be
// warmed up with them before it takes traffic.
//
// The kv indexes name prefixes by block key only; to warm an engine the gateway needs the
// prefix itself (token ids, or text). So the tracker remembers, for every routed prompt,
// a few of its prefixes that end on a block boundary, at the depths 1..8, 10, 12, 14, 16,
// 20, 24, 28, 32, 40, ... blocks (four per power of two: the deepest depth not past a
// shared system prompt covers at least 80% of it) and at the prompt's last full block. Each
// entry counts its hits with exponential decay (`half_life`). An entry stores its prefix
// (tokens or text) only from its second hit on, so the unique tails of prompts cost a
// key and a count, never a copy.
//
// top(k) picks what is worth sending to a cold engine: entries hit at least twice,
// ranked by decayed hits x blocks (the prefill work a cached copy would have saved
// recently), and no entry together with one of its own ancestors (warming the deeper
// one caches the shorter one too; the deeper one replaces it).
//
// Memory is bounded: at most `capacity` entries and `max_stored_tokens` stored tokens
// (text counts its pseudo-tokens); past either, the least hit half is dropped.
//
//   HotPrefixes hot(/*block_size=*/16);
//   hot.observe(keys, {.token_ids = ids}, now);     // every routed request
//   for (const HotPrefix& p : hot.top(16, now)) send(p.token_ids or p.text, max_tokens 1);
//
// Not thread-safe: the caller serialises (the gateway holds a mutex, the simulator is
// single-threaded).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/common/time.h"
#include "core/kv/block_hash.h"

namespace kvgate::kv {

struct HotPrefixOptions {
  size_t capacity = 4096;                      // entries
  uint32_t max_blocks = 512;                   // deepest prefix remembered, in blocks
  size_t max_stored_tokens = size_t{1} << 22;  // ~16 MB of token ids
  Nanos half_life = 300 * kSecond;             // a hit counts half after this long
};

// A prompt as the tracker can store its prefixes: the token ids the keys were hashed
// from, or (when the caller hashed pseudo-tokens of `bytes_per_token` bytes of text, the
// gateway's fallback without a tokenizer) the text.
struct PromptView {
  std::span<const TokenId> token_ids;  // non-empty: real tokens
  std::string_view text;               // used when token_ids is empty
  uint32_t bytes_per_token = 4;
};

struct HotPrefix {
  BlockKey key = 0;                // key of its last block
  uint32_t blocks = 0;             // length in blocks
  double hits = 0;                 // decayed to the `now` of top()
  std::vector<TokenId> token_ids;  // blocks x block_size tokens; empty when text is set
  std::string text;
};

class HotPrefixes {
 public:
  // REQUIRES: block_size > 0.
  explicit HotPrefixes(uint32_t block_size, HotPrefixOptions options = {});

  // One routed prompt: `keys` are its block keys (hash_blocks of the tokens in `prompt`).
  void observe(std::span<const BlockKey> keys, const PromptView& prompt, Nanos now);

  // Up to k prefixes worth warming, best first (see the header comment).
  std::vector<HotPrefix> top(size_t k, Nanos now) const;

  size_t size() const { return entries_.size(); }
  size_t stored_tokens() const { return stored_tokens_; }
  uint32_t block_size() const { return block_size_; }

  // The depths (in blocks) at which a prompt of `blocks` full blocks is remembered,
  // ascending: 1..8, 10, 12, 14, 16, 20, ... up to min(blocks, max_blocks), plus that.
  static std::vector<uint32_t> depths(uint32_t blocks, uint32_t max_blocks);

 private:
  struct Entry {
    double hits = 0;  // as of `at`
    Nanos at = 0;
    uint32_t blocks = 0;
    BlockKey parent = 0;  // key of the previous remembered depth; 0: none
    bool has_parent = false;
    std::vector<TokenId> token_ids;
    std::string text;
    size_t stored() const;
  };
  double decayed(const Entry& e, Nanos now) const;
  void store_prefix(Entry& e, const PromptView& prompt);
  void prune(Nanos now);

  const uint32_t block_size_;
  const HotPrefixOptions options_;
  std::unordered_map<BlockKey, Entry> entries_;
  size_t stored_tokens_ = 0;
};

// Several gateway replicas (cluster/hot_prefix_share.h): the best k of this replica's
// top() and its peers', ranked as top() ranks (hits x blocks). A prefix in several lists
// (the same last block key) counts with all their hits; a prefix whose content begins
// another chosen one is left out (warming the deeper one caches it too).
std::vector<HotPrefix> merge_hot_prefixes(std::span<const std::vector<HotPrefix>> lists, size_t k);

}  // namespace kvgate::kv
