#include "core/tokenizer/bpe.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <queue>
#include <tuple>

#include "core/common/unicode.h"

namespace kvgate::tokenizer {

using unicode::CodePoint;
using unicode::decode_utf8;
using unicode::find_invalid_utf8;

Result<BpeModel> BpeModel::build(std::vector<VocabEntry> vocab, const std::vector<Merge>& merges,
                                 const Options& options) {
  BpeModel m;
  m.ignore_merges_ = options.ignore_merges;
  m.byte_level_ = options.byte_level;
  m.fuse_unk_ = options.fuse_unk;
  m.byte_fallback_ = options.byte_fallback;
  m.prefix_ = options.continuing_subword_prefix;
  m.suffix_ = options.end_of_word_suffix;
  if (m.byte_level_ && (!m.prefix_.empty() || !m.suffix_.empty()))
    return Error(
        "model: continuing_subword_prefix/end_of_word_suffix with a byte-level vocabulary are "
        "not supported");
  uint32_t max_id = 0;
  size_t total = 0;
  for (const auto& v : vocab) {
    max_id = std::max(max_id, v.id);
    total += v.bytes.size();
  }
  if (vocab.empty()) return Error("model.vocab: empty");
  if (max_id > kIdMask) return Error("model.vocab: token id too large");
  std::sort(vocab.begin(), vocab.end(),
            [](const VocabEntry& a, const VocabEntry& b) { return a.id < b.id; });
  m.bytes_.reserve(total);
  m.offsets_.assign(max_id + 2, 0);
  size_t k = 0;
  for (uint32_t id = 0; id <= max_id; ++id) {
    m.offsets_[id] = static_cast<uint32_t>(m.bytes_.size());
    if (k < vocab.size() && vocab[k].id == id) {
      m.bytes_ += vocab[k].bytes;
      ++k;
      if (k < vocab.size() && vocab[k].id == id)
        return Error("model.vocab: id " + std::to_string(id) + " used twice");
    }
  }
  m.offsets_[max_id + 1] = static_cast<uint32_t>(m.bytes_.size());
  size_t vcap = 1;
  while (vcap < vocab.size() * 2) vcap <<= 1;
  m.by_bytes_.assign(vcap, kNoId);
  m.vocab_size_ = vocab.size();
  for (const auto& v : vocab) {
    if (v.bytes.empty()) return Error("model.vocab: empty token");
    if (!v.reachable) {
      if (m.unreachable_.empty()) m.unreachable_.assign(max_id + 1, false);
      m.unreachable_[v.id] = true;
      continue;
    }
    size_t i = XXH3_64bits(v.bytes.data(), v.bytes.size()) & (vcap - 1);
    while (m.by_bytes_[i] != kNoId) {
      if (m.token_bytes(m.by_bytes_[i]) == v.bytes)
        return Error("model.vocab: token " + std::to_string(v.id) + " duplicates token " +
                     std::to_string(m.by_bytes_[i]));
      i = (i + 1) & (vcap - 1);
    }
    m.by_bytes_[i] = v.id;
  }
  for (int b = 0; m.byte_level_ && b < 256; ++b) {
    const char c = static_cast<char>(b);
    const int64_t id = m.token_id(std::string_view(&c, 1));
    if (id < 0)
      return Error("model.vocab: byte " + std::to_string(b) +
                   " has no token (not a byte-level vocabulary)");
    m.byte_ids_[b] = static_cast<uint32_t>(id);
  }
  if (!m.byte_level_) {
    if (!options.unk_token.empty()) {
      const int64_t unk = m.token_id(options.unk_token);
      if (unk < 0)
        return Error("model.unk_token: \"" + options.unk_token + "\" is not in model.vocab");
      m.unk_id_ = static_cast<uint32_t>(unk);
    }
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      const int64_t id = m.token_id(name);
      m.fallback_ids_[b] = id < 0 ? kNoId : static_cast<uint32_t>(id);
    }
    if (m.prefix_.empty() && m.suffix_.empty()) {
      m.char_ids_.assign(0x10000, kNoId);
      for (const auto& v : vocab) {
        if (v.bytes.size() > 3 || find_invalid_utf8(v.bytes) != std::string_view::npos) continue;
        const CodePoint c = decode_utf8(v.bytes, 0);
        if (c.len == v.bytes.size()) m.char_ids_[c.cp] = v.id;
      }
      m.char_pairs_.assign(size_t{1} << (kPairBits - 6), 0);
      auto flag = [&](char32_t cp, uint32_t f) {
        if (cp < m.char_ids_.size() && m.char_ids_[cp] != kNoId) m.char_ids_[cp] |= f;
      };
      for (const auto& v : vocab) {
        if (find_invalid_utf8(v.bytes) != std::string_view::npos) continue;
        char32_t prev = 0;
        for (size_t i = 0; i < v.bytes.size();) {
          const CodePoint c = decode_utf8(v.bytes, i);
          if (i > 0) {
            const uint64_t bit = pair_bit(prev, c.cp);
            m.char_pairs_[bit >> 6] |= 1ULL << (bit & 63);
            flag(prev, kPairsLeft);
            flag(c.cp, kPairsRight);
          }
          prev = c.cp;
          i += c.len;
        }
      }
    }
  }
  size_t cap = 1;
  int bits = 0;
  while (cap < merges.size() * 2 + 2) {
    cap <<= 1;
    ++bits;
  }
  m.shift_ = 64 - bits;
  m.pairs_.assign(cap, PairSlot{kEmpty, 0, 0});
  m.filter_.assign(size_t{1} << (kFilterBits - 6), 0);
  std::string joined;
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& mg = merges[r];
    const int64_t l = m.token_id(mg.left);
    const int64_t rt = m.token_id(mg.right);
    if (l < 0 || rt < 0)
      return Error("model.merges[" + std::to_string(r) + "]: token not in model.vocab");
    if (mg.right.size() < m.prefix_.size())
      return Error("model.merges[" + std::to_string(r) +
                   "]: right token shorter than continuing_subword_prefix");
    joined = mg.left + mg.right.substr(m.prefix_.size());
    const int64_t j = m.token_id(joined);
    if (j < 0)
      return Error("model.merges[" + std::to_string(r) + "]: merged token not in model.vocab");
    const uint64_t key = (static_cast<uint64_t>(l) << 32) | static_cast<uint64_t>(rt);
    const uint64_t h = key * 0x9E3779B97F4A7C15ULL;
    const uint64_t bit = h >> (64 - kFilterBits);
    m.filter_[bit >> 6] |= 1ULL << (bit & 63);
    size_t i = h >> m.shift_;
    while (m.pairs_[i].key != kEmpty && m.pairs_[i].key != key) i = (i + 1) & (cap - 1);
    // A pair listed twice keeps its last rank (the library collects merges into a map).
    m.pairs_[i] = PairSlot{key, static_cast<uint32_t>(r), static_cast<uint32_t>(j)};
  }
  if (m.byte_level_) m.init_premerge();
  if (m.byte_fallback_ && !m.char_pairs_.empty()) {
    // Byte tokens are inert when all 256 exist and no merge takes one (Llama 2, Gemma).
    std::vector<bool> is_fallback(max_id + 1, false);
    bool all = true;
    for (uint32_t id : m.fallback_ids_) {
      all = all && id != kNoId;
      if (id != kNoId) is_fallback[id] = true;
    }
    m.fallback_inert_ = all;
    for (const PairSlot& p : m.pairs_) {
      if (p.key != kEmpty && (is_fallback[p.key >> 32] || is_fallback[p.key & 0xFFFFFFFF]))
        m.fallback_inert_ = false;
    }
  }
  m.self_merging_.assign(max_id + 1, false);
  std::vector<uint32_t> ids;
  for (uint32_t id = 0; id <= max_id; ++id) {
    const std::string_view t = m.token_bytes(id);
    if (t.size() < 2 || t.size() > kShortWord || m.unreachable(id)) continue;
    ids.clear();
    m.encode_word_from_bytes(t, ids);
    m.self_merging_[id] = ids.size() == 1 && ids[0] == id;
  }
  m.init_short_table();
  return m;
}

