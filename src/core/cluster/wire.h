// The compact binary forms' common parts (routing_event.h, index_snapshot.h): LEB128
// varints, length-prefixed text, little-endian 64-bit block keys, and a reader that
// remembers its first failure (every read after it returns zero) so that a decoder
// checks ok() once per record, not after every field.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/kv/block_hash.h"

namespace kvgate::cluster::wire {

// Bounds a malformed input cannot exceed.
constexpr uint64_t kMaxKeys = 1 << 16;
constexpr uint64_t kMaxText = 4096;

inline void put_varint(uint64_t v, std::string& out) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

inline void put_text(std::string_view s, std::string& out) {
  put_varint(s.size(), out);
  out.append(s);
}

inline void put_key(kv::BlockKey k, std::string& out) {
  for (int b = 0; b < 8; ++b) out.push_back(static_cast<char>((k >> (8 * b)) & 0xFF));
}

// A key as put_key() wrote it (8 bytes, little-endian). REQUIRES: 8 bytes at `p`.
inline kv::BlockKey load_key(const char* p) {
  uint64_t k = 0;
  for (int b = 7; b >= 0; --b) k = (k << 8) | static_cast<uint8_t>(p[b]);
  return k;
}

// Reads from a view, remembering the first failure.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool ok() const { return ok_; }
  bool done() const { return pos_ == in_.size(); }

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= in_.size()) return fail();
      const auto b = static_cast<uint8_t>(in_[pos_++]);
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return v;
    }
    return fail();
  }
  uint32_t u32() {
    const uint64_t v = varint();
    return v > UINT32_MAX ? static_cast<uint32_t>(fail()) : static_cast<uint32_t>(v);
  }
  uint8_t byte() {
    if (pos_ >= in_.size()) return static_cast<uint8_t>(fail());
    return static_cast<uint8_t>(in_[pos_++]);
  }
  std::string text() {
    const uint64_t n = varint();
    if (!ok_ || n > kMaxText || n > in_.size() - pos_) {
      fail();
      return {};
    }
    std::string s(in_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  kv::BlockKey key() {
    if (in_.size() - pos_ < 8) return fail();
    const kv::BlockKey k = load_key(in_.data() + pos_);
    pos_ += 8;
    return k;
  }
  // The next `n` bytes as they are (empty and a failure when fewer are left).
  std::string_view raw(uint64_t n) {
    if (n > in_.size() - pos_) {
      fail();
      return {};
    }
    const std::string_view s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  // What is left to read (a bound for counts a malformed input may claim).
  size_t remaining() const { return in_.size() - pos_; }
  void keys(std::vector<kv::BlockKey>& out) {
    const uint64_t n = varint();
    if (!ok_ || n > kMaxKeys || n * 8 > in_.size() - pos_) return void(fail());
    out.resize(n);
    // Through a local pointer: the stores to `out` could alias pos_ (both uint64_t), which
    // would make the compiler reload it for every key.
    const char* p = in_.data() + pos_;
    for (uint64_t i = 0; i < n; ++i, p += 8) out[i] = load_key(p);
    pos_ += n * 8;
  }

  // Marks the input malformed (a decoder's own check failed); returns 0.
  uint64_t fail() {
    ok_ = false;
    pos_ = in_.size();
    return 0;
  }

 private:
  std::string_view in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace kvgate::cluster::wire
