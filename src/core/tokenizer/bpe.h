// The BPE model: vocabulary and merge ranks, applied to one pre-token.
//
// Two modes, as the tokenizer's pre-tokenizer decides:
// - byte-level (a ByteLevel pre-tokenizer): works on raw bytes (the byte-level alphabet of
//   tokenizer.json is decoded at build time); a word starts as one token per byte.
// - characters (SentencePiece-style BPE: Llama 2, Gemma): the vocabulary is plain UTF-8; a
//   word starts as one token per character (with continuing_subword_prefix before all but
//   the first and end_of_word_suffix after the last); a character missing from the
//   vocabulary becomes its <0xNN> byte tokens (byte_fallback) or the unk token (fused with
//   a neighbouring unk when fuse_unk), or is dropped when there is neither.
// Then the adjacent pair with the lowest merge rank is merged (leftmost first on ties)
// until no pair has a rank, exactly like the Hugging Face BPE model without dropout.
// Immutable after build(); encode_word is thread-safe.
//
//   auto bpe = BpeModel::build(std::move(vocab), merges, /*ignore_merges=*/false);
//   std::vector<uint32_t> ids;
//   bpe->encode_word(" hello", ids);
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/common/result.h"

namespace kvgate::tokenizer {

class BpeModel {
 public:
  struct VocabEntry {
    std::string bytes;
    uint32_t id;
    // false: a byte-level vocabulary's entry outside the byte alphabet (e.g. DeepSeek's
    // added tokens): BPE can never produce it, so it is kept for decoding only and its
    // `bytes` are its UTF-8 text.
    bool reachable = true;
  };
  struct Merge {
    std::string left, right;  // raw bytes
  };

  struct Options {
    bool byte_level = true;
    // ignore_merges: a word that is itself in the vocabulary becomes that one token
    // without merging (Llama 3).
    bool ignore_merges = false;
    // The rest applies to the character mode only.
    std::string unk_token;  // empty: none
    bool fuse_unk = false;
    bool byte_fallback = false;
    std::string continuing_subword_prefix, end_of_word_suffix;
  };

  // Merge i has rank i (a pair listed twice keeps its last rank, as the library's map).
  static Result<BpeModel> build(std::vector<VocabEntry> vocab, const std::vector<Merge>& merges,
                                const Options& options);
  static Result<BpeModel> build(std::vector<VocabEntry> vocab, const std::vector<Merge>& merges,
                                bool ignore_merges) {
    Options o;
    o.ignore_merges = ignore_merges;
    return build(std::move(vocab), merges, o);
  }

  // Appends the ids of `word` (raw bytes, non-empty) to `out`.
  void encode_word(std::string_view word, std::vector<uint32_t>& out) const;

  // encode_word without the shortcuts (pre-merged characters, whole-word lookups): plain
  // BPE from bytes or characters. For tests that check the shortcuts change nothing.
  void encode_word_from_bytes(std::string_view word, std::vector<uint32_t>& out) const;

  // Bytes of token `id`; empty for ids the model does not have.
  std::string_view token_bytes(uint32_t id) const {
    return id + 1 < offsets_.size()
               ? std::string_view(bytes_).substr(offsets_[id], offsets_[id + 1] - offsets_[id])
               : std::string_view();
  }
  // True for a VocabEntry built with reachable == false.
  bool unreachable(uint32_t id) const { return id < unreachable_.size() && unreachable_[id]; }
  // Id of the token with exactly these bytes, or -1.
  int64_t token_id(std::string_view bytes) const;
  size_t vocab_size() const { return vocab_size_; }
  bool byte_level() const { return byte_level_; }
  // True when characters are pre-merged (byte-level mode, monotone ranks; see .cc).
  bool premerge() const { return premerge_; }
  // True when a character without a token cuts a long character-mode word (see .cc).
  bool fallback_inert() const { return fallback_inert_; }
  // Bytes of heap memory held (for the memory benchmark).
  size_t memory_bytes() const;

 private:
  struct PairSlot {
    uint64_t key;  // left << 32 | right; kEmpty when free
    uint32_t rank;
    uint32_t merged;
  };
  static constexpr uint64_t kEmpty = ~0ULL;
  static constexpr uint32_t kNoRank = ~0U;
  static constexpr uint32_t kNoId = ~0U;
  static constexpr size_t kShortWord = 24;  // longer words take the heap path
  static constexpr size_t kStackSymbols = 256;
  static constexpr int kFilterBits = 21;

