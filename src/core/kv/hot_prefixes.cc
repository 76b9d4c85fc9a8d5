#include "core/kv/hot_prefixes.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <unordered_set>

namespace kvgate::kv {

HotPrefixes::HotPrefixes(uint32_t block_size, HotPrefixOptions options)
    : block_size_(block_size), options_(options) {}

size_t HotPrefixes::Entry::stored() const { return token_ids.size() + text.size() / 4; }

std::vector<uint32_t> HotPrefixes::depths(uint32_t blocks, uint32_t max_blocks) {
  std::vector<uint32_t> out;
  const uint32_t last = std::min(blocks, max_blocks);
  if (last == 0) return out;
  // 1..8, then four steps per power of two (10, 12, 14, 16, 20, 24, 28, 32, ...): one
  // depth is never more than 1.25 x the one before.
  for (uint64_t d = 1; d <= last; d += std::max<uint64_t>(1, std::bit_floor(d) / 4)) {
    out.push_back(static_cast<uint32_t>(d));
  }
  if (out.back() != last) out.push_back(last);
  return out;
}

double HotPrefixes::decayed(const Entry& e, Nanos now) const {
  if (options_.half_life <= 0 || now <= e.at) return e.hits;
  return e.hits *
         std::exp2(-static_cast<double>(now - e.at) / static_cast<double>(options_.half_life));
}

void HotPrefixes::store_prefix(Entry& e, const PromptView& prompt) {
  const size_t tokens = static_cast<size_t>(e.blocks) * block_size_;
  if (!prompt.token_ids.empty()) {
    const size_t n = std::min(tokens, prompt.token_ids.size());
    e.token_ids.assign(prompt.token_ids.begin(), prompt.token_ids.begin() + n);
  } else {
    const size_t n = std::min(tokens * prompt.bytes_per_token, prompt.text.size());
    e.text.assign(prompt.text.substr(0, n));
  }
  stored_tokens_ += e.stored();
}

void HotPrefixes::observe(std::span<const BlockKey> keys, const PromptView& prompt, Nanos now) {
  if (keys.empty()) return;
  const std::vector<uint32_t> ds =
      depths(static_cast<uint32_t>(std::min<size_t>(keys.size(), UINT32_MAX)), options_.max_blocks);
  BlockKey parent = 0;
  bool has_parent = false;
  for (uint32_t d : ds) {
    const BlockKey key = keys[d - 1];
    auto [it, inserted] = entries_.try_emplace(key);
    Entry& e = it->second;
    if (inserted) {
      e.hits = 1;
      e.blocks = d;
      e.parent = parent;
      e.has_parent = has_parent;
    } else {
      e.hits = decayed(e, now) + 1;
      // From the second hit on the prefix is shared: keep it for warm-ups.
      if (e.token_ids.empty() && e.text.empty()) store_prefix(e, prompt);
    }
    e.at = std::max(e.at, now);
    parent = key;
    has_parent = true;
  }
  if (entries_.size() > options_.capacity || stored_tokens_ > options_.max_stored_tokens) {
    prune(now);
  }
}

void HotPrefixes::prune(Nanos now) {
  // Keep the most hit half (amortised: a prune every capacity/2 new entries at most).
  std::vector<std::pair<double, BlockKey>> by_hits;
  by_hits.reserve(entries_.size());
  for (const auto& [key, e] : entries_) by_hits.emplace_back(decayed(e, now), key);
  const size_t keep = std::min(entries_.size() / 2, options_.capacity / 2);
  std::nth_element(by_hits.begin(), by_hits.begin() + static_cast<ptrdiff_t>(keep), by_hits.end(),
                   [](const auto& a, const auto& b) {
                     return a.first != b.first ? a.first > b.first : a.second < b.second;
                   });
  for (size_t i = keep; i < by_hits.size(); ++i) {
    auto it = entries_.find(by_hits[i].second);
    stored_tokens_ -= it->second.stored();
    entries_.erase(it);
  }
  // Still over the token budget (a few very long prefixes): drop stored prefixes from
  // the least hit up; their counts stay.
  if (stored_tokens_ > options_.max_stored_tokens) {
    std::sort(by_hits.begin(), by_hits.begin() + static_cast<ptrdiff_t>(keep));
    for (size_t i = 0; i < keep && stored_tokens_ > options_.max_stored_tokens; ++i) {
      Entry& e = entries_.at(by_hits[i].second);
      stored_tokens_ -= e.stored();
      e.token_ids = {};
      e.text = {};
    }
  }
}

std::vector<HotPrefix> HotPrefixes::top(size_t k, Nanos now) const {
  struct Candidate {
    double score;
    double hits;
    BlockKey key;
    const Entry* entry;
  };
  std::vector<Candidate> candidates;
  for (const auto& [key, e] : entries_) {
    if (e.token_ids.empty() && e.text.empty()) continue;  // seen once: nothing shared it
    const double hits = decayed(e, now);
    candidates.push_back({hits * e.blocks, hits, key, &e});
  }
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return a.score != b.score ? a.score > b.score : a.key < b.key;
  });
  std::vector<const Candidate*> chosen;
  std::unordered_set<BlockKey> covered;  // ancestors of chosen entries
  for (const Candidate& c : candidates) {
    if (chosen.size() >= k) break;
    if (covered.contains(c.key)) continue;  // a chosen deeper prefix warms it too
    // Walk the ancestors: a chosen one is made redundant by this deeper prefix.
    const Entry* e = c.entry;
    while (e->has_parent) {
      const BlockKey parent = e->parent;
      if (!covered.insert(parent).second) break;  // the rest of the chain is covered
      std::erase_if(chosen, [parent](const Candidate* x) { return x->key == parent; });
      auto it = entries_.find(parent);
      if (it == entries_.end()) break;  // pruned: the chain is cut here
      e = &it->second;
    }
    chosen.push_back(&c);
  }
  std::vector<HotPrefix> out;
  out.reserve(chosen.size());
  for (const Candidate* c : chosen) {
    out.push_back({.key = c->key,
                   .blocks = c->entry->blocks,
                   .hits = c->hits,
                   .token_ids = c->entry->token_ids,
                   .text = c->entry->text});
  }
  return out;
}

