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
    size_t i = (key * 0x9E3779B97F4A7C15ULL) >> m.shift_;
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
         pairs_.capacity() * sizeof(PairSlot) + by_bytes_.capacity() * sizeof(uint32_t);
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
  if (word.size() <= 128) {
    merge_short(word, out);
  } else {
    merge_long(word, out);
  }
}

// Quadratic in the worst case but with tiny constants: ranks of adjacent pairs are kept
// and only the two pairs around a merge are looked up again.
void BpeModel::merge_short(std::string_view word, std::vector<uint32_t>& out) const {
  uint32_t sym[128];
  uint32_t rank[128];
  uint32_t merged[128];
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

// For long words: a heap of candidate pairs ordered by (rank, position), as the Hugging
// Face implementation does, with stale entries skipped when popped.
void BpeModel::merge_long(std::string_view word, std::vector<uint32_t>& out) const {
  const size_t n = word.size();
  std::vector<uint32_t> sym(n);
  std::vector<int64_t> next(n), prev(n);
  for (size_t i = 0; i < n; ++i) {
    sym[i] = byte_ids_[static_cast<unsigned char>(word[i])];
    next[i] = i + 1 < n ? static_cast<int64_t>(i + 1) : -1;
    prev[i] = static_cast<int64_t>(i) - 1;
  }
  struct Cand {
    uint32_t rank;
    uint32_t pos;
    uint32_t left, right;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push = [&](int64_t i) {
    if (i < 0 || next[i] < 0) return;
    auto [r, m] = lookup(sym[i], sym[next[i]]);
    (void)m;
    if (r != kNoRank)
      heap.push(Cand{r, static_cast<uint32_t>(i), sym[i], sym[static_cast<size_t>(next[i])]});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int64_t>(i));
  std::vector<bool> dead(n, false);
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    const size_t i = c.pos;
    if (dead[i] || next[i] < 0) continue;
    const auto j = static_cast<size_t>(next[i]);
    if (sym[i] != c.left || sym[j] != c.right) continue;
    sym[i] = lookup(sym[i], sym[j]).second;
    dead[j] = true;
    next[i] = next[j];
    if (next[j] >= 0) prev[static_cast<size_t>(next[j])] = static_cast<int64_t>(i);
    push(prev[i]);
    push(static_cast<int64_t>(i));
  }
  for (int64_t i = 0; i >= 0; i = next[static_cast<size_t>(i)]) out.push_back(sym[i]);
}

}  // namespace kvgate::tokenizer
