#include "core/kv/approx_index.h"

#include <algorithm>

#include "core/kv/internal/flat_map.h"

namespace kvgate::kv {
namespace {

constexpr uint32_t kNone = 0xFFFFFFFFu;

struct Holder {
  uint16_t endpoint;
  Nanos last_use;
};

struct Entry {
  BlockKey key = 0;
  uint32_t depth = 0;  // block position in the requests that recorded it
  bool live = false;
  std::vector<Holder> holders;
};

}  // namespace

struct ApproxIndex::Impl {
  Options options;
  std::vector<Entry> arena;
  std::vector<uint32_t> free_list;
  internal::FlatMap64<uint32_t> by_key;
  size_t held_pairs = 0;

  std::vector<uint32_t> stamp;
  uint32_t gen = 0;
  std::vector<uint32_t> count;
  std::vector<uint16_t> active;

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
    en.holders.clear();
    *slot = idx;
    return idx;
  }

  void free_entry(uint32_t idx) {
    Entry& en = arena[idx];
    by_key.erase(en.key);
    held_pairs -= en.holders.size();
    en.holders.clear();
    en.holders.shrink_to_fit();
    en.live = false;
    free_list.push_back(idx);
  }

  void prune() {
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
};

ApproxIndex::ApproxIndex(Options options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
}
ApproxIndex::~ApproxIndex() = default;

void ApproxIndex::record(EndpointId endpoint, std::span<const BlockKey> keys, Nanos now) {
  Impl& m = *impl_;
  const uint16_t e = static_cast<uint16_t>(endpoint);
  for (size_t i = 0; i < keys.size(); ++i) {
    Entry& en = m.arena[m.find_or_create(keys[i], static_cast<uint32_t>(i))];
    auto it = std::find_if(en.holders.begin(), en.holders.end(),
                           [&](const Holder& h) { return h.endpoint == e; });
    if (it != en.holders.end()) {
      it->last_use = now;
    } else {
      en.holders.push_back({e, now});
      ++m.held_pairs;
    }
  }
  if (m.options.capacity_pairs > 0 && m.held_pairs > m.options.capacity_pairs) m.prune();
}

void ApproxIndex::export_pairs(Nanos now, std::vector<Held>& out) const {
  const Nanos cutoff = now - impl_->options.ttl;
  for (const Entry& en : impl_->arena) {
    if (!en.live) continue;
    for (const Holder& h : en.holders) {
      if (h.last_use >= cutoff) out.push_back({en.key, en.depth, h.endpoint, h.last_use});
    }
  }
}

bool ApproxIndex::restore(const Held& held, Nanos now) {
  Impl& m = *impl_;
  if (held.last_use < now - m.options.ttl) return false;
  const uint16_t e = static_cast<uint16_t>(held.endpoint);
  Entry& en = m.arena[m.find_or_create(held.key, held.depth)];
  auto it = std::find_if(en.holders.begin(), en.holders.end(),
                         [&](const Holder& h) { return h.endpoint == e; });
  if (it != en.holders.end()) {
    it->last_use = std::max(it->last_use, held.last_use);
  } else {
    en.holders.push_back({e, held.last_use});
    ++m.held_pairs;
  }
  if (m.options.capacity_pairs > 0 && m.held_pairs > m.options.capacity_pairs) m.prune();
  return true;
}

void ApproxIndex::expire(Nanos now) {
  Impl& m = *impl_;
  const Nanos cutoff = now - m.options.ttl;
  for (uint32_t i = 0; i < m.arena.size(); ++i) {
    Entry& en = m.arena[i];
    if (!en.live) continue;
    size_t before = en.holders.size();
    std::erase_if(en.holders, [&](const Holder& h) { return h.last_use < cutoff; });
    m.held_pairs -= before - en.holders.size();
    if (en.holders.empty()) m.free_entry(i);
  }
}

void ApproxIndex::blocks_held(Nanos now, std::vector<size_t>& out) const {
  const Nanos cutoff = now - impl_->options.ttl;
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
    Entry& en = m.arena[i];
    if (!en.live) continue;
    size_t before = en.holders.size();
    std::erase_if(en.holders, [&](const Holder& h) { return h.endpoint == endpoint; });
    m.held_pairs -= before - en.holders.size();
    if (en.holders.empty()) m.free_entry(i);
  }
}

size_t ApproxIndex::memory_bytes() const {
  const Impl& m = *impl_;
  size_t bytes =
      m.arena.capacity() * sizeof(Entry) + m.free_list.capacity() * 4 + m.by_key.memory_bytes();
  for (const Entry& en : m.arena) bytes += en.holders.capacity() * sizeof(Holder);
  return bytes;
}

size_t ApproxIndex::distinct_blocks() const { return impl_->by_key.size(); }
size_t ApproxIndex::held_pairs() const { return impl_->held_pairs; }

}  // namespace kvgate::kv
