// FlatMap64<V>: an open-addressing hash map from 64-bit keys to small values.
//
// The prefix indexes map block keys (already xxHash3 outputs, so uniformly spread) to
// small values. std::unordered_map costs a heap node per entry and a pointer chase per
// lookup; this map keeps {key, value} pairs in one array with linear probing and
// backward-shift deletion (no tombstones), so a lookup is one cache miss and memory is
// (8 + sizeof(V)) / load bytes per entry (keys and values in separate arrays, so no
// padding). Capacities are not powers of two (slots are
// found by multiply-shift), so the table can grow by 1.5x and its load stays between
// about 0.53 and 0.8: less memory than doubling, short probe runs.
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
  size_t memory_bytes() const {
    return keys_.capacity() * sizeof(uint64_t) + values_.capacity() * sizeof(V);
  }

  // Returns the value for `key`, or nullptr.
  V* find(uint64_t key) {
    if (key == 0) return has_zero_ ? &zero_value_ : nullptr;
    if (keys_.empty()) return nullptr;
    for (size_t i = home(key);; i = next(i)) {
      if (keys_[i] == key) return &values_[i];
      if (keys_[i] == 0) return nullptr;
    }
  }
  const V* find(uint64_t key) const { return const_cast<FlatMap64*>(this)->find(key); }

  // Inserts {key, value} if absent. Returns the value slot and whether it was inserted.
  std::pair<V*, bool> insert(uint64_t key, V value) {
    if (key == 0) {
      if (has_zero_) return {&zero_value_, false};
      has_zero_ = true;
      zero_value_ = std::move(value);
      return {&zero_value_, true};
    }
    if ((size_ + 1) * 5 > keys_.size() * 4) grow();
    for (size_t i = home(key);; i = next(i)) {
      if (keys_[i] == key) return {&values_[i], false};
      if (keys_[i] == 0) {
        keys_[i] = key;
        values_[i] = std::move(value);
        ++size_;
        return {&values_[i], true};
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
    if (keys_.empty()) return false;
    size_t i = home(key);
    while (keys_[i] != key) {
      if (keys_[i] == 0) return false;
      i = next(i);
    }
    // Backward-shift: pull later entries of the probe run into the hole.
    size_t hole = i;
    for (size_t j = next(i); keys_[j] != 0; j = next(j)) {
      size_t h = home(keys_[j]);
      // Move j into the hole if its home is not in (hole, j] (cyclically).
      bool movable = hole <= j ? (h <= hole || h > j) : (h <= hole && h > j);
      if (movable) {
        keys_[hole] = keys_[j];
        values_[hole] = std::move(values_[j]);
        hole = j;
      }
    }
    keys_[hole] = 0;
    values_[hole] = V{};
    --size_;
    return true;
  }

  void clear() {
    keys_.clear();
    keys_.shrink_to_fit();
    values_.clear();
    values_.shrink_to_fit();
    size_ = 0;
    has_zero_ = false;
    zero_value_ = V{};
  }

  // Calls fn(key, value&) for every entry. fn must not insert or erase.
  template <typename Fn>
  void for_each(Fn&& fn) {
    if (has_zero_) fn(uint64_t{0}, zero_value_);
    for (size_t i = 0; i < keys_.size(); ++i) {
      if (keys_[i] != 0) fn(keys_[i], values_[i]);
    }
  }

  // Erases every entry for which pred(key, value) is true.
  template <typename Pred>
  void erase_if(Pred&& pred) {
    std::vector<uint64_t> doomed;
    for_each([&](uint64_t k, V& v) {
      if (pred(k, v)) doomed.push_back(k);
    });
    for (uint64_t k : doomed) erase(k);
  }

 private:
  size_t home(uint64_t key) const {
    // Keys are hashes already, but engine hashes in tests may be small integers: mix,
    // then map onto [0, capacity) by multiply-shift.
    uint64_t h = key * 0x9e3779b97f4a7c15ULL;
    h ^= h >> 32;
    return static_cast<size_t>((static_cast<__uint128_t>(h) * keys_.size()) >> 64);
  }
  size_t next(size_t i) const { return i + 1 == keys_.size() ? 0 : i + 1; }

  void grow() {
    std::vector<uint64_t> old_keys = std::move(keys_);
    std::vector<V> old_values = std::move(values_);
    size_t cap = old_keys.empty() ? 16 : old_keys.size() + old_keys.size() / 2;
    keys_.assign(cap, 0);
    values_.assign(cap, V{});
    size_ = 0;
    for (size_t i = 0; i < old_keys.size(); ++i) {
      if (old_keys[i] != 0) insert(old_keys[i], std::move(old_values[i]));
    }
  }

  // Structure of arrays: {uint64, uint32} pairs take 12 bytes a slot, not 16.
  std::vector<uint64_t> keys_;
  std::vector<V> values_;
  size_t size_ = 0;
  bool has_zero_ = false;
  V zero_value_{};
};

}  // namespace kvgate::kv::internal
