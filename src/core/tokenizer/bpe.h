// The byte-level BPE model: vocabulary and merge ranks, applied to one pre-token.
//
// Works on raw bytes (the byte-level alphabet of tokenizer.json is decoded at build time).
// A word starts as one token per byte; the adjacent pair with the lowest merge rank is
// merged (leftmost first on ties) until no pair has a rank, exactly like the Hugging Face
// BPE model without dropout. Immutable after build(); encode_word is thread-safe.
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
  };
  struct Merge {
    std::string left, right;  // raw bytes
  };

  // Merge i has rank i. ignore_merges: a word that is itself in the vocabulary becomes
  // that one token without merging (Llama 3).
  static Result<BpeModel> build(std::vector<VocabEntry> vocab, const std::vector<Merge>& merges,
                                bool ignore_merges);

  // Appends the ids of `word` (raw bytes, non-empty) to `out`.
  void encode_word(std::string_view word, std::vector<uint32_t>& out) const;

  // Bytes of token `id`; empty for ids the model does not have.
  std::string_view token_bytes(uint32_t id) const {
    return id + 1 < offsets_.size()
               ? std::string_view(bytes_).substr(offsets_[id], offsets_[id + 1] - offsets_[id])
               : std::string_view();
  }
  // Id of the token with exactly these bytes, or -1.
  int64_t token_id(std::string_view bytes) const;
  size_t vocab_size() const { return vocab_size_; }
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
  static constexpr int kFilterBits = 21;

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
  void merge_short(std::string_view word, std::vector<uint32_t>& out) const;
  void merge_long(std::string_view word, std::vector<uint32_t>& out) const;

  std::string bytes_;               // all token bytes, by id
  std::vector<uint32_t> offsets_;   // token id -> offset in bytes_ (size max_id + 2)
  std::vector<uint32_t> by_bytes_;  // open addressing on the bytes' hash: token id or kNoId
  size_t vocab_size_ = 0;
  std::vector<PairSlot> pairs_;
  std::vector<uint64_t> filter_;  // 2^kFilterBits bits, set for every merge's hash
  int shift_ = 64;
  uint32_t byte_ids_[256] = {};
  bool ignore_merges_ = false;
};

}  // namespace kvgate::tokenizer
