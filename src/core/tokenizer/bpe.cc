#include "core/tokenizer/bpe.h"

#include <xxhash.h>

#include <algorithm>
#include <queue>
#include <tuple>

namespace kvgate::tokenizer {

Result<BpeModel> BpeModel::build(std::vector<VocabEntry> vocab, const std::vector<Merge>& merges,
                                 bool ignore_merges) {
  BpeModel m;
  m.ignore_merges_ = ignore_merges;
  uint32_t max_id = 0;
  size_t total = 0;
  for (const auto& v : vocab) {
    max_id = std::max(max_id, v.id);
    total += v.bytes.size();
  }
  if (vocab.empty()) return Error("model.vocab: empty");
  if (max_id > 16 * 1024 * 1024) return Error("model.vocab: token id too large");
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
    size_t i = XXH3_64bits(v.bytes.data(), v.bytes.size()) & (vcap - 1);
    while (m.by_bytes_[i] != kNoId) {
      if (m.token_bytes(m.by_bytes_[i]) == v.bytes)
        return Error("model.vocab: token " + std::to_string(v.id) + " duplicates token " +
                     std::to_string(m.by_bytes_[i]));
      i = (i + 1) & (vcap - 1);
    }
    m.by_bytes_[i] = v.id;
  }
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    const int64_t id = m.token_id(std::string_view(&c, 1));
    if (id < 0)
      return Error("model.vocab: byte " + std::to_string(b) +
                   " has no token (not a byte-level vocabulary)");
    m.byte_ids_[b] = static_cast<uint32_t>(id);
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
    joined = mg.left + mg.right;
    const int64_t j = m.token_id(joined);
    if (l < 0 || rt < 0 || j < 0)
      return Error("model.merges[" + std::to_string(r) + "]: token not in model.vocab");
    const uint64_t key = (static_cast<uint64_t>(l) << 32) | static_cast<uint64_t>(rt);
    const uint64_t h = key * 0x9E3779B97F4A7C15ULL;
    const uint64_t bit = h >> (64 - kFilterBits);
    m.filter_[bit >> 6] |= 1ULL << (bit & 63);
    size_t i = h >> m.shift_;
    while (m.pairs_[i].key != kEmpty && m.pairs_[i].key != key) i = (i + 1) & (cap - 1);
    if (m.pairs_[i].key == key) continue;  // a duplicate merge keeps its first rank
    m.pairs_[i] = PairSlot{key, static_cast<uint32_t>(r), static_cast<uint32_t>(j)};
  }
  return m;
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
  return bytes_.capacity() + offsets_.capacity() * sizeof(uint32_t) +
         pairs_.capacity() * sizeof(PairSlot) + by_bytes_.capacity() * sizeof(uint32_t) +
         filter_.capacity() * sizeof(uint64_t);
}

void BpeModel::encode_word(std::string_view word, std::vector<uint32_t>& out) const {
  if (word.size() == 1) {
    out.push_back(byte_ids_[static_cast<unsigned char>(word[0])]);
    return;
  }
  if (ignore_merges_) {
    const int64_t id = token_id(word);
    if (id >= 0) {
      out.push_back(static_cast<uint32_t>(id));
      return;
    }
  }
  if (word.size() <= kShortWord) {
    merge_short(word, out);
  } else {
    merge_long(word, out);
  }
}

// Quadratic in the worst case but with tiny constants: ranks of adjacent pairs are kept
// and only the two pairs around a merge are looked up again.
void BpeModel::merge_short(std::string_view word, std::vector<uint32_t>& out) const {
  uint32_t sym[kShortWord];
  uint32_t rank[kShortWord];
  uint32_t merged[kShortWord];
  size_t n = word.size();
  for (size_t i = 0; i < n; ++i) sym[i] = byte_ids_[static_cast<unsigned char>(word[i])];
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
constexpr size_t kStackSymbols = 256;
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

void BpeModel::merge_long(std::string_view word, std::vector<uint32_t>& out) const {
  const size_t n = word.size();
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
    sym[i] = byte_ids_[static_cast<unsigned char>(word[i])];
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