void BpeModel::init_short_table() {
  auto wanted = [&](uint32_t id) {
    const std::string_view t = token_bytes(id);
    return !t.empty() && t.size() <= kInlineKey && !unreachable(id) &&
           (ignore_merges_ || self_merging_[id]);
  };
  size_t n = 0;
  for (uint32_t id = 0; id + 1 < offsets_.size(); ++id) n += wanted(id);
  size_t cap = 1;
  int bits = 0;
  while (cap < 2 * n + 2) {
    cap <<= 1;
    ++bits;
  }
  short_.assign(cap, ShortSlot{});
  short_shift_ = 64 - bits;
  for (uint32_t id = 0; id + 1 < offsets_.size(); ++id) {
    if (!wanted(id)) continue;
    const std::string_view t = token_bytes(id);
    ShortSlot s;
    short_key(t.data(), t.size(), s.a, s.b);
    s.id = id | (self_merging_[id] ? kSelfMerging : 0);
    s.len = static_cast<uint32_t>(t.size());
    size_t i = short_hash(s.a, s.b, t.size()) >> short_shift_;
    while (short_[i].len != 0) i = (i + 1) & (cap - 1);
    short_[i] = s;
  }
}

int64_t BpeModel::token_id(std::string_view bytes) const {
  const size_t mask = by_bytes_.size() - 1;
  size_t i = XXH3_64bits(bytes.data(), bytes.size()) & mask;
  while (by_bytes_[i] != kNoId) {
    if (token_bytes(by_bytes_[i]) == bytes) return by_bytes_[i];
    i = (i + 1) & mask;
  }
  return -1;
}