  // The short-token table: tokens of 1..kInlineKey bytes with their bytes inline, so that
  // a whole-word lookup costs one hash and one slot (no byte table, no memcmp). It holds
  // the self-merging tokens, or every reachable token under ignore_merges.
  static constexpr size_t kInlineKey = 16;
  struct ShortSlot {
    uint64_t a, b;     // the bytes, as short_key() packs them
    uint32_t id;       // | kSelfMerging
    uint32_t len = 0;  // 0: free
  };
  static constexpr uint32_t kSelfMerging = 1U << 31;
  // REQUIRES: 1 <= n <= kInlineKey. Packs the n bytes at p (with n, a unique key).
  static void short_key(const char* p, size_t n, uint64_t& a, uint64_t& b) {
    if (n >= 8) {
      __builtin_memcpy(&a, p, 8);
      __builtin_memcpy(&b, p + n - 8, 8);
    } else if (n >= 4) {
      uint32_t x, y;
      __builtin_memcpy(&x, p, 4);
      __builtin_memcpy(&y, p + n - 4, 4);
      a = x;
      b = y;
    } else {
      a = static_cast<unsigned char>(p[0]) | static_cast<unsigned char>(p[n / 2]) << 8 |
          static_cast<uint64_t>(static_cast<unsigned char>(p[n - 1])) << 16;
      b = 0;
    }
  }
  static uint64_t short_hash(uint64_t a, uint64_t b, size_t n) {
    const uint64_t h = (a * 0x9E3779B97F4A7C15ULL) ^ (b * 0xC2B2AE3D27D4EB4FULL) ^ n;
    return (h ^ (h >> 29)) * 0xBF58476D1CE4E5B9ULL;
  }
  // The id of the token whose bytes are exactly `word` when BPE makes that one token of it
  // (self-merging), or, with `any` (ignore_merges only), when it is a token at all; else -1.
  int64_t whole_token(std::string_view word, bool any) const {
    if (word.size() <= kInlineKey) {
      uint64_t a, b;
      short_key(word.data(), word.size(), a, b);
      const size_t mask = short_.size() - 1;
      for (size_t i = short_hash(a, b, word.size()) >> short_shift_;; i = (i + 1) & mask) {
        const ShortSlot& s = short_[i];
        if (s.len == 0) return -1;
        if (s.a == a && s.b == b && s.len == word.size())
          return any || (s.id & kSelfMerging) ? static_cast<int64_t>(s.id & ~kSelfMerging) : -1;
      }
    }
    if (!any && word.size() > kShortWord) return -1;
    const int64_t id = token_id(word);
    return id >= 0 && (any || self_merging_[static_cast<size_t>(id)]) ? id : -1;
  }
  void init_short_table();

  // Rank and merged id of (left, right); rank kNoRank when they do not merge.
  // Most adjacent pairs do not merge; a 256 KiB bit filter (fits in L2) answers most of
  // those without touching the multi-megabyte pair table.
  std::pair<uint32_t, uint32_t> lookup(uint32_t left, uint32_t right) const {
    const uint64_t key = (static_cast<uint64_t>(left) << 32) | right;
    const uint64_t h = key * 0x9E3779B97F4A7C15ULL;
    const uint64_t bit = h >> (64 - kFilterBits);
    if (!(filter_[bit >> 6] & (1ULL << (bit & 63)))) return {kNoRank, 0};
    size_t i = h >> shift_;
    while (true) {
      const PairSlot& s = pairs_[i];
      if (s.key == key) return {s.rank, s.merged};
      if (s.key == kEmpty) return {kNoRank, 0};
      i = (i + 1) & (pairs_.size() - 1);
    }
  }
  // The symbols BPE starts from: one per byte, except that a multi-byte character which
  // is provably merged into its own single token before anything else touches it starts
  // as that token (bpe_premerge.cc explains when). Returns the count written to `sym`.
  // REQUIRES: sym has room for word.size() entries.
  size_t initial_symbols(std::string_view word, uint32_t* sym) const;
  // True when no vocabulary token straddles the boundary between characters x and y
  // while holding only part of one of them (conservative: may say false wrongly).
  bool sealed(std::string_view x, std::string_view y) const;
  void init_premerge();
  // The character mode's initial symbols (merge_word of the library). Returns the count.
  // REQUIRES: sym has room for max_char_symbols(word.size()) entries.
  size_t initial_char_symbols(std::string_view word, uint32_t* sym) const;
  size_t max_char_symbols(size_t bytes) const {
    return bytes * (1 + prefix_.size()) + suffix_.size() + 1;
  }
  uint32_t char_id(std::string_view ch, bool first, bool last) const;
  void merge(const uint32_t* init, size_t n, std::vector<uint32_t>& out) const {
    if (n <= kShortWord) {
      merge_short(init, n, out);
    } else {
      merge_long(init, n, out);
    }
  }
  void merge_short(const uint32_t* init, size_t n, std::vector<uint32_t>& out) const;
  void merge_long(const uint32_t* init, size_t n, std::vector<uint32_t>& out) const;

