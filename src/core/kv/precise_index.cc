#include "core/kv/precise_index.h"

#include <algorithm>
#include <unordered_map>

#include "core/kv/internal/flat_map.h"

namespace kvgate::kv {
namespace {

constexpr uint32_t kNone = 0xFFFFFFFFu;
constexpr int kInline = 3;

uint8_t Bit(Medium m) { return static_cast<uint8_t>(m); }

struct Holder {
  uint16_t endpoint;
  uint8_t tiers;  // Medium bits
};

// One distinct block. 24 bytes: the arena is the bulk of the index's memory.
// Holders live inline (up to kInline) or, once there are more, all in overflow_[overflow].
struct Entry {
  BlockKey key;
  uint32_t last_use;  // tick of the last store or match (LRU)
  uint32_t overflow;  // kNone, or index into Impl::overflow_
  uint16_t ids[kInline];
  uint8_t tier_bits;  // 2 bits per inline holder
  uint8_t count;      // inline holders (when overflow == kNone)
};
static_assert(sizeof(Entry) == 24);

struct EndpointState {
  internal::FlatMap64<BlockKey> engine_to_key;  // engine hash -> own key
  size_t blocks_held = 0;
  EventStats stats;
  bool seen = false;
};

}  // namespace

struct PreciseIndex::Impl {
  Options options;
  uint64_t base_seed;
  std::unordered_map<std::string, uint64_t> lora_seeds;

  std::vector<Entry> arena;
  std::vector<uint32_t> free_list;
  internal::FlatMap64<uint32_t> by_key;  // own key -> arena index
  std::vector<std::vector<Holder>> overflow;
  std::vector<uint32_t> free_overflow;
  std::vector<EndpointState> endpoints;
  size_t held_pairs = 0;
  uint32_t tick = 1;

  // Scratch for match(), sized to the endpoint count.
  std::vector<uint32_t> stamp;  // stamp[e] == gen: e holds the block being matched
  uint32_t gen = 0;
  std::vector<uint8_t> stamp_tiers;
  std::vector<uint32_t> gpu, total;
  std::vector<uint8_t> gpu_alive;
  std::vector<uint16_t> active;
  std::vector<BlockKey> chain;  // scratch for apply_stored

  explicit Impl(Options o) : options(std::move(o)), base_seed(block_seed(options.model, "", "")) {}

  EndpointState& endpoint(EndpointId e) {
    if (e >= endpoints.size()) endpoints.resize(e + 1);
    endpoints[e].seen = true;
    return endpoints[e];
  }

  uint64_t seed_for(std::string_view lora) {
    if (lora.empty()) return base_seed;
    auto it = lora_seeds.find(std::string(lora));
    if (it != lora_seeds.end()) return it->second;
    uint64_t s = block_seed(options.model, lora, "");
    lora_seeds.emplace(std::string(lora), s);
    return s;
  }

  // --- holders of an entry ---

  template <typename Fn>
  void for_each_holder(const Entry& en, Fn&& fn) const {
    if (en.overflow != kNone) {
      for (const Holder& h : overflow[en.overflow]) fn(h.endpoint, h.tiers);
    } else {
      for (int i = 0; i < en.count; ++i) fn(en.ids[i], (en.tier_bits >> (2 * i)) & 3);
    }
  }

  // Adds `bits` to endpoint e's tiers; returns true if e was not a holder before.
  bool add_holder(Entry& en, uint16_t e, uint8_t bits) {
    if (en.overflow != kNone) {
      auto& v = overflow[en.overflow];
      for (Holder& h : v) {
        if (h.endpoint == e) {
          h.tiers |= bits;
          return false;
        }
      }
      v.push_back({e, bits});
      return true;
    }
    for (int i = 0; i < en.count; ++i) {
      if (en.ids[i] == e) {
        en.tier_bits |= static_cast<uint8_t>(bits << (2 * i));
        return false;
      }
    }
    if (en.count < kInline) {
      en.ids[en.count] = e;
      en.tier_bits |= static_cast<uint8_t>(bits << (2 * en.count));
      ++en.count;
      return true;
    }
    uint32_t o;
    if (!free_overflow.empty()) {
      o = free_overflow.back();
      free_overflow.pop_back();
    } else {
      o = static_cast<uint32_t>(overflow.size());
      overflow.emplace_back();
    }
    auto& v = overflow[o];
    v.clear();
    for (int i = 0; i < en.count; ++i) {
      v.push_back({en.ids[i], static_cast<uint8_t>((en.tier_bits >> (2 * i)) & 3)});
    }
    v.push_back({e, bits});
    en.overflow = o;
    en.count = 0;
    en.tier_bits = 0;
    return true;
  }