size_t BpeModel::memory_bytes() const {
  return char_pairs_.capacity() * sizeof(uint64_t) + char_ids_.capacity() * sizeof(uint32_t) +
         prefix_.capacity() + suffix_.capacity() + bytes_.capacity() +
         offsets_.capacity() * sizeof(uint32_t) + pairs_.capacity() * sizeof(PairSlot) +
         by_bytes_.capacity() * sizeof(uint32_t) + filter_.capacity() * sizeof(uint64_t) +
         (self_merging_.capacity() + unreachable_.capacity()) / 8 +
         whole_char_.capacity() * sizeof(uint32_t) + short_.capacity() * sizeof(ShortSlot) +
         straddle_.capacity() * sizeof(uint64_t);
}

uint32_t BpeModel::char_id(std::string_view ch, bool first, bool last) const {
  if (!char_ids_.empty()) {
    if (ch.size() <= 3) {
      const uint32_t e = char_ids_[decode_utf8(ch, 0).cp];
      return e == kNoId ? kNoId : e & kIdMask;
    }
    const int64_t id = token_id(ch);
    return id < 0 ? kNoId : static_cast<uint32_t>(id);
  }
  std::string s;
  if (!first) s += prefix_;
  s += ch;
  if (last) s += suffix_;
  const int64_t id = token_id(s);
  return id < 0 ? kNoId : static_cast<uint32_t>(id);
}

size_t BpeModel::initial_char_symbols(std::string_view w, uint32_t* sym) const {
  size_t n = 0;
  bool unk = false;  // an unk token waiting to be emitted (fused with the next when fuse_unk)
  std::string s;
  for (size_t i = 0; i < w.size();) {
    const auto b = static_cast<unsigned char>(w[i]);
    const size_t len = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    const bool first = i == 0, last = i + len == w.size();
    const std::string_view ch = w.substr(i, len);
    i += len;
    const uint32_t id = char_id(ch, first, last);
    if (id != kNoId) {
      if (unk) {
        sym[n++] = unk_id_;
        unk = false;
      }
      sym[n++] = id;
      continue;
    }
    if (byte_fallback_) {
      // The byte tokens of the looked-up string (prefix and suffix included), if all exist.
      s.clear();
      if (!first) s += prefix_;
      s += ch;
      if (last) s += suffix_;
      bool all = true;
      for (char c : s) all = all && fallback_ids_[static_cast<unsigned char>(c)] != kNoId;
      if (all) {
        for (char c : s) sym[n++] = fallback_ids_[static_cast<unsigned char>(c)];
        continue;
      }
    }
    if (unk_id_ != kNoId) {
      if (unk && !fuse_unk_) sym[n++] = unk_id_;
      unk = true;
    }
  }
  if (unk) sym[n++] = unk_id_;
  return n;
}

void BpeModel::encode_chars(std::string_view word, std::vector<uint32_t>& out) const {
  if (const int64_t id = whole_token(word, false); id >= 0) {
    out.push_back(static_cast<uint32_t>(id));
    return;
  }
  const size_t cap = max_char_symbols(word.size());
  if (cap <= kStackSymbols) {
    uint32_t init[kStackSymbols];
    merge(init, initial_char_symbols(word, init), out);
  } else {
    std::vector<uint32_t> init(cap);
    merge(init.data(), initial_char_symbols(word, init.data()), out);
  }
}

