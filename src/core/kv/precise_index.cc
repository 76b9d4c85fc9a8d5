#include "core/kv/precise_index.h"

#include <algorithm>
#include <unordered_map>

#include "core/kv/internal/flat_map.h"
#include "core/kv/internal/key_table.h"

namespace kvgate::kv {
namespace {

constexpr uint32_t kNone = 0xFFFFFFFFu;
constexpr int kInline = 3;

uint8_t medium_bit(Medium m) { return static_cast<uint8_t>(m); }
constexpr uint8_t kAllTiers = 7;  // GPU | CPU | disk
constexpr int kTierBits = 3;      // per inline holder
constexpr uint8_t kDiskOnly = static_cast<uint8_t>(Medium::kDisk);

struct Holder {
  uint16_t endpoint;
  uint8_t tiers;  // Medium bits
};

// One distinct block: 24 bytes (packed to 4-byte alignment: the arena is the bulk of the
// index's memory). Holders live inline (up to kInline) or, once there are more, all in
// Impl::overflow[o], where o is kept in the first two inline slots (count() == kSpilled).
// `meta` packs the inline holders' tiers (3 bits each, Medium bits) in bits 0-8 and
// their count (or kSpilled) in bits 12-15.
//
// `holder_sig` is an order-independent fingerprint of the holder set with its tiers (the
// XOR of a mix of each (endpoint, tiers)). Along a prompt, consecutive blocks usually
// have the same holders (a system prompt cached on the same endpoints): match() compares
// fingerprints and walks such runs in O(1) per block instead of intersecting sets. It is
// 32 bits: two different sets agree with probability 2^-32 per comparison, and the cost
// of that is one request's match counting a block too many on one endpoint.
constexpr uint8_t kSpilled = 0xF;
struct __attribute__((packed, aligned(4))) Entry {
  BlockKey key;
  uint32_t holder_sig;
  uint32_t last_use;  // tick of the last store or match (LRU)
  uint16_t ids[kInline];
  uint16_t meta;  // tiers of the inline holders (bits 0-8), their count (bits 12-15)

  uint8_t count() const { return static_cast<uint8_t>(meta >> 12); }
  uint8_t tiers_at(int i) const {
    return static_cast<uint8_t>((meta >> (kTierBits * i)) & kAllTiers);
  }
  bool spilled() const { return count() == kSpilled; }
  uint32_t overflow() const { return uint32_t{ids[0]} | uint32_t{ids[1]} << 16; }
  void set_overflow(uint32_t o) {
    ids[0] = static_cast<uint16_t>(o);
    ids[1] = static_cast<uint16_t>(o >> 16);
    meta = static_cast<uint16_t>(kSpilled << 12);
  }
};
static_assert(sizeof(Entry) == 24);

uint32_t holder_mix(uint16_t endpoint, uint8_t tiers) {
  if (tiers == 0) return 0;
  uint64_t x = (uint64_t{endpoint} << kTierBits | tiers) * 0x9E3779B97F4A7C15ULL;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ULL;
  return static_cast<uint32_t>(x ^ (x >> 32));
}

struct EndpointState {
  internal::FlatMap64<uint32_t> engine_to_entry;  // engine hash -> arena index
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
  internal::KeyTable by_key;  // own key -> arena index
  std::vector<std::vector<Holder>> overflow;
  std::vector<uint32_t> free_overflow;
  std::vector<EndpointState> endpoints;
  size_t held_pairs = 0;
  uint32_t tick = 1;

  // Scratch for match(), sized to the endpoint count.
  std::vector<uint32_t> stamp;  // stamp[e] == gen: e holds the block being matched
  uint32_t gen = 0;
  std::vector<uint8_t> stamp_tiers;
  std::vector<uint32_t> gpu, total, disk;
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
    if (en.spilled()) {
      for (const Holder& h : overflow[en.overflow()]) fn(h.endpoint, h.tiers);
    } else {
      for (int i = 0; i < en.count(); ++i) fn(en.ids[i], en.tiers_at(i));
    }
  }

  // Tiers endpoint e holds `en` in; 0 if it is not a holder.
  uint8_t get_tiers(const Entry& en, uint16_t e) const {
    if (en.spilled()) {
      for (const Holder& h : overflow[en.overflow()]) {
        if (h.endpoint == e) return h.tiers;
      }
      return 0;
    }
    for (int i = 0; i < en.count(); ++i) {
      if (en.ids[i] == e) return en.tiers_at(i);
    }
    return 0;
  }