  // Clears `bits` of endpoint e. Returns true if e stopped being a holder.
  // `was_holder` tells whether e held the entry at all.
  bool remove_holder_bits(Entry& en, uint16_t e, uint8_t bits, bool& was_holder) {
    was_holder = false;
    if (en.overflow != kNone) {
      auto& v = overflow[en.overflow];
      for (size_t i = 0; i < v.size(); ++i) {
        if (v[i].endpoint != e) continue;
        was_holder = true;
        v[i].tiers &= static_cast<uint8_t>(~bits);
        if (v[i].tiers != 0) return false;
        v[i] = v.back();
        v.pop_back();
        if (v.size() <= kInline) {  // back inline
          uint32_t o = en.overflow;
          en.overflow = kNone;
          en.count = 0;
          en.tier_bits = 0;
          for (const Holder& h : overflow[o]) {
            en.ids[en.count] = h.endpoint;
            en.tier_bits |= static_cast<uint8_t>(h.tiers << (2 * en.count));
            ++en.count;
          }
          overflow[o].clear();
          overflow[o].shrink_to_fit();
          free_overflow.push_back(o);
        }
        return true;
      }
      return false;
    }
    for (int i = 0; i < en.count; ++i) {
      if (en.ids[i] != e) continue;
      was_holder = true;
      uint8_t t = static_cast<uint8_t>(((en.tier_bits >> (2 * i)) & 3) & ~bits);
      if (t != 0) {
        en.tier_bits = static_cast<uint8_t>((en.tier_bits & ~(3 << (2 * i))) | (t << (2 * i)));
        return false;
      }
      // Repack the other holders without slot i.
      uint16_t ids[kInline];
      uint8_t packed = 0;
      int n = 0;
      for (int j = 0; j < en.count; ++j) {
        if (j == i) continue;
        ids[n] = en.ids[j];
        packed = static_cast<uint8_t>(packed | (((en.tier_bits >> (2 * j)) & 3) << (2 * n)));
        ++n;
      }
      for (int j = 0; j < n; ++j) en.ids[j] = ids[j];
      en.tier_bits = packed;
      en.count = static_cast<uint8_t>(n);
      return true;
    }
    return false;
  }

  bool has_holders(const Entry& en) const { return en.overflow != kNone || en.count > 0; }

  // --- entries ---

  uint32_t find(BlockKey key) const {
    const uint32_t* idx = by_key.find(key);
    return idx ? *idx : kNone;
  }

  uint32_t find_or_create(BlockKey key) {
    auto [slot, inserted] = by_key.insert(key, kNone);
    if (!inserted) return *slot;
    uint32_t idx;
    if (!free_list.empty()) {
      idx = free_list.back();
      free_list.pop_back();
    } else {
      idx = static_cast<uint32_t>(arena.size());
      arena.emplace_back();
    }
    arena[idx] = Entry{key, tick, kNone, {0, 0, 0}, 0, 0};
    *slot = idx;
    return idx;
  }

  void free_entry(uint32_t idx) {
    Entry& en = arena[idx];
    by_key.erase(en.key);
    if (en.overflow != kNone) {
      overflow[en.overflow].clear();
      overflow[en.overflow].shrink_to_fit();
      free_overflow.push_back(en.overflow);
    }
    en = Entry{0, 0, kNone, {0, 0, 0}, 0, 0};
    free_list.push_back(idx);
  }

  // Forgets the entry for every holder (capacity eviction).
  void evict_entry(uint32_t idx) {
    Entry& en = arena[idx];
    for_each_holder(en, [&](uint16_t e, uint8_t) {
      --endpoints[e].blocks_held;
      --held_pairs;
    });
    free_entry(idx);
  }

