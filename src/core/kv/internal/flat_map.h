// FlatMap64<V>: an open-addressing hash map from 64-bit keys to small values.
//
// The prefix indexes map block keys (already xxHash3 outputs, so uniformly spread) to
// small values. std::unordered_map costs a heap node per entry and a pointer chase per
// lookup; this map keeps {key, value} pairs in one array with linear probing and
// backward-shift deletion (no tombstones), so a lookup is one cache miss and memory is
// (8 + sizeof(V)) / load bytes per entry. Load stays at most 7/8.
//
// Key 0 is the empty marker; a real key 0 is kept in a side slot.
// Thread-safety: none.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace kvgate::kv::internal {

template <typename V>
class FlatMap64 {
 public:
  FlatMap64() = default;

  size_t size() const { return size_ + (has_zero_ ? 1 : 0); }
  bool empty() const { return size() == 0; }
  size_t memory_bytes() const { return slots_.capacity() * sizeof(Slot); }

  // Returns the value for `key`, or nullptr.
  V* find(uint64_t key) {
    if (key == 0) return has_zero_ ? &zero_value_ : nullptr;
    if (slots_.empty()) return nullptr;
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == 0) return nullptr;
    }
  }
  const V* find(uint64_t key) const { return const_cast<FlatMap64*>(this)->find(key); }

  // Hints the CPU to load the slot `key` would start probing at.
  void prefetch(uint64_t key) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[home(key)]);
  }

  // Inserts {key, value} if absent. Returns the value slot and whether it was inserted.
  std::pair<V*, bool> insert(uint64_t key, V value) {
    if (key == 0) {
      if (has_zero_) return {&zero_value_, false};
      has_zero_ = true;
      zero_value_ = std::move(value);
      return {&zero_value_, true};
    }
    if ((size_ + 1) * 8 > slots_.size() * 7) grow();
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.key == key) return {&s.value, false};
      if (s.key == 0) {
        s.key = key;
        s.value = std::move(value);
        ++size_;
        return {&s.value, true};
      }
    }
  }

  // Removes `key`; returns whether it was present.
  bool erase(uint64_t key) {
    if (key == 0) {
      bool had = has_zero_;
      has_zero_ = false;
      zero_value_ = V{};
      return had;
    }
    if (slots_.empty()) return false;
    size_t i = home(key);
    while (slots_[i].key != key) {
      if (slots_[i].key == 0) return false;
      i = (i + 1) & mask_;
    }
    // Backward-shift: pull later entries of the probe run into the hole.
    size_t hole = i;
    for (size_t j = (i + 1) & mask_; slots_[j].key != 0; j = (j + 1) & mask_) {
      size_t h = home(slots_[j].key);
      // Move j into the hole if its home is not in (hole, j] (cyclically).
      bool movable = hole <= j ? (h <= hole || h > j) : (h <= hole && h > j);
      if (movable) {
        slots_[hole] = std::move(slots_[j]);
        hole = j;
      }
    }
    slots_[hole].key = 0;
    slots_[hole].value = V{};
    --size_;
    return true;
  }

  void clear() {
    slots_.clear();
    slots_.shrink_to_fit();
    mask_ = 0;
    size_ = 0;
    has_zero_ = false;
    zero_value_ = V{};
  }

  // Calls fn(key, value&) for every entry. fn must not insert or erase.
  template <typename Fn>
  void for_each(Fn&& fn) {
    if (has_zero_) fn(uint64_t{0}, zero_value_);
    for (Slot& s : slots_) {
      if (s.key != 0) fn(s.key, s.value);
    }
  }

 private:
  struct Slot {
    uint64_t key = 0;
    V value{};
  };

  size_t home(uint64_t key) const {
    // Keys are hashes already, but engine hashes in tests may be small integers.
    return static_cast<size_t>((key * 0x9e3779b97f4a7c15ULL) >> 32) & mask_;
  }

  void grow() {
    std::vector<Slot> old = std::move(slots_);
    size_t cap = old.empty() ? 16 : old.size() * 2;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
    size_ = 0;
    for (Slot& s : old) {
      if (s.key != 0) insert(s.key, std::move(s.value));
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
  bool has_zero_ = false;
  V zero_value_{};
};

}  // namespace kvgate::kv::internal
