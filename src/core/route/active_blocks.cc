#include "core/route/active_blocks.h"

#include <algorithm>
#include <cassert>
#include <iterator>

namespace kvgate::route {
namespace {
constexpr uint32_t kNil = 0xffffffffu;
}  // namespace

// Open addressing (linear probing, backward-shift deletion) from block key to the
// endpoints holding it with their reference counts. The first holder sits in the slot
// itself (most blocks have one); more go to a per-key overflow array, reused through
// a free list, so that a widely shared block's holders are one contiguous read.
// Block keys are hashes already, but tests use small integers, so they are mixed once
// more (Fibonacci hashing).
struct ActiveBlocks::Table {
  struct Holder {
    kv::EndpointId endpoint;
    uint32_t refs;
  };
  struct Slot {
    kv::BlockKey key = 0;
    Holder first{0, 0};
    uint32_t overflow = kNil;  // index into overflows, holders 2..n
    uint32_t holders = 0;      // 0: empty slot
  };

  std::vector<Slot> slots = std::vector<Slot>(64);
  uint32_t shift = 64 - 6;
  size_t used = 0;
  std::vector<std::vector<Holder>> overflows;
  std::vector<uint32_t> free_overflows;

  size_t home(kv::BlockKey key) const {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ULL) >> shift);
  }
  size_t mask() const { return slots.size() - 1; }
  void prefetch(kv::BlockKey key) const { __builtin_prefetch(&slots[home(key)]); }

  // Slot holding `key`, or the empty slot where it would go.
  size_t find(kv::BlockKey key) const {
    size_t i = home(key);
    while (slots[i].holders != 0 && slots[i].key != key) i = (i + 1) & mask();
    return i;
  }

  template <typename F>
  void for_each_holder(const Slot& s, F f) const {
    if (s.holders == 0) return;
    f(s.first.endpoint);
    if (s.overflow != kNil) {
      for (const Holder& h : overflows[s.overflow]) f(h.endpoint);
    }
  }

  void grow() {
    std::vector<Slot> old = std::move(slots);
    slots.assign(old.size() * 2, Slot{});
    --shift;
    for (const Slot& s : old) {
      if (s.holders != 0) slots[find(s.key)] = s;
    }
  }

  // Removes the (now holder-less) entry at slot i, shifting its probe run back.
  void erase_slot(size_t i) {
    size_t j = i;
    for (;;) {
      j = (j + 1) & mask();
      if (slots[j].holders == 0) break;
      size_t h = home(slots[j].key);
      // Move j back to i unless its home lies cyclically in (i, j].
      bool between = i <= j ? (i < h && h <= j) : (i < h || h <= j);
      if (!between) {
        slots[i] = slots[j];
        i = j;
      }
    }
    slots[i] = Slot{};
    --used;
  }

  uint32_t new_overflow() {
    if (!free_overflows.empty()) {
      uint32_t o = free_overflows.back();
      free_overflows.pop_back();
      return o;
    }
    overflows.emplace_back();
    return static_cast<uint32_t>(overflows.size() - 1);
  }
  void free_overflow(Slot& s) {
    overflows[s.overflow].clear();
    free_overflows.push_back(s.overflow);
    s.overflow = kNil;
  }

  // Adds a reference; true if the endpoint did not hold the key.
  bool add(kv::BlockKey key, kv::EndpointId endpoint) {
    if ((used + 1) * 2 > slots.size()) grow();
    size_t i = find(key);
    Slot& s = slots[i];
    if (s.holders == 0) {
      s.key = key;
      s.first = {endpoint, 1};
      s.holders = 1;
      ++used;
      return true;
    }
    if (s.first.endpoint == endpoint) {
      ++s.first.refs;
      return false;
    }
    if (s.overflow == kNil) s.overflow = new_overflow();
    for (Holder& h : overflows[s.overflow]) {
      if (h.endpoint == endpoint) {
        ++h.refs;
        return false;
      }
    }
    overflows[s.overflow].push_back({endpoint, 1});
    ++s.holders;
    return true;
  }

  // Takes `endpoint` out of slot i's holders (whatever its count); erases the slot when
  // none remain. True if it was there.
  bool drop(size_t i, kv::EndpointId endpoint, bool all_refs) {
    Slot& s = slots[i];
    if (s.holders == 0) return false;
    std::vector<Holder>* more = s.overflow == kNil ? nullptr : &overflows[s.overflow];
    if (s.first.endpoint == endpoint) {
      if (!all_refs && --s.first.refs > 0) return false;
      if (more && !more->empty()) {
        s.first = more->back();
        more->pop_back();
      }
    } else {
      if (!more) return false;
      auto it = std::find_if(more->begin(), more->end(),
                             [&](const Holder& h) { return h.endpoint == endpoint; });
      if (it == more->end()) return false;
      if (!all_refs && --it->refs > 0) return false;
      *it = more->back();
      more->pop_back();
    }
    if (more && more->empty()) free_overflow(s);
    if (--s.holders == 0) erase_slot(i);
    return true;
  }

  // Drops a reference; true if the endpoint no longer holds the key.
  bool release(kv::BlockKey key, kv::EndpointId endpoint) {
    return drop(find(key), endpoint, /*all_refs=*/false);
  }
};

ActiveBlocks::ActiveBlocks() : table_(new Table) {}
ActiveBlocks::~ActiveBlocks() { delete table_; }

uint32_t ActiveBlocks::add(kv::EndpointId endpoint, std::span<const kv::BlockKey> keys) {
  if (per_endpoint_.size() <= endpoint) per_endpoint_.resize(endpoint + 1, 0);
  uint32_t added = 0;
  // Keys are hashes, so every lookup is a cache miss: ask for the slots a few keys
  // ahead so the misses overlap.
  constexpr size_t kAhead = 8;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i + kAhead < keys.size()) table_->prefetch(keys[i + kAhead]);
    added += table_->add(keys[i], endpoint) ? 1 : 0;
  }
  per_endpoint_[endpoint] += added;
  return added;
}

