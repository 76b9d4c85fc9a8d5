// Pre-merging whole characters before BPE: an exact shortcut for non-Latin text.
//
// Byte-level BPE spends most of its work on CJK text re-assembling each character from
// its 2-4 bytes. kvgate starts such a character as its own token when that provably
// gives the same result:
//
// 1. c alone becomes one token T, and every merge of c's own bytes ranks below every
//    merge that takes T as input (precomputed for the BMP at load).
// 2. Sealed boundaries: no vocabulary token contains a proper part of c together with
//    bytes of a neighbour (checked per neighbour pair against a filter of all such
//    straddling (left part, right part) pairs in the vocabulary).
// By 2 no merge can join part of c with anything outside c: c's bytes evolve exactly as
// c alone does and independently of the rest. By 1, while c is incomplete one of its own
// pairs ranks below any pair with T, so in the byte-level run c completes before the
// first pair with T could be chosen: the outside sees the same merges in both runs.
// The conformance test compares with the reference on CJK-heavy text.
#include <algorithm>

#include "core/common/unicode.h"
#include "core/tokenizer/bpe.h"

namespace kvgate::tokenizer {

using unicode::append_utf8;
using unicode::decode_utf8;

namespace {

constexpr int kStraddleBits = 20;

// Length of the UTF-8 sequence a lead byte starts (1 for ASCII, 0 for a continuation).
size_t seq_len(unsigned char b) {
  if (b < 0x80) return 1;
  if (b < 0xC0) return 0;
  if (b < 0xE0) return 2;
  if (b < 0xF0) return 3;
  return 4;
}

// Bytes (at most 4) and their count packed in one word.
inline uint64_t pack(std::string_view s) {
  uint64_t v = s.size();
  for (char ch : s) v = (v << 8) | static_cast<unsigned char>(ch);
  return v;
}

inline uint64_t straddle_hash(std::string_view left, std::string_view right) {
  const uint64_t h = (pack(left) * 0x9E3779B97F4A7C15ULL) ^ pack(right);
  return (h * 0xC2B2AE3D27D4EB4FULL) >> (64 - kStraddleBits);
}

struct Segment {
  std::string_view bytes;
  bool partial;
};

// Cuts a token's bytes into characters and partial characters.
std::vector<Segment> segments(std::string_view t) {
  std::vector<Segment> out;
  size_t i = 0;
  while (i < t.size()) {
    const auto b = static_cast<unsigned char>(t[i]);
    const size_t need = seq_len(b);
    size_t j = i + 1;
    if (need == 0) {  // a run of continuation bytes: the end of some character
      while (j < t.size() && j - i < 3 && seq_len(static_cast<unsigned char>(t[j])) == 0) ++j;
      out.push_back({t.substr(i, j - i), true});
    } else {
      while (j < t.size() && j - i < need && seq_len(static_cast<unsigned char>(t[j])) == 0) ++j;
      out.push_back({t.substr(i, j - i), j - i != need});
    }
    i = j;
  }
  return out;
}

}  // namespace

void BpeModel::init_premerge() {
  // Lowest rank of any merge that takes a token as input.
  std::vector<uint32_t> min_use(offsets_.size(), kNoRank);
  for (const PairSlot& s : pairs_) {
    if (s.key == kEmpty) continue;
    const auto a = static_cast<uint32_t>(s.key >> 32), b = static_cast<uint32_t>(s.key);
    min_use[a] = std::min(min_use[a], s.rank);
    min_use[b] = std::min(min_use[b], s.rank);
  }
  // Straddling pairs.
  straddle_.assign(size_t{1} << (kStraddleBits - 6), 0);
  for (uint32_t id = 0; id + 1 < offsets_.size(); ++id) {
    const std::string_view t = token_bytes(id);
    if (t.size() < 2) continue;
    const auto segs = segments(t);
    for (size_t k = 0; k + 1 < segs.size(); ++k) {
      if (!segs[k].partial && !segs[k + 1].partial) continue;
      const uint64_t bit = straddle_hash(segs[k].bytes, segs[k + 1].bytes);
      straddle_[bit >> 6] |= 1ULL << (bit & 63);
    }
  }
  // BMP characters that BPE alone turns into one token T, all of whose merges rank
  // below every merge that uses T.
  whole_char_.assign(0x10000, kNoId);
  std::string bytes;
  for (char32_t cp = 0x80; cp < 0x10000; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    bytes.clear();
    append_utf8(bytes, cp);
    if (token_id(bytes) < 0) continue;
    uint32_t sym[4];
    size_t n = bytes.size();
    for (size_t i = 0; i < n; ++i) sym[i] = byte_ids_[static_cast<uint8_t>(bytes[i])];
    uint32_t max_rank = 0;
    while (n > 1) {
      size_t best = 0;
      std::pair<uint32_t, uint32_t> best_m{kNoRank, 0};
      for (size_t i = 0; i + 1 < n; ++i) {
        const auto m = lookup(sym[i], sym[i + 1]);
        if (m.first < best_m.first) {
          best_m = m;
          best = i;
        }
      }
      if (best_m.first == kNoRank) break;
      max_rank = std::max(max_rank, best_m.first);
      sym[best] = best_m.second;
      for (size_t i = best + 1; i + 1 < n; ++i) sym[i] = sym[i + 1];
      --n;
    }
    if (n == 1 && min_use[sym[0]] > max_rank) whole_char_[cp] = sym[0];
  }
  premerge_ = true;
}

bool BpeModel::sealed(std::string_view x, std::string_view y) const {
  for (size_t l = 1; l <= x.size(); ++l) {
    for (size_t r = 1; r <= y.size(); ++r) {
      if (l == x.size() && r == y.size()) continue;  // whole characters: an aligned merge
      const uint64_t bit = straddle_hash(x.substr(x.size() - l), y.substr(0, r));
      if (straddle_[bit >> 6] & (1ULL << (bit & 63))) return false;
    }
  }
  return true;
}

size_t BpeModel::initial_symbols(std::string_view word, uint32_t* sym) const {
  size_t n = 0;
  const auto* p = reinterpret_cast<const unsigned char*>(word.data());
  if (!premerge_) {
    for (size_t i = 0; i < word.size(); ++i) sym[n++] = byte_ids_[p[i]];
    return n;
  }
  bool left_sealed = true;  // the start of a word is a hard boundary
  for (size_t i = 0; i < word.size();) {
    const size_t len = std::max<size_t>(1, seq_len(p[i]));
    const std::string_view cur = word.substr(i, len);
    const std::string_view next =
        i + len < word.size() ? word.substr(i + len, std::max<size_t>(1, seq_len(p[i + len])))
                              : std::string_view();
    bool right_sealed = true;
    if (len > 1 || (!next.empty() && next.size() > 1)) {
      right_sealed = next.empty() || sealed(cur, next);
    }
    uint32_t whole = kNoId;
    if (len > 1 && len < 4 && left_sealed && right_sealed) {
      whole = whole_char_[decode_utf8(word, i).cp];
    }
    if (whole != kNoId) {
      sym[n++] = whole;
    } else {
      for (size_t k = 0; k < len; ++k) sym[n++] = byte_ids_[p[i + k]];
    }
    left_sealed = right_sealed;
    i += len;
  }
  return n;
}

}  // namespace kvgate::tokenizer