  // Sets e's tiers to t (t == 0 removes e), moving holders between the inline slots and
  // an overflow vector as the count crosses kInline. REQUIRES: t != get_tiers(en, e).
  void set_tiers(Entry& en, uint16_t e, uint8_t t) {
    en.holder_sig ^= holder_mix(e, get_tiers(en, e)) ^ holder_mix(e, t);
    Holder all[kInline + 1];
    std::vector<Holder>* big = en.spilled() ? &overflow[en.overflow()] : nullptr;
    if (big != nullptr) {
      auto it =
          std::find_if(big->begin(), big->end(), [&](const Holder& h) { return h.endpoint == e; });
      if (it != big->end() && t != 0) {
        it->tiers = t;
        return;
      }
      if (it == big->end()) {
        big->push_back({e, t});
        return;
      }
      *it = big->back();
      big->pop_back();
      if (big->size() > kInline) return;
      // Few enough to move back inline.
      int n = 0;
      for (const Holder& h : *big) all[n++] = h;
      release_overflow(en.overflow());
      pack_inline(en, all, n);
      return;
    }
    int n = 0;
    bool found = false;
    for (int i = 0; i < en.count(); ++i) {
      Holder h{en.ids[i], en.tiers_at(i)};
      if (h.endpoint == e) {
        found = true;
        if (t == 0) continue;
        h.tiers = t;
      }
      all[n++] = h;
    }
    if (!found) all[n++] = {e, t};
    if (n <= kInline) {
      pack_inline(en, all, n);
      return;
    }
    uint32_t o = acquire_overflow();
    overflow[o].assign(all, all + n);
    en.set_overflow(o);
  }

  static void pack_inline(Entry& en, const Holder* hs, int n) {
    uint32_t meta = static_cast<uint32_t>(n) << 12;
    for (int i = 0; i < n; ++i) {
      en.ids[i] = hs[i].endpoint;
      meta |= uint32_t{hs[i].tiers} << (kTierBits * i);
    }
    en.meta = static_cast<uint16_t>(meta);
  }

  uint32_t acquire_overflow() {
    if (!free_overflow.empty()) {
      uint32_t o = free_overflow.back();
      free_overflow.pop_back();
      return o;
    }
    overflow.emplace_back();
    return static_cast<uint32_t>(overflow.size() - 1);
  }

  void release_overflow(uint32_t o) {
    overflow[o].clear();
    overflow[o].shrink_to_fit();
    free_overflow.push_back(o);
  }

  // Adds `bits` to endpoint e's tiers; returns true if e was not a holder before.
  bool add_holder(Entry& en, uint16_t e, uint8_t bits) {
    uint8_t old = get_tiers(en, e);
    if ((old | bits) != old) set_tiers(en, e, static_cast<uint8_t>(old | bits));
    return old == 0;
  }

  // Clears `bits` of endpoint e. Returns true if e stopped being a holder; `was_holder`
  // tells whether e held the entry at all.
  bool remove_holder_bits(Entry& en, uint16_t e, uint8_t bits, bool& was_holder) {
    uint8_t old = get_tiers(en, e);
    was_holder = old != 0;
    uint8_t now = static_cast<uint8_t>(old & ~bits);
    if (now != old) set_tiers(en, e, now);
    return was_holder && now == 0;
  }

  bool has_holders(const Entry& en) const { return en.count() > 0; }

  // --- entries ---

  uint32_t find(BlockKey key) const {
    return by_key.find(key, [this](uint32_t i) { return arena[i].key; });
  }

  // `hint`: where the key probably is (the entry after the parent's: chains stored
  // together sit together in the arena), checked before the hash table.
  uint32_t find_or_create(BlockKey key, uint32_t hint) {
    if (hint < arena.size() && arena[hint].key == key && has_holders(arena[hint])) return hint;
    uint32_t idx = find(key);
    if (idx != kNone) return idx;
    if (!free_list.empty()) {
      idx = free_list.back();
      free_list.pop_back();
    } else {
      idx = static_cast<uint32_t>(arena.size());
      if (arena.size() == arena.capacity()) arena.reserve(arena.size() + arena.size() / 2 + 64);
      arena.emplace_back();
    }
    arena[idx] = Entry{key, 0, tick, {0, 0, 0}, 0};
    by_key.insert_new(key, idx);
    return idx;
  }

  void free_entry(uint32_t idx) {
    Entry& en = arena[idx];
    by_key.erase(en.key, [this](uint32_t i) { return arena[i].key; });
    if (en.spilled()) release_overflow(en.overflow());
    en = Entry{0, 0, 0, {0, 0, 0}, 0};
    free_list.push_back(idx);
  }