  std::string bytes_;               // all token bytes, by id
  std::vector<uint32_t> offsets_;   // token id -> offset in bytes_ (size max_id + 2)
  std::vector<uint32_t> by_bytes_;  // open addressing on the bytes' hash: token id or kNoId
  size_t vocab_size_ = 0;
  std::vector<PairSlot> pairs_;
  std::vector<uint64_t> filter_;  // 2^kFilterBits bits, set for every merge's hash
  int shift_ = 64;
  uint32_t byte_ids_[256] = {};
  // Pre-merging of characters (enabled when the merge ranks are monotone, see .cc).
  bool premerge_ = false;
  // Token ids whose own bytes BPE turns into exactly that token: a word equal to such a
  // token is looked up instead of merged (exact, BPE is a function of the word).
  std::vector<bool> self_merging_;
  std::vector<ShortSlot> short_;  // see whole_token
  int short_shift_ = 64;
  std::vector<uint32_t> whole_char_;  // BMP code point -> its single token, or kNoId
  std::vector<uint64_t> straddle_;    // bit filter of (left part, right part) pairs
  bool ignore_merges_ = false;
  // Character mode.
  bool byte_level_ = true;
  uint32_t unk_id_ = kNoId;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  uint32_t fallback_ids_[256] = {};  // <0xNN> token ids, kNoId when absent
  std::string prefix_, suffix_;
  // BMP code point -> its token (no prefix/suffix) | kPairsLeft | kPairsRight, or kNoId.
  // The flags say whether the character sits before (left) or after (right) another
  // character inside some vocabulary token; ids fit in 24 bits (build() checks).
  static constexpr uint32_t kPairsLeft = 1U << 30, kPairsRight = 1U << 29;
  static constexpr uint32_t kIdMask = (1U << 24) - 1;
  std::vector<uint32_t> char_ids_;
  // Character mode: every character without a token becomes byte tokens that no merge
  // takes (byte_fallback with all 256 <0xNN> tokens, none in a merge): such a character
  // is a hard cut, its bytes go straight to the output.
  bool fallback_inert_ = false;
  std::vector<bool> unreachable_;  // by id; empty when every entry is reachable
  // Character mode: a bit filter of the adjacent character pairs inside any vocabulary
  // token (empty: no chunking). A long word is cut between two characters that both have
  // their own token and never sit side by side in a token: no merge can cross there (the
  // merged token would hold them side by side), so BPE of the pieces is BPE of the word.
  static constexpr int kPairBits = 22;
  std::vector<uint64_t> char_pairs_;
  static uint64_t pair_bit(char32_t a, char32_t b) {
    return ((static_cast<uint64_t>(a) * 0x9E3779B97F4A7C15ULL) ^
            (static_cast<uint64_t>(b) * 0xC2B2AE3D27D4EB4FULL)) >>
           (64 - kPairBits);
  }
  bool may_pair(char32_t a, char32_t b) const {
    const uint64_t bit = pair_bit(a, b);
    return (char_pairs_[bit >> 6] >> (bit & 63)) & 1;
  }
  void encode_chars(std::string_view word, std::vector<uint32_t>& out) const;
  // A long character-mode word (char_pairs_ set): cut into chunks no merge crosses, each
  // chunk's symbols collected in the same pass (`sym`: room for word.size() entries).
  void encode_chunked(std::string_view word, uint32_t* sym, std::vector<uint32_t>& out) const;
};

}  // namespace kvgate::tokenizer
