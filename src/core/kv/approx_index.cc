#include "core/kv/approx_index.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "core/kv/internal/flat_map.h"

namespace kvgate::kv {
namespace {

constexpr uint32_t kNone = 0xFFFFFFFFu;

struct Holder {
  uint16_t endpoint;
  bool host;  // flagged as on the host tier (only with a host tier)
  Nanos last_use;
};

// The holders of one block, in the order they were added. Most blocks (the deep, unshared
// ones) have one, and it sits in the entry itself: creating such a block allocates
// nothing, and recording or matching it reads no memory beyond its arena slot. A second
// holder moves them all to a heap array, so that they stay contiguous (a pointer walk).
class Holders {
 public:
  Holders() = default;
  Holders(Holders&& o) noexcept
      : one_(o.one_), heap_(std::move(o.heap_)), size_(o.size_), capacity_(o.capacity_) {
    o.reset();
  }
  Holders& operator=(Holders&& o) noexcept {
    if (this != &o) {
      one_ = o.one_;
      heap_ = std::move(o.heap_);
      size_ = o.size_;
      capacity_ = o.capacity_;
      o.reset();
    }
    return *this;
  }
  Holders(const Holders&) = delete;
  Holders& operator=(const Holders&) = delete;
  ~Holders() = default;

  Holder* begin() { return heap_ ? heap_.get() : &one_; }
  Holder* end() { return begin() + size_; }
  const Holder* begin() const { return heap_ ? heap_.get() : &one_; }
  const Holder* end() const { return begin() + size_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  void push_back(const Holder& h) {
    if (size_ == capacity_) grow();
    begin()[size_++] = h;
  }
  // Removes the holders `drop` selects (called once per holder, in order), keeping the
  // others' order, as std::erase_if does.
  template <typename Pred>
  void erase_if(Pred drop) {
    size_ = static_cast<uint32_t>(std::remove_if(begin(), end(), drop) - begin());
  }
  // Empties the list and frees its heap array.
  void reset() {
    heap_.reset();
    size_ = 0;
    capacity_ = 1;
  }
  // Bytes held outside the entry.
  size_t heap_bytes() const { return heap_ ? capacity_ * sizeof(Holder) : 0; }

 private:
  void grow() {
    const uint32_t capacity = std::max<uint32_t>(4, capacity_ * 2);
    auto bigger = std::make_unique<Holder[]>(capacity);
    std::copy(begin(), end(), bigger.get());
    heap_ = std::move(bigger);
    capacity_ = capacity;
  }

  Holder one_{};                    // the only holder while heap_ is null
  std::unique_ptr<Holder[]> heap_;  // every holder, once there were two
  uint32_t size_ = 0;
  uint32_t capacity_ = 1;
};

struct Entry {
  BlockKey key = 0;
  uint32_t depth = 0;  // block position in the requests that recorded it
  bool live = false;
  Holders holders;
};

}  // namespace

struct ApproxIndex::Impl {
  Options options;
  std::vector<Entry> arena;
  std::vector<uint32_t> free_list;
  internal::FlatMap64<uint32_t> by_key;
  size_t held_pairs = 0;  // every pair stored, flagged or not
  size_t host_pairs = 0;  // the pairs flagged host

  std::vector<uint32_t> stamp;
  uint32_t gen = 0;
  std::vector<uint32_t> count;
  std::vector<uint16_t> active;
  // match_tiered's scratch, per endpoint: the GPU run so far, whether it is still going,
  // and whether the block being walked is on the GPU tier there.
  std::vector<uint32_t> gpu;
  std::vector<uint8_t> gpu_alive;
  std::vector<uint8_t> stamp_gpu;