  void enforce_capacity() {
    size_t cap = options.capacity_blocks;
    if (cap == 0 || by_key.size() <= cap) return;
    // Evict in batches: the least recently used ~1/16 of the capacity at once, so the
    // O(n) selection and the sweep of the endpoints' engine maps are amortized.
    size_t target = cap - cap / 16;
    std::vector<std::pair<uint32_t, uint32_t>> live;  // (last_use, idx)
    live.reserve(by_key.size());
    for (uint32_t i = 0; i < arena.size(); ++i) {
      if (has_holders(arena[i])) live.push_back({uint32_t{arena[i].last_use}, i});
    }
    size_t drop = live.size() > target ? live.size() - target : 0;
    if (drop == 0) return;
    std::nth_element(live.begin(), live.begin() + static_cast<ptrdiff_t>(drop - 1), live.end());
    std::vector<bool> doomed(arena.size());
    for (size_t i = 0; i < drop; ++i) {
      uint32_t idx = live[i].second;
      doomed[idx] = true;
      for_each_holder(arena[idx], [&](uint16_t e, uint8_t) {
        --endpoints[e].blocks_held;
        --held_pairs;
      });
    }
    for (EndpointState& st : endpoints) {
      st.engine_to_entry.erase_if([&](uint64_t, uint32_t idx) { return doomed[idx]; });
    }
    for (size_t i = 0; i < drop; ++i) free_entry(live[i].second);
  }