void BpeModel::encode_word(std::string_view word, std::vector<uint32_t>& out) const {
  if (!byte_level_) {
    if (const int64_t id = whole_token(word, ignore_merges_); id >= 0) {
      out.push_back(static_cast<uint32_t>(id));
      return;
    }
    if (char_pairs_.empty() || word.size() <= kShortWord) {
      encode_chars(word, out);
      return;
    }
    if (word.size() <= kStackSymbols) {
      uint32_t sym[kStackSymbols];
      encode_chunked(word, sym, out);
    } else {
      auto sym = std::make_unique_for_overwrite<uint32_t[]>(word.size());
      encode_chunked(word, sym.get(), out);
    }
    return;
  }
  if (word.size() == 1) {
    out.push_back(byte_ids_[static_cast<unsigned char>(word[0])]);
    return;
  }
  if (const int64_t id = whole_token(word, ignore_merges_); id >= 0) {
    out.push_back(static_cast<uint32_t>(id));
    return;
  }
  if (word.size() <= kShortWord) {
    uint32_t init[kShortWord];
    const size_t n = initial_symbols(word, init);
    merge_short(init, n, out);
  } else if (word.size() <= kStackSymbols) {
    uint32_t init[kStackSymbols];
    const size_t n = initial_symbols(word, init);
    merge_long(init, n, out);
  } else {
    std::vector<uint32_t> init(word.size());
    const size_t n = initial_symbols(word, init.data());
    merge_long(init.data(), n, out);
  }
}

// Cuts where no merge can cross: between two characters that both have a token and never
// sit side by side in one (char_pairs_, with the kPairsLeft/kPairsRight flags answering
// most pairs from the character's own entry), and around a character that becomes inert
// byte tokens. Each chunk is then BPE'd on its own: a single character is its token.
void BpeModel::encode_chunked(std::string_view word, uint32_t* sym,
                              std::vector<uint32_t>& out) const {
  size_t start = 0;       // byte offset of the current chunk
  size_t n = 0;           // its symbols, sym[0, n)
  bool missing = false;   // it holds a character without a token: encode_chars decides
  uint32_t prev = kNoId;  // char_ids_ entry of the previous character (kNoId: none)
  char32_t prev_cp = 0;
  auto flush = [&](size_t end) {
    const std::string_view chunk = word.substr(start, end - start);
    if (missing) {
      encode_chars(chunk, out);
    } else if (n == 1) {
      out.push_back(sym[0]);
    } else if (n > 1) {
      if (const int64_t id = whole_token(chunk, false); id >= 0) {
        out.push_back(static_cast<uint32_t>(id));
      } else {
        merge(sym, n, out);
      }
    }
    start = end;
    n = 0;
    missing = false;
  };
  for (size_t i = 0; i < word.size();) {
    const auto b = static_cast<unsigned char>(word[i]);
    CodePoint c{b, 1};
    uint32_t e;
    if (b < 0x80) {
      e = char_ids_[b];
    } else {
      c = decode_utf8(word, i);
      if (c.len < 4) {
        e = char_ids_[c.cp];
      } else {
        const int64_t id = token_id(word.substr(i, c.len));
        e = id < 0 ? kNoId : static_cast<uint32_t>(id) | kPairsLeft | kPairsRight;
      }
    }
    if (e == kNoId) {
      if (fallback_inert_) {
        flush(i);
        for (size_t k = i; k < i + c.len; ++k)
          out.push_back(fallback_ids_[static_cast<unsigned char>(word[k])]);
        start = i + c.len;
      } else {
        missing = true;
      }
      prev = kNoId;
      i += c.len;
      continue;
    }
    if (i > start && prev != kNoId &&
        !((prev & kPairsLeft) && (e & kPairsRight) && may_pair(prev_cp, c.cp)))
      flush(i);
    sym[n++] = e & kIdMask;
    prev = e;
    prev_cp = c.cp;
    i += c.len;
  }
  flush(word.size());
}

void BpeModel::encode_word_from_bytes(std::string_view word, std::vector<uint32_t>& out) const {
  if (ignore_merges_) {
    const int64_t id = token_id(word);
    if (id >= 0) {
      out.push_back(static_cast<uint32_t>(id));
      return;
    }
  }
  if (!byte_level_) {
    std::vector<uint32_t> init(max_char_symbols(word.size()));
    merge(init.data(), initial_char_symbols(word, init.data()), out);
    return;
  }
  std::vector<uint32_t> init(word.size());
  for (size_t i = 0; i < word.size(); ++i) init[i] = byte_ids_[static_cast<unsigned char>(word[i])];
  merge(init.data(), init.size(), out);
}