  bool tiered() const { return options.host_ttl > 0; }
  size_t gpu_flagged() const { return held_pairs - host_pairs; }
  bool over_capacity() const {
    return (options.capacity_pairs > 0 && gpu_flagged() > options.capacity_pairs) ||
           (options.host_capacity_pairs > 0 && host_pairs > options.host_capacity_pairs);
  }
  void set_host(Holder& h, bool host) {
    if (h.host == host) return;
    h.host = host;
    if (host) {
      ++host_pairs;
    } else {
      --host_pairs;
    }
  }

  uint32_t find(BlockKey key) const {
    const uint32_t* idx = by_key.find(key);
    return idx ? *idx : kNone;
  }

  uint32_t find_or_create(BlockKey key, uint32_t depth) {
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
    Entry& en = arena[idx];
    en.key = key;
    en.depth = depth;
    en.live = true;
    en.holders.reset();
    *slot = idx;
    return idx;
  }

  // find_or_create for a prompt's key whose predecessor in the prompt sits at `prev`
  // (kNone for the first key). The blocks of a prompt recorded before usually lie in
  // consecutive slots (find_or_create appends a new prompt's blocks in order; match()
  // relies on it too), so the slot after `prev` is checked first: a live slot holding
  // `key` is the one by_key names (a key has one live slot), and the hash map, a cache
  // miss per key, is skipped.
  uint32_t find_or_create_after(uint32_t prev, BlockKey key, uint32_t depth) {
    if (prev != kNone) {
      const uint32_t next = prev + 1;
      if (next < arena.size() && arena[next].live && arena[next].key == key) return next;
    }
    return find_or_create(key, depth);
  }

  void free_entry(uint32_t idx) {
    Entry& en = arena[idx];
    by_key.erase(en.key);
    held_pairs -= en.holders.size();
    for (const Holder& h : en.holders) host_pairs -= h.host ? 1 : 0;
    en.holders.reset();
    en.live = false;
    free_list.push_back(idx);
  }

  // Removes the holders of arena[idx] that `drop` selects, keeping the counts; frees the
  // entry when none is left.
  template <typename Pred>
  void erase_holders(uint32_t idx, Pred drop) {
    Entry& en = arena[idx];
    const size_t before = en.holders.size();
    size_t host = 0;
    en.holders.erase_if([&](const Holder& h) {
      if (!drop(h)) return false;
      host += h.host ? 1 : 0;
      return true;
    });
    held_pairs -= before - en.holders.size();
    host_pairs -= host;
    if (en.holders.empty()) free_entry(idx);
  }

  void prune(Nanos now) {
    if (tiered()) {
      prune_tiered(now);
    } else {
      prune_untiered();
    }
  }

  // Without a host tier: drops whole blocks, deepest first, to 80% of the capacity.
  void prune_untiered() {
    const size_t target = options.capacity_pairs - options.capacity_pairs / 5;
    struct Victim {
      uint32_t depth;
      Nanos newest;
      uint32_t idx;
    };
    std::vector<Victim> victims;
    victims.reserve(by_key.size());
    for (uint32_t i = 0; i < arena.size(); ++i) {
      const Entry& en = arena[i];
      if (!en.live) continue;
      Nanos newest = 0;
      for (const Holder& h : en.holders) newest = std::max(newest, h.last_use);
      victims.push_back({en.depth, newest, i});
    }
    // Deepest first; among equals, the least recently used first.
    std::sort(victims.begin(), victims.end(), [](const Victim& a, const Victim& b) {
      if (a.depth != b.depth) return a.depth > b.depth;
      if (a.newest != b.newest) return a.newest < b.newest;
      return a.idx < b.idx;
    });
    for (const Victim& v : victims) {
      if (held_pairs <= target) break;
      free_entry(v.idx);
    }
  }

  // --- The host tier (tiered() only).