  void clear_endpoint(EndpointId e) {
    if (e >= endpoints.size()) return;
    EndpointState& st = endpoints[e];
    st.engine_to_entry.for_each([&](uint64_t, uint32_t& idx) {
      bool was = false;
      if (remove_holder_bits(arena[idx], static_cast<uint16_t>(e), kAllTiers, was) && was) {
        --held_pairs;
        if (!has_holders(arena[idx])) free_entry(idx);
      }
    });
    st.engine_to_entry.clear();
    st.blocks_held = 0;
  }
};

PreciseIndex::PreciseIndex(Options options) : impl_(std::make_unique<Impl>(std::move(options))) {}
PreciseIndex::~PreciseIndex() = default;

void PreciseIndex::apply_stored(EndpointId endpoint, const BlockStoredEvent& ev) {
  Impl& m = *impl_;
  EndpointState& st = m.endpoint(endpoint);
  const size_t n = ev.block_hashes.size();
  if (ev.token_ids.empty() && !ev.parent_block_hash && n > 0 &&
      ev.block_size == m.options.block_size) {
    apply_copied(endpoint, ev);
    return;
  }
  if (ev.block_size != m.options.block_size || ev.token_ids.size() != n * ev.block_size) {
    ++st.stats.block_size_mismatch;
    return;
  }
  BlockKey parent;
  uint32_t hint = kNone;
  if (ev.parent_block_hash) {
    const uint32_t* p = st.engine_to_entry.find(*ev.parent_block_hash);
    if (p == nullptr) {
      ++st.stats.unknown_parent;
      return;
    }
    parent = m.arena[*p].key;
    hint = *p + 1;
  } else if (ev.cache_salt.empty()) [[likely]] {
    parent = m.seed_for(ev.lora_name);
  } else {
    // Salts are per tenant or per user, unbounded: hashed each time, never kept.
    parent = block_seed(m.options.model, ev.lora_name, ev.cache_salt);
  }
  const uint8_t bit = medium_bit(ev.medium);
  const uint16_t e = static_cast<uint16_t>(endpoint);
  ++m.tick;
  for (size_t i = 0; i < n; ++i) {
    BlockKey own = hash_block(parent, ev.token_ids.subspan(i * ev.block_size, ev.block_size));
    uint32_t idx = m.find_or_create(own, hint);
    hint = idx + 1;
    auto [mapped, fresh] = st.engine_to_entry.insert(ev.block_hashes[i], idx);
    if (!fresh && *mapped != idx) {
      // The engine reused a hash for other content: drop the old block first.
      uint32_t old = *mapped;
      bool was = false;
      if (m.remove_holder_bits(m.arena[old], e, kAllTiers, was)) {
        --st.blocks_held;
        --m.held_pairs;
        if (!m.has_holders(m.arena[old])) m.free_entry(old);
      }
      *mapped = idx;
    }
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

void PreciseIndex::apply_copied(EndpointId endpoint, const BlockStoredEvent& ev) {
  Impl& m = *impl_;
  EndpointState& st = m.endpoint(endpoint);
  const uint8_t bit = medium_bit(ev.medium);
  const uint16_t e = static_cast<uint16_t>(endpoint);
  ++m.tick;
  for (const uint64_t h : ev.block_hashes) {
    const uint32_t* found = st.engine_to_entry.find(h);
    if (found == nullptr) {
      ++st.stats.unknown_copied;
      continue;
    }
    ++st.stats.stored_blocks;
    Entry& en = m.arena[*found];
    en.last_use = m.tick;
    if (m.add_holder(en, e, bit)) {  // not reached while the mapping exists; kept exact
      ++st.blocks_held;
      ++m.held_pairs;
    }
  }
}

void PreciseIndex::apply_removed(EndpointId endpoint, const BlockRemovedEvent& ev) {
  Impl& m = *impl_;
  EndpointState& st = m.endpoint(endpoint);
  const uint8_t bit = medium_bit(ev.medium);
  const uint16_t e = static_cast<uint16_t>(endpoint);
  for (uint64_t h : ev.block_hashes) {
    const uint32_t* found = st.engine_to_entry.find(h);
    if (found == nullptr) {
      ++st.stats.unknown_removed;
      continue;
    }
    ++st.stats.removed_blocks;
    const uint32_t idx = *found;
    bool was = false;
    bool gone = m.remove_holder_bits(m.arena[idx], e, bit, was);
    if (!was) {  // two engine hashes named this block and the other removed it already
      st.engine_to_entry.erase(h);
      continue;
    }
    if (gone) {
      st.engine_to_entry.erase(h);
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
    m.disk.assign(ne, 0);
    m.gpu_alive.assign(ne, 0);
  }
  ++m.tick;
  const uint8_t kGpuBit = medium_bit(Medium::kGpu);
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
      m.disk[e] = t == kDiskOnly ? 1 : 0;
      m.stamp_tiers[e] = t;  // the tiers of e's current run (settle reads them)
    });
  }
  // Blocks whose holder set equals the previous block's are counted lazily: `pending`
  // of them are added to every active endpoint when the set next changes. Equal sets
  // (with their tiers) mean an active endpoint's tiers are still stamp_tiers[e].
  uint32_t prev_sig = m.arena[idx].holder_sig;
  uint32_t pending = 0;
  auto settle = [&] {
    if (pending == 0) return;
    for (uint16_t e : active) {
      m.total[e] += pending;
      if (m.gpu_alive[e]) {
        m.gpu[e] += pending;
      } else if (m.stamp_tiers[e] == kDiskOnly) {
        m.disk[e] += pending;
      }
    }
    pending = 0;
  };
  Entry* const arena = m.arena.data();
  const size_t arena_size = m.arena.size();
  const uint32_t tick = m.tick;
  const size_t n = keys.size();
  for (size_t i = 1; i < n && !active.empty(); ++i) {
    // The common case in a tight loop: the next block is the next arena entry and has
    // the same holders as the one before.
    while (idx + 1 < arena_size && arena[idx + 1].key == keys[i] &&
           arena[idx + 1].holder_sig == prev_sig) {
      ++idx;
      __builtin_prefetch(arena + idx + 24);  // ~10 cache lines ahead: the walk is sequential
      arena[idx].last_use = tick;
      ++pending;
      if (++i == n) break;
    }
    if (i == n) break;
    if (idx + 1 < arena_size && arena[idx + 1].key == keys[i]) {
      ++idx;
    } else {
      idx = m.find(keys[i]);
      if (idx == kNone) break;
    }
    Entry& en = arena[idx];
    en.last_use = tick;
    if (en.holder_sig == prev_sig) {
      ++pending;
      continue;
    }
    settle();
    prev_sig = en.holder_sig;
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
        out.push_back({e, m.gpu[e], m.total[e], m.disk[e]});
        continue;
      }
      ++m.total[e];
      if (m.gpu_alive[e] && (m.stamp_tiers[e] & kGpuBit)) {
        ++m.gpu[e];
      } else {
        m.gpu_alive[e] = 0;
        if (m.stamp_tiers[e] == kDiskOnly) ++m.disk[e];
      }
      active[w++] = e;
    }
    active.resize(w);
  }
  settle();
  for (uint16_t e : active) out.push_back({e, m.gpu[e], m.total[e], m.disk[e]});
}

size_t PreciseIndex::memory_bytes() const {
  const Impl& m = *impl_;
  size_t bytes = m.arena.capacity() * sizeof(Entry) + m.free_list.capacity() * 4 +
                 m.by_key.memory_bytes() + m.overflow.capacity() * sizeof(std::vector<Holder>) +
                 m.free_overflow.capacity() * 4;
  for (const auto& v : m.overflow) bytes += v.capacity() * sizeof(Holder);
  for (const auto& e : m.endpoints) {
    bytes += sizeof(EndpointState) + e.engine_to_entry.memory_bytes();
  }
  return bytes;
}

size_t PreciseIndex::distinct_blocks() const { return impl_->by_key.size(); }
size_t PreciseIndex::held_pairs() const { return impl_->held_pairs; }

}  // namespace kvgate::kv
