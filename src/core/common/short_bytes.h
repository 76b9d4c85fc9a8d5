// Short byte strings copied and compared without a call: the strings a traced request
// keeps and the encoder writes (a model's name, a pool's, a path, an endpoint's URL) are
// mostly a few bytes to a few dozen, which two overlapping loads (and stores) of 4, 8 or
// 16 bytes cover, where std::memcpy and std::memcmp of a size known only at run time are a
// call into the C library each. Past 32 bytes, those calls.
//
//   p = copy_short(p, s.data(), s.size());            // returns the end of the copy
//   if (equal_short(a.data(), b.data(), a.size())) {  // the same n bytes
//
// The regions must not overlap. With n == 0 nothing is read (the pointers may be null).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kvgate {

namespace short_bytes_detail {

// The first and the last sizeof(Word) bytes of `from` (n of them, sizeof(Word) <= n <=
// 2 * sizeof(Word)) copied to `to`: overlapping when n is less than twice the word.
template <class Word>
inline void copy_ends(char* to, const char* from, size_t n) {
  Word head;
  Word tail;
  std::memcpy(&head, from, sizeof head);
  std::memcpy(&tail, from + n - sizeof tail, sizeof tail);
  std::memcpy(to, &head, sizeof head);
  std::memcpy(to + n - sizeof tail, &tail, sizeof tail);
}

// Whether the first and the last sizeof(Word) bytes of `a` and `b` (n of them, as
// copy_ends has it) differ: not 0 when they do.
template <class Word>
inline Word ends_differ(const char* a, const char* b, size_t n) {
  Word a_head;
  Word a_tail;
  Word b_head;
  Word b_tail;
  std::memcpy(&a_head, a, sizeof a_head);
  std::memcpy(&a_tail, a + n - sizeof a_tail, sizeof a_tail);
  std::memcpy(&b_head, b, sizeof b_head);
  std::memcpy(&b_tail, b + n - sizeof b_tail, sizeof b_tail);
  return (a_head ^ b_head) | (a_tail ^ b_tail);
}

struct Bytes16 {
  char bytes[16];
};

}  // namespace short_bytes_detail

// Copies `n` bytes from `from` to `to`; returns to + n.
inline char* copy_short(char* to, const char* from, size_t n) {
  using namespace short_bytes_detail;
  if (n > 32) {
    std::memcpy(to, from, n);
  } else if (n > 16) {
    copy_ends<Bytes16>(to, from, n);
  } else if (n >= 8) {
    copy_ends<uint64_t>(to, from, n);
  } else if (n >= 4) {
    copy_ends<uint32_t>(to, from, n);
  } else if (n > 0) {
    // 1 to 3 bytes: the first, the middle and the last (some the same).
    to[0] = from[0];
    to[n / 2] = from[n / 2];
    to[n - 1] = from[n - 1];
  }
  return to + n;
}

// Whether the `n` bytes at `a` and at `b` are the same.
inline bool equal_short(const char* a, const char* b, size_t n) {
  using namespace short_bytes_detail;
  if (n > 32) return std::memcmp(a, b, n) == 0;
  if (n > 16) {
    // The first 16 bytes and the last 16 (overlapping), 8 at a time.
    return (ends_differ<uint64_t>(a, b, 16) | ends_differ<uint64_t>(a + n - 16, b + n - 16, 16)) ==
           0;
  }
  if (n >= 8) return ends_differ<uint64_t>(a, b, n) == 0;
  if (n >= 4) return ends_differ<uint32_t>(a, b, n) == 0;
  if (n == 0) return true;
  return a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1];
}

}  // namespace kvgate
