#include "core/route/active_blocks.h"

#include <cassert>

namespace kvgate::route {
namespace {
constexpr uint32_t kNil = 0xffffffffu;
}  // namespace

// Open addressing (linear probing, backward-shift deletion) from block key to a short
// linked list of (endpoint, references). Block keys are hashes already, but tests use
// small integers, so they are mixed once more (Fibonacci hashing).
struct ActiveBlocks::Table {
  struct Slot {
    kv::BlockKey key = 0;
    uint32_t head = kNil;  // kNil: empty slot
  };
  struct Node {
    kv::EndpointId endpoint;
    uint32_t refs;
    uint32_t next;
  };

  std::vector<Slot> slots = std::vector<Slot>(64);
  uint32_t shift = 64 - 6;
  size_t used = 0;
  std::vector<Node> nodes;
  uint32_t free_node = kNil;

  size_t home(kv::BlockKey key) const {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ULL) >> shift);
  }
  size_t mask() const { return slots.size() - 1; }

  // Slot holding `key`, or the empty slot where it would go.
  size_t find(kv::BlockKey key) const {
    size_t i = home(key);
    while (slots[i].head != kNil && slots[i].key != key) i = (i + 1) & mask();
    return i;
  }

  void grow() {
    std::vector<Slot> old = std::move(slots);
    slots.assign(old.size() * 2, Slot{});
    --shift;
    for (const Slot& s : old) {
      if (s.head == kNil) continue;
      slots[find(s.key)] = s;
    }
  }

  // Removes the (now empty-listed) entry at slot i, shifting its probe run back.
  void erase_slot(size_t i) {
    size_t j = i;
    for (;;) {
      j = (j + 1) & mask();
      if (slots[j].head == kNil) break;
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

  uint32_t new_node(kv::EndpointId endpoint, uint32_t next) {
    uint32_t n;
    if (free_node != kNil) {
      n = free_node;
      free_node = nodes[n].next;
    } else {
      n = static_cast<uint32_t>(nodes.size());
      nodes.push_back({});
    }
    nodes[n] = {endpoint, 1, next};
    return n;
  }
  void free(uint32_t n) {
    nodes[n].next = free_node;
    free_node = n;
  }

  // Adds a reference; true if the endpoint did not hold the key.
  bool add(kv::BlockKey key, kv::EndpointId endpoint) {
    if ((used + 1) * 2 > slots.size()) grow();
    size_t i = find(key);
    if (slots[i].head == kNil) {
      slots[i].key = key;
      slots[i].head = new_node(endpoint, kNil);
      ++used;
      return true;
    }
    for (uint32_t n = slots[i].head; n != kNil; n = nodes[n].next) {
      if (nodes[n].endpoint == endpoint) {
        ++nodes[n].refs;
        return false;
      }
    }
    slots[i].head = new_node(endpoint, slots[i].head);
    return true;
  }

  // Drops a reference; true if the endpoint no longer holds the key.
  bool release(kv::BlockKey key, kv::EndpointId endpoint) {
    size_t i = find(key);
    if (slots[i].head == kNil) return false;
    uint32_t* link = &slots[i].head;
    for (uint32_t n = *link; n != kNil; link = &nodes[n].next, n = *link) {
      if (nodes[n].endpoint != endpoint) continue;
      if (--nodes[n].refs > 0) return false;
      *link = nodes[n].next;
      free(n);
      if (slots[i].head == kNil) erase_slot(i);
      return true;
    }
    return false;
  }
};

ActiveBlocks::ActiveBlocks() : table_(new Table) {}
ActiveBlocks::~ActiveBlocks() { delete table_; }

uint32_t ActiveBlocks::add(kv::EndpointId endpoint, std::span<const kv::BlockKey> keys) {
  if (per_endpoint_.size() <= endpoint) per_endpoint_.resize(endpoint + 1, 0);
  uint32_t added = 0;
  for (kv::BlockKey k : keys) added += table_->add(k, endpoint) ? 1 : 0;
  per_endpoint_[endpoint] += added;
  return added;
}

uint32_t ActiveBlocks::release(kv::EndpointId endpoint, std::span<const kv::BlockKey> keys) {
  uint32_t freed = 0;
  for (kv::BlockKey k : keys) freed += table_->release(k, endpoint) ? 1 : 0;
  if (endpoint < per_endpoint_.size()) {
    assert(per_endpoint_[endpoint] >= freed);
    per_endpoint_[endpoint] -= freed;
  }
  return freed;
}

void ActiveBlocks::prefix(std::span<const kv::BlockKey> keys, std::vector<Prefix>& out) const {
  // Holding key i implies holding keys 0..i-1, so each endpoint appears in a run of
  // lists from key 0: count its appearances, and stop at the first key nobody holds.
  // slot_of_ (by endpoint id) says where in `out` an endpoint's count is; only entries
  // written for keys[0] are valid, which is all the later keys can name.
  const size_t first = out.size();
  for (size_t i = 0; i < keys.size(); ++i) {
    size_t s = table_->find(keys[i]);
    uint32_t n = table_->slots[s].head;
    if (n == kNil) break;
    for (; n != kNil; n = table_->nodes[n].next) {
      const kv::EndpointId e = table_->nodes[n].endpoint;
      if (i == 0) {
        if (slot_of_.size() <= e) slot_of_.resize(e + 1);
        slot_of_[e] = static_cast<uint32_t>(out.size());
        out.push_back({e, 1});
      } else if (e < slot_of_.size()) {
        // Keys that are not chained could name an endpoint absent at keys[0]: skip it.
        const uint32_t j = slot_of_[e];
        if (j >= first && j < out.size() && out[j].endpoint == e) ++out[j].blocks;
      }
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
    if (t.slots[i].head == kNil) {
      ++i;
      continue;
    }
    uint32_t* link = &t.slots[i].head;
    for (uint32_t n = *link; n != kNil; n = *link) {
      if (t.nodes[n].endpoint == endpoint) {
        *link = t.nodes[n].next;
        t.free(n);
      } else {
        link = &t.nodes[n].next;
      }
    }
    if (t.slots[i].head == kNil) {
      t.erase_slot(i);  // may shift a later entry into i: look at i again
    } else {
      ++i;
    }
  }
  per_endpoint_[endpoint] = 0;
}

size_t ActiveBlocks::size() const { return table_->used; }

}  // namespace kvgate::route