// Quadratic in the worst case but with tiny constants: ranks of adjacent pairs are kept
// and only the two pairs around a merge are looked up again.
void BpeModel::merge_short(const uint32_t* init, size_t n, std::vector<uint32_t>& out) const {
  uint32_t sym[kShortWord];
  uint32_t rank[kShortWord];
  uint32_t merged[kShortWord];
  for (size_t i = 0; i < n; ++i) sym[i] = init[i];
  for (size_t i = 0; i + 1 < n; ++i) std::tie(rank[i], merged[i]) = lookup(sym[i], sym[i + 1]);
  while (n > 1) {
    size_t best = 0;
    uint32_t best_rank = kNoRank;
    for (size_t i = 0; i + 1 < n; ++i) {
      if (rank[i] < best_rank) {
        best_rank = rank[i];
        best = i;
      }
    }
    if (best_rank == kNoRank) break;
    sym[best] = merged[best];
    for (size_t i = best + 1; i + 1 < n; ++i) {
      sym[i] = sym[i + 1];
      rank[i] = rank[i + 1];
      merged[i] = merged[i + 1];
    }
    --n;
    if (best + 1 < n) std::tie(rank[best], merged[best]) = lookup(sym[best], sym[best + 1]);
    if (best > 0) std::tie(rank[best - 1], merged[best - 1]) = lookup(sym[best - 1], sym[best]);
  }
  out.insert(out.end(), sym, sym + n);
}

// For longer words: a binary heap of candidate pairs ordered by (rank, position), as the
// Hugging Face implementation does, with stale entries skipped when popped. O(n log n).
// Scratch lives on the stack up to kStackSymbols symbols.
namespace {
struct Cand {
  uint32_t rank;
  uint32_t pos;
  uint32_t left, right, merged;
};
// std::push_heap builds a max-heap: "less" means a later merge.
inline bool later(const Cand& a, const Cand& b) {
  return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
}
}  // namespace

void BpeModel::merge_long(const uint32_t* init, size_t n, std::vector<uint32_t>& out) const {
  uint32_t sym_s[kStackSymbols];
  int32_t next_s[kStackSymbols], prev_s[kStackSymbols];
  Cand heap_s[3 * kStackSymbols];
  std::vector<uint32_t> sym_v;
  std::vector<int32_t> next_v, prev_v;
  std::vector<Cand> heap_v;
  uint32_t* sym = sym_s;
  int32_t* next = next_s;
  int32_t* prev = prev_s;
  Cand* heap = heap_s;
  if (n > kStackSymbols) {
    sym_v.resize(n);
    next_v.resize(n);
    prev_v.resize(n);
    heap_v.resize(3 * n);
    sym = sym_v.data();
    next = next_v.data();
    prev = prev_v.data();
    heap = heap_v.data();
  }
  size_t heap_size = 0;
  for (size_t i = 0; i < n; ++i) {
    sym[i] = init[i];
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
    prev[i] = static_cast<int32_t>(i) - 1;
  }
  auto push = [&](int32_t i) {
    if (i < 0 || next[i] < 0) return;
    const auto [r, merged] = lookup(sym[i], sym[next[i]]);
    if (r == kNoRank) return;
    heap[heap_size++] = Cand{r, static_cast<uint32_t>(i), sym[i], sym[next[i]], merged};
    std::push_heap(heap, heap + heap_size, later);
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i));
  while (heap_size > 0) {
    std::pop_heap(heap, heap + heap_size, later);
    const Cand c = heap[--heap_size];
    const size_t i = c.pos;
    if (sym[i] == kNoId || next[i] < 0) continue;  // merged away, or last symbol
    const auto j = static_cast<size_t>(next[i]);
    if (sym[i] != c.left || sym[j] != c.right) continue;  // stale
    sym[i] = c.merged;
    sym[j] = kNoId;
    next[i] = next[j];
    if (next[j] >= 0) prev[next[j]] = static_cast<int32_t>(i);
    push(prev[i]);
    push(static_cast<int32_t>(i));
  }
  for (int32_t i = 0; i >= 0; i = next[i]) out.push_back(sym[i]);
}

}  // namespace kvgate::tokenizer