namespace {

// `a` is a proper prefix of `b`'s content.
bool begins(const HotPrefix& a, const HotPrefix& b) {
  if (a.blocks >= b.blocks || a.token_ids.empty() != b.token_ids.empty()) return false;
  if (!a.token_ids.empty()) {
    return a.token_ids.size() < b.token_ids.size() &&
           std::equal(a.token_ids.begin(), a.token_ids.end(), b.token_ids.begin());
  }
  return a.text.size() < b.text.size() && std::string_view(b.text).starts_with(a.text);
}

}  // namespace

std::vector<HotPrefix> merge_hot_prefixes(std::span<const std::vector<HotPrefix>> lists, size_t k) {
  std::vector<HotPrefix> all;
  std::unordered_map<BlockKey, size_t> at;  // key -> index in `all`
  for (const std::vector<HotPrefix>& list : lists) {
    for (const HotPrefix& p : list) {
      auto [it, fresh] = at.emplace(p.key, all.size());
      if (fresh) {
        all.push_back(p);
      } else {
        all[it->second].hits += p.hits;
      }
    }
  }
  std::sort(all.begin(), all.end(), [](const HotPrefix& a, const HotPrefix& b) {
    const double sa = a.hits * a.blocks, sb = b.hits * b.blocks;
    return sa != sb ? sa > sb : a.key < b.key;
  });
  std::vector<HotPrefix> out;
  for (HotPrefix& p : all) {
    if (out.size() >= k) break;
    if (std::any_of(out.begin(), out.end(), [&](const HotPrefix& c) { return begins(p, c); })) {
      continue;  // a chosen deeper prefix warms it too
    }
    std::erase_if(out, [&](const HotPrefix& c) { return begins(c, p); });
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace kvgate::kv
