// KeyTable: block key -> arena index, in 8 bytes a slot.
//
// The precise index keeps its entries (which hold their full 64-bit key) in an arena;
// this table only has to find them. A slot holds the key's high 32 bits as a tag and the
// arena index; a tag hit is confirmed against the arena through `key_of`. Block keys are
// xxHash3 outputs, so the tag alone places a slot (linear probing, multiply-shift onto
// any capacity, backward-shift deletion) and growing never touches the arena.
// Thread-safety: none.
#pragma once

#include <cstdint>
#include <vector>

namespace kvgate::kv::internal {

class KeyTable {
 public:
  static constexpr uint32_t kEmpty = 0xFFFFFFFFu;

  size_t size() const { return size_; }
  size_t memory_bytes() const { return slots_.capacity() * sizeof(Slot); }

  // Arena index of `key`, or kEmpty. key_of(index) returns the key stored at index.
  template <typename KeyOf>
  uint32_t find(uint64_t key, const KeyOf& key_of) const {
    if (slots_.empty()) return kEmpty;
    const uint32_t tag = tag_of(key);
    for (size_t i = home(tag);; i = next(i)) {
      const Slot& s = slots_[i];
      if (s.value == kEmpty) return kEmpty;
      if (s.tag == tag && key_of(s.value) == key) return s.value;
    }
  }

  // REQUIRES: key is absent.
  void insert_new(uint64_t key, uint32_t value) {
    if ((size_ + 1) * 5 > slots_.size() * 4) grow();
    place(tag_of(key), value);
    ++size_;
  }

  template <typename KeyOf>
  bool erase(uint64_t key, const KeyOf& key_of) {
    if (slots_.empty()) return false;
    const uint32_t tag = tag_of(key);
    size_t i = home(tag);
    for (;; i = next(i)) {
      const Slot& s = slots_[i];
      if (s.value == kEmpty) return false;
      if (s.tag == tag && key_of(s.value) == key) break;
    }
    size_t hole = i;
    for (size_t j = next(i); slots_[j].value != kEmpty; j = next(j)) {
      size_t h = home(slots_[j].tag);
      bool movable = hole <= j ? (h <= hole || h > j) : (h <= hole && h > j);
      if (movable) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole] = Slot{};
    --size_;
    return true;
  }

 private:
  struct Slot {
    uint32_t tag = 0;
    uint32_t value = kEmpty;
  };

  static uint32_t tag_of(uint64_t key) { return static_cast<uint32_t>(key >> 32); }
  size_t home(uint32_t tag) const {
    uint32_t h = tag * 0x9E3779B1u;  // engine-independent keys are uniform already; cheap mix
    return static_cast<size_t>((uint64_t{h} * slots_.size()) >> 32);
  }
  size_t next(size_t i) const { return i + 1 == slots_.size() ? 0 : i + 1; }

  void place(uint32_t tag, uint32_t value) {
    size_t i = home(tag);
    while (slots_[i].value != kEmpty) i = next(i);
    slots_[i] = Slot{tag, value};
  }

  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 16 : old.size() + old.size() / 2, Slot{});
    for (const Slot& s : old) {
      if (s.value != kEmpty) place(s.tag, s.value);
    }
  }

  std::vector<Slot> slots_;
  size_t size_ = 0;
};

}  // namespace kvgate::kv::internal