uint32_t ActiveBlocks::release(kv::EndpointId endpoint, std::span<const kv::BlockKey> keys) {
  uint32_t freed = 0;
  constexpr size_t kAhead = 8;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i + kAhead < keys.size()) table_->prefetch(keys[i + kAhead]);
    freed += table_->release(keys[i], endpoint) ? 1 : 0;
  }
  if (endpoint < per_endpoint_.size()) {
    assert(per_endpoint_[endpoint] >= freed);
    per_endpoint_[endpoint] -= freed;
  }
  return freed;
}

void ActiveBlocks::prefix(std::span<const kv::BlockKey> keys, std::vector<Prefix>& out) const {
  // holders(i), the endpoints holding keys[i], shrinks as i grows (holding key i implies
  // holding keys 0..i-1), and one of the same size is the same set. So each endpoint's
  // prefix length is where it drops out, and bisection on |holders| finds every drop
  // with O(drops x log n) lookups instead of one per key: a 450-block prompt whose
  // system prompt is in flight on many endpoints and the rest on one takes ~20.
  const size_t n = keys.size();
  if (n == 0) return;
  const Table& t = *table_;
  // The top levels of the bisection are known in advance: start loading their slots
  // now, so that the first lookups overlap instead of missing the cache one by one.
  {
    size_t lo[16] = {0}, hi[16] = {n};
    size_t count = 1;
    for (int level = 0; level < 4; ++level) {
      const size_t width = count;
      for (size_t j = 0; j < width; ++j) {
        if (hi[j] - lo[j] < 2) continue;
        const size_t mid = lo[j] + (hi[j] - lo[j]) / 2;
        t.prefetch(keys[mid]);
        lo[count] = mid;
        hi[count] = hi[j];
        ++count;
        hi[j] = mid;
      }
    }
  }
  struct Probe {
    uint32_t slot, count;  // slot: kNil past the end
  };
  auto probe = [&](size_t i) -> Probe {
    if (i >= n) return {kNil, 0};
    const size_t slot = t.find(keys[i]);
    return {static_cast<uint32_t>(slot), t.slots[slot].holders};
  };
  const Probe p0 = probe(0);
  if (p0.count == 0) return;
  if (stamp_.size() < per_endpoint_.size()) stamp_.resize(per_endpoint_.size(), 0);
  // Endpoints in holders(lo) but not in holders(hi) hold exactly hi keys.
  auto emit_drop = [&](uint32_t lo_slot, uint32_t hi_slot, size_t hi) {
    if (++gen_ == 0) {
      std::fill(stamp_.begin(), stamp_.end(), 0);
      gen_ = 1;
    }
    if (hi_slot != kNil) {
      t.for_each_holder(t.slots[hi_slot], [&](kv::EndpointId e) {
        if (e < stamp_.size()) stamp_[e] = gen_;
      });
    }
    t.for_each_holder(t.slots[lo_slot], [&](kv::EndpointId e) {
      if (e >= stamp_.size() || stamp_[e] != gen_) out.push_back({e, static_cast<uint32_t>(hi)});
    });
  };
  // Segments [lo, hi] with |holders(lo)| > |holders(hi)|; holders(n) is empty.
  struct Segment {
    size_t lo, hi;
    uint32_t lo_slot, hi_slot, lo_count, hi_count;
  };
  Segment stack[128];
  size_t depth = 0;
  stack[depth++] = {0, n, p0.slot, kNil, p0.count, 0};
  while (depth > 0) {
    const Segment s = stack[--depth];
    if (s.hi == s.lo + 1) {
      emit_drop(s.lo_slot, s.hi_slot, s.hi);
      continue;
    }
    const size_t mid = s.lo + (s.hi - s.lo) / 2;
    const auto [mh, mc] = probe(mid);
    // Keys that are not chained could break the monotony: clamp so it still ends.
    if (mc < s.lo_count && mc > s.hi_count && depth + 2 <= std::size(stack)) {
      stack[depth++] = {mid, s.hi, mh, s.hi_slot, mc, s.hi_count};
      stack[depth++] = {s.lo, mid, s.lo_slot, mh, s.lo_count, mc};
    } else if (mc >= s.lo_count && depth + 1 <= std::size(stack)) {
      stack[depth++] = {mid, s.hi, mh, s.hi_slot, mc, s.hi_count};  // no drop in [lo, mid]
    } else if (depth + 1 <= std::size(stack)) {
      stack[depth++] = {s.lo, mid, s.lo_slot, mh, s.lo_count, mc};  // none in [mid, hi]
    }
  }
}

uint64_t ActiveBlocks::blocks(kv::EndpointId endpoint) const {
  return endpoint < per_endpoint_.size() ? per_endpoint_[endpoint] : 0;
}

void ActiveBlocks::remove_endpoint(kv::EndpointId endpoint) {
  if (endpoint >= per_endpoint_.size() || per_endpoint_[endpoint] == 0) return;
  Table& t = *table_;
  for (size_t i = 0; i < t.slots.size();) {
    const bool erased = t.slots[i].holders == 1 && t.slots[i].first.endpoint == endpoint;
    t.drop(i, endpoint, /*all_refs=*/true);
    // An erased slot may have received a later entry by the backward shift: look again.
    if (!erased) ++i;
  }
  per_endpoint_[endpoint] = 0;
}

size_t ActiveBlocks::size() const { return table_->used; }

}  // namespace kvgate::route