  void enforce_capacity() {
    size_t cap = options.capacity_blocks;
    if (cap == 0 || by_key.size() <= cap) return;
    // Evict in batches: the least recently used ~1/16 of the capacity at once, so the
    // O(n) selection is amortized over many stores.
    size_t target = cap - cap / 16;
    std::vector<std::pair<uint32_t, uint32_t>> live;  // (last_use, idx)
    live.reserve(by_key.size());
    for (uint32_t i = 0; i < arena.size(); ++i) {
      if (arena[i].key != 0 || has_holders(arena[i])) live.push_back({arena[i].last_use, i});
    }
    size_t drop = live.size() > target ? live.size() - target : 0;
    if (drop == 0) return;
    std::nth_element(live.begin(), live.begin() + static_cast<ptrdiff_t>(drop - 1), live.end());
    for (size_t i = 0; i < drop; ++i) evict_entry(live[i].second);
  }

  void clear_endpoint(EndpointId e) {
    if (e >= endpoints.size()) return;
    EndpointState& st = endpoints[e];
    st.engine_to_key.for_each([&](uint64_t, BlockKey& own) {
      uint32_t idx = find(own);
      if (idx == kNone) return;
      bool was = false;
      if (remove_holder_bits(arena[idx], static_cast<uint16_t>(e), 3, was) && was) {
        --held_pairs;
        if (!has_holders(arena[idx])) free_entry(idx);
      }
    });
    st.engine_to_key.clear();
    st.blocks_held = 0;
  }
};

PreciseIndex::PreciseIndex(Options options) : impl_(std::make_unique<Impl>(std::move(options))) {}
PreciseIndex::~PreciseIndex() = default;

void PreciseIndex::apply_stored(EndpointId endpoint, const BlockStoredEvent& ev) {
  Impl& m = *impl_;
  EndpointState& st = m.endpoint(endpoint);
  const size_t n = ev.block_hashes.size();
  if (ev.block_size != m.options.block_size || ev.token_ids.size() != n * ev.block_size) {
    ++st.stats.block_size_mismatch;
    return;
  }
  BlockKey parent;
  if (ev.parent_block_hash) {
    const BlockKey* p = st.engine_to_key.find(*ev.parent_block_hash);
    if (p == nullptr) {
      ++st.stats.unknown_parent;
      return;
    }
    parent = *p;
  } else {
    parent = m.seed_for(ev.lora_name);
  }
  const uint8_t bit = Bit(ev.medium);
  const uint16_t e = static_cast<uint16_t>(endpoint);
  ++m.tick;
  for (size_t i = 0; i < n; ++i) {
    BlockKey own = hash_block(parent, ev.token_ids.subspan(i * ev.block_size, ev.block_size));
    auto [mapped, fresh] = st.engine_to_key.insert(ev.block_hashes[i], own);
    if (!fresh && *mapped != own) {
      // The engine reused a hash for other content: drop the old mapping first.
      uint32_t old = m.find(*mapped);
      bool was = false;
      if (old != kNone && m.remove_holder_bits(m.arena[old], e, 3, was) && was) {
        --st.blocks_held;
        --m.held_pairs;
        if (!m.has_holders(m.arena[old])) m.free_entry(old);
      }
      *mapped = own;
    }
    uint32_t idx = m.find_or_create(own);
    Entry& en = m.arena[idx];
    en.last_use = m.tick;
    if (m.add_holder(en, e, bit)) {
      ++st.blocks_held;
      ++m.held_pairs;
    }
    parent = own;
  }
  st.stats.stored_blocks += n;
  m.enforce_capacity();
}

void PreciseIndex::apply_removed(EndpointId endpoint, const BlockRemovedEvent& ev) {
  Impl& m = *impl_;
  EndpointState& st = m.endpoint(endpoint);
  const uint8_t bit = Bit(ev.medium);
  const uint16_t e = static_cast<uint16_t>(endpoint);
  for (uint64_t h : ev.block_hashes) {
    BlockKey* own = st.engine_to_key.find(h);
    if (own == nullptr) {
      ++st.stats.unknown_removed;
      continue;
    }
    ++st.stats.removed_blocks;
    uint32_t idx = m.find(*own);
    if (idx == kNone) {  // already evicted for capacity
      st.engine_to_key.erase(h);
      continue;
    }
    bool was = false;
    bool gone = m.remove_holder_bits(m.arena[idx], e, bit, was);
    if (!was) {  // evicted for capacity, then re-stored by others
      st.engine_to_key.erase(h);
      continue;
    }
    if (gone) {
      st.engine_to_key.erase(h);
      --st.blocks_held;
      --m.held_pairs;
      if (!m.has_holders(m.arena[idx])) m.free_entry(idx);
    }
  }
}

void PreciseIndex::apply_all_cleared(EndpointId endpoint) {
  impl_->endpoint(endpoint).stats.cleared++;
  impl_->clear_endpoint(endpoint);
}

void PreciseIndex::clear_endpoint(EndpointId endpoint) { impl_->clear_endpoint(endpoint); }

void PreciseIndex::remove_endpoint(EndpointId endpoint) {
  impl_->clear_endpoint(endpoint);
  if (endpoint < impl_->endpoints.size()) impl_->endpoints[endpoint] = EndpointState{};
}

EventStats PreciseIndex::stats(EndpointId endpoint) const {
  return endpoint < impl_->endpoints.size() ? impl_->endpoints[endpoint].stats : EventStats{};
}

size_t PreciseIndex::blocks_held(EndpointId endpoint) const {
  return endpoint < impl_->endpoints.size() ? impl_->endpoints[endpoint].blocks_held : 0;
}

void PreciseIndex::match(std::span<const BlockKey> keys, Nanos /*now*/,
                         std::vector<EndpointMatch>& out) {
  Impl& m = *impl_;
  if (keys.empty() || m.arena.empty()) return;
  const size_t ne = m.endpoints.size();
  if (m.stamp.size() < ne) {  // endpoints grew: start the scratch afresh
    m.gen = 0;
    m.stamp.assign(ne, 0);
    m.stamp_tiers.assign(ne, 0);
    m.gpu.assign(ne, 0);
    m.total.assign(ne, 0);
    m.gpu_alive.assign(ne, 0);
  }
  ++m.tick;
  const uint8_t kGpuBit = Bit(Medium::kGpu);
  auto& active = m.active;
  active.clear();

  // Blocks stored together sit next to each other in the arena: try idx + 1 before the
  // hash table, so a long shared prefix is walked mostly sequentially.
  uint32_t idx = m.find(keys[0]);
  if (idx == kNone) return;
  {
    Entry& en = m.arena[idx];
    en.last_use = m.tick;
    m.for_each_holder(en, [&](uint16_t e, uint8_t t) {
      active.push_back(e);
      m.total[e] = 1;
      m.gpu_alive[e] = (t & kGpuBit) != 0;
      m.gpu[e] = m.gpu_alive[e] ? 1 : 0;
    });
  }
  constexpr size_t kAhead = 8;
  for (size_t i = 1; i < keys.size() && !active.empty(); ++i) {
    if (i + kAhead < keys.size()) m.by_key.prefetch(keys[i + kAhead]);
    uint32_t next = idx + 1;
    if (next < m.arena.size() && m.arena[next].key == keys[i]) {
      idx = next;
    } else {
      idx = m.find(keys[i]);
      if (idx == kNone) break;
    }
    Entry& en = m.arena[idx];
    en.last_use = m.tick;
    if (++m.gen == 0) {  // wrapped: old stamps could collide
      std::fill(m.stamp.begin(), m.stamp.end(), 0);
      m.gen = 1;
    }
    const uint32_t s = m.gen;
    m.for_each_holder(en, [&](uint16_t e, uint8_t t) {
      m.stamp[e] = s;
      m.stamp_tiers[e] = t;
    });
    size_t w = 0;
    for (uint16_t e : active) {
      if (m.stamp[e] != s) {
        out.push_back({e, m.gpu[e], m.total[e]});
        continue;
      }
      ++m.total[e];
      if (m.gpu_alive[e] && (m.stamp_tiers[e] & kGpuBit)) {
        ++m.gpu[e];
      } else {
        m.gpu_alive[e] = 0;
      }
      active[w++] = e;
    }
    active.resize(w);
  }
  for (uint16_t e : active) out.push_back({e, m.gpu[e], m.total[e]});
}

size_t PreciseIndex::memory_bytes() const {
  const Impl& m = *impl_;
  size_t bytes = m.arena.capacity() * sizeof(Entry) + m.free_list.capacity() * 4 +
                 m.by_key.memory_bytes() + m.overflow.capacity() * sizeof(std::vector<Holder>) +
                 m.free_overflow.capacity() * 4;
  for (const auto& v : m.overflow) bytes += v.capacity() * sizeof(Holder);
  for (const auto& e : m.endpoints) bytes += sizeof(EndpointState) + e.engine_to_key.memory_bytes();
  return bytes;
}

size_t PreciseIndex::distinct_blocks() const { return impl_->by_key.size(); }
size_t PreciseIndex::held_pairs() const { return impl_->held_pairs; }

}  // namespace kvgate::kv