  // Drops the pairs past both tiers at `now` and flags the ones past the GPU tier.
  void age(Nanos now) {
    const Nanos gpu_cutoff = now - options.ttl;
    const Nanos cutoff = gpu_cutoff - options.host_ttl;
    for (uint32_t i = 0; i < arena.size(); ++i) {
      Entry& en = arena[i];
      if (!en.live) continue;
      for (Holder& h : en.holders) {
        if (h.last_use < gpu_cutoff) set_host(h, true);
      }
      erase_holders(i, [&](const Holder& h) { return h.last_use < cutoff; });
    }
  }

  // Live blocks with at least one pair in the tier `host` names, deepest first; among
  // equals, the one whose newest such pair is oldest first, then by arena slot.
  struct Ranked {
    uint32_t depth;
    Nanos newest;
    uint32_t idx;
  };
  std::vector<Ranked> ranked(bool host) const {
    std::vector<Ranked> victims;
    for (uint32_t i = 0; i < arena.size(); ++i) {
      const Entry& en = arena[i];
      if (!en.live) continue;
      bool any = false;
      Nanos newest = 0;
      for (const Holder& h : en.holders) {
        if (h.host != host) continue;
        newest = any ? std::max(newest, h.last_use) : h.last_use;
        any = true;
      }
      if (any) victims.push_back({en.depth, newest, i});
    }
    std::sort(victims.begin(), victims.end(), [](const Ranked& a, const Ranked& b) {
      if (a.depth != b.depth) return a.depth > b.depth;
      if (a.newest != b.newest) return a.newest < b.newest;
      return a.idx < b.idx;
    });
    return victims;
  }

  // Moves the GPU pairs of the deepest blocks to the host tier until at most 80% of the
  // capacity stay on the GPU tier. A moved pair's host_ttl starts now.
  void demote(Nanos now) {
    const size_t target = options.capacity_pairs - options.capacity_pairs / 5;
    const Nanos moved = now - options.ttl - 1;  // past the GPU tier from now on
    for (const Ranked& v : ranked(/*host=*/false)) {
      if (gpu_flagged() <= target) break;
      for (Holder& h : arena[v.idx].holders) {
        if (h.host) continue;
        set_host(h, true);
        h.last_use = std::min(h.last_use, moved);
      }
    }
  }

  // Over the host tier's capacity: drops its pairs of the deepest blocks to 80% of it.
  void trim_host() {
    const size_t cap = options.host_capacity_pairs;
    if (cap == 0 || host_pairs <= cap) return;
    const size_t target = cap - cap / 5;
    for (const Ranked& v : ranked(/*host=*/true)) {
      if (host_pairs <= target) break;
      erase_holders(v.idx, [](const Holder& h) { return h.host; });
    }
  }

  void prune_tiered(Nanos now) {
    const bool gpu_over = options.capacity_pairs > 0 && gpu_flagged() > options.capacity_pairs;
    age(now);
    if (gpu_over) demote(now);
    trim_host();
  }

  void match_tiered(std::span<const BlockKey> keys, Nanos now, std::vector<EndpointMatch>& out);
};

// match() with a host tier: the any-tier run as match() counts it, and beside it the GPU
// run (leading blocks on the GPU tier), as PreciseIndex::match does for its media.
void ApproxIndex::Impl::match_tiered(std::span<const BlockKey> keys, Nanos now,
                                     std::vector<EndpointMatch>& out) {
  const Nanos gpu_cutoff = now - options.ttl;
  const Nanos cutoff = gpu_cutoff - options.host_ttl;
  auto on_gpu = [&](const Holder& h) -> uint8_t {
    return !h.host && h.last_use >= gpu_cutoff ? 1 : 0;
  };
  active.clear();
  uint32_t idx = find(keys[0]);
  if (idx == kNone) return;
  auto ensure = [&](uint16_t e) {
    if (e < stamp.size() && e < gpu.size()) return;
    const size_t n = std::max(stamp.size(), size_t{e} + 1);
    stamp.resize(n, 0);
    count.resize(n, 0);
    gpu.resize(n, 0);
    gpu_alive.resize(n, 0);
    stamp_gpu.resize(n, 0);
  };
  for (const Holder& h : arena[idx].holders) {
    if (h.last_use < cutoff) continue;
    ensure(h.endpoint);
    active.push_back(h.endpoint);
    count[h.endpoint] = 1;
    gpu_alive[h.endpoint] = on_gpu(h);
    gpu[h.endpoint] = gpu_alive[h.endpoint];
  }
  for (size_t i = 1; i < keys.size() && !active.empty(); ++i) {
    uint32_t next = idx + 1;
    if (next < arena.size() && arena[next].live && arena[next].key == keys[i]) {
      idx = next;
    } else {
      idx = find(keys[i]);
      if (idx == kNone) break;
    }
    if (++gen == 0) {
      std::fill(stamp.begin(), stamp.end(), 0);
      gen = 1;
    }
    for (const Holder& h : arena[idx].holders) {
      if (h.last_use >= cutoff && h.endpoint < stamp_gpu.size()) {
        stamp[h.endpoint] = gen;
        stamp_gpu[h.endpoint] = on_gpu(h);
      }
    }
    size_t w = 0;
    for (uint16_t e : active) {
      if (stamp[e] != gen) {
        out.push_back({e, gpu[e], count[e]});
        continue;
      }
      ++count[e];
      if (gpu_alive[e] != 0 && stamp_gpu[e] != 0) {
        ++gpu[e];
      } else {
        gpu_alive[e] = 0;
      }
      active[w++] = e;
    }
    active.resize(w);
  }
  for (uint16_t e : active) out.push_back({e, gpu[e], count[e]});
}

ApproxIndex::ApproxIndex(Options options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
}
ApproxIndex::~ApproxIndex() = default;

void ApproxIndex::record(EndpointId endpoint, std::span<const BlockKey> keys, Nanos now) {
  Impl& m = *impl_;
  const uint16_t e = static_cast<uint16_t>(endpoint);
  uint32_t idx = kNone;
  for (size_t i = 0; i < keys.size(); ++i) {
    idx = m.find_or_create_after(idx, keys[i], static_cast<uint32_t>(i));
    Entry& en = m.arena[idx];
    auto it = std::find_if(en.holders.begin(), en.holders.end(),
                           [&](const Holder& h) { return h.endpoint == e; });
    if (it != en.holders.end()) {
      m.set_host(*it, false);
      it->last_use = now;
    } else {
      en.holders.push_back({e, false, now});
      ++m.held_pairs;
    }
  }
  if (m.over_capacity()) m.prune(now);
}

void ApproxIndex::export_pairs(Nanos now, std::vector<Held>& out) const {
  const Nanos cutoff = now - impl_->options.ttl - impl_->options.host_ttl;
  for (const Entry& en : impl_->arena) {
    if (!en.live) continue;
    for (const Holder& h : en.holders) {
      if (h.last_use >= cutoff) out.push_back({en.key, en.depth, h.endpoint, h.last_use});
    }
  }
}

bool ApproxIndex::restore(const Held& held, Nanos now) {
  Impl& m = *impl_;
  const Nanos gpu_cutoff = now - m.options.ttl;
  if (held.last_use < gpu_cutoff - m.options.host_ttl) return false;
  const uint16_t e = static_cast<uint16_t>(held.endpoint);
  Entry& en = m.arena[m.find_or_create(held.key, held.depth)];
  auto it = std::find_if(en.holders.begin(), en.holders.end(),
                         [&](const Holder& h) { return h.endpoint == e; });
  if (it != en.holders.end()) {
    it->last_use = std::max(it->last_use, held.last_use);
  } else {
    en.holders.push_back({e, false, held.last_use});
    ++m.held_pairs;
    it = en.holders.end() - 1;
  }
  // Without a host tier last_use >= gpu_cutoff here, and nothing is flagged.
  m.set_host(*it, it->last_use < gpu_cutoff);
  if (m.over_capacity()) m.prune(now);
  return true;
}

void ApproxIndex::expire(Nanos now) {
  Impl& m = *impl_;
  if (m.tiered()) {
    m.age(now);
    m.trim_host();
    return;
  }
  const Nanos cutoff = now - m.options.ttl;
  for (uint32_t i = 0; i < m.arena.size(); ++i) {
    if (!m.arena[i].live) continue;
    m.erase_holders(i, [&](const Holder& h) { return h.last_use < cutoff; });
  }
}

void ApproxIndex::blocks_held(Nanos now, std::vector<size_t>& out) const {
  const Nanos cutoff = now - impl_->options.ttl - impl_->options.host_ttl;
  out.clear();
  for (const Entry& en : impl_->arena) {
    if (!en.live) continue;
    for (const Holder& h : en.holders) {
      if (h.last_use < cutoff) continue;
      if (h.endpoint >= out.size()) out.resize(h.endpoint + 1, 0);
      ++out[h.endpoint];
    }
  }
}

void ApproxIndex::match(std::span<const BlockKey> keys, Nanos now,
                        std::vector<EndpointMatch>& out) {
  Impl& m = *impl_;
  if (keys.empty()) return;
  if (m.tiered()) {
    m.match_tiered(keys, now, out);
    return;
  }
  const Nanos cutoff = now - m.options.ttl;
  auto& active = m.active;
  active.clear();
  uint32_t idx = m.find(keys[0]);
  if (idx == kNone) return;
  auto ensure = [&](uint16_t e) {
    if (e >= m.stamp.size()) {
      m.stamp.resize(e + 1, 0);
      m.count.resize(e + 1, 0);
    }
  };
  for (const Holder& h : m.arena[idx].holders) {
    if (h.last_use < cutoff) continue;
    ensure(h.endpoint);
    active.push_back(h.endpoint);
    m.count[h.endpoint] = 1;
  }
  for (size_t i = 1; i < keys.size() && !active.empty(); ++i) {
    uint32_t next = idx + 1;
    if (next < m.arena.size() && m.arena[next].live && m.arena[next].key == keys[i]) {
      idx = next;
    } else {
      idx = m.find(keys[i]);
      if (idx == kNone) break;
    }
    if (++m.gen == 0) {
      std::fill(m.stamp.begin(), m.stamp.end(), 0);
      m.gen = 1;
    }
    for (const Holder& h : m.arena[idx].holders) {
      if (h.last_use >= cutoff && h.endpoint < m.stamp.size()) m.stamp[h.endpoint] = m.gen;
    }
    size_t w = 0;
    for (uint16_t e : active) {
      if (m.stamp[e] != m.gen) {
        out.push_back({e, m.count[e], m.count[e]});
        continue;
      }
      ++m.count[e];
      active[w++] = e;
    }
    active.resize(w);
  }
  for (uint16_t e : active) out.push_back({e, m.count[e], m.count[e]});
}

void ApproxIndex::remove_endpoint(EndpointId endpoint) {
  Impl& m = *impl_;
  for (uint32_t i = 0; i < m.arena.size(); ++i) {
    if (!m.arena[i].live) continue;
    m.erase_holders(i, [&](const Holder& h) { return h.endpoint == endpoint; });
  }
}

size_t ApproxIndex::memory_bytes() const {
  const Impl& m = *impl_;
  size_t bytes =
      m.arena.capacity() * sizeof(Entry) + m.free_list.capacity() * 4 + m.by_key.memory_bytes();
  for (const Entry& en : m.arena) bytes += en.holders.heap_bytes();
  return bytes;
}

size_t ApproxIndex::distinct_blocks() const { return impl_->by_key.size(); }
size_t ApproxIndex::held_pairs() const { return impl_->held_pairs; }
size_t ApproxIndex::host_pairs() const { return impl_->host_pairs; }

}  // namespace kvgate::kv
