// json_cursor: JSON text written through a raw cursor into room reserved beforehand, for
// encoders that write many small pieces (the OTLP encoder of the gateway's span records,
// otlp_json.h): no std::string call per piece, only stores.
//
// Each writer takes the cursor `p` and returns it past what it wrote; the caller makes
// sure the room is there, from the bounds below (a value's longest text), before it
// writes. Nothing here checks the room.
//
//   char* p = buffer;                             // room for the bounds below
//   p = copy_literal(p, "{\"n\":\"");             // a literal: a store of constant size
//   p = write_int(p, int64_t{-42});               // at most kIntBound characters
//   p = copy_literal(p, "\",\"s\":");
//   p = write_json_string(p, text);               // at most json_string_bound(text.size())
//   p = copy_literal(p, ",\"name\":");
//   p = write_plain_string(p, "a.name");          // text needing no escape: 2 + its size
//   p = copy_literal(p, ",\"d\":");
//   p = write_double(p, 0.25);                    // at most kDoubleBound characters
//
// Strings: a JSON string of valid UTF-8 (an invalid byte is written as U+FFFD, as a
// protobuf string must be UTF-8), quotes, backslashes and control bytes escaped.
// Doubles: the text of {fmt}'s "{}" (the shortest that reads back the same), written
// without {fmt} where that is quick (integers, up to 6 decimals).
#pragma once

#include <array>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "core/common/short_bytes.h"

namespace kvgate::trace {

// `literal` copied to `p` (without its NUL); returns the end. Its length is known at
// compile time: the copy is a few stores.
template <size_t N>
inline char* copy_literal(char* p, const char (&literal)[N]) {
  std::memcpy(p, literal, N - 1);
  return p + N - 1;
}

// The longest decimal text of an int64_t ("-9223372036854775808") or a uint64_t.
inline constexpr size_t kIntBound = 20;

// "00" "01" ... "99": two digits per lookup.
inline constexpr std::array<char, 200> kDigitPairs = [] {
  std::array<char, 200> t{};
  for (size_t i = 0; i < 100; ++i) {
    t[2 * i] = static_cast<char>('0' + i / 10);
    t[2 * i + 1] = static_cast<char>('0' + i % 10);
  }
  return t;
}();

// write_uint of 1000 or more.
char* write_long_uint(char* p, uint64_t v);

// An integer in decimal (as std::to_chars writes it), at most kIntBound characters. Most
// of a span's are below 1000 (a status, the flags, a hop's index, a count): written here,
// without a call.
inline char* write_uint(char* p, uint64_t v) {
  if (v < 10) {
    *p = static_cast<char>('0' + v);
    return p + 1;
  }
  if (v < 100) {
    std::memcpy(p, &kDigitPairs[2 * v], 2);
    return p + 2;
  }
  if (v < 1000) {
    *p = static_cast<char>('0' + v / 100);
    std::memcpy(p + 1, &kDigitPairs[2 * (v % 100)], 2);
    return p + 3;
  }
  return write_long_uint(p, v);
}
inline char* write_int(char* p, int64_t v) {
  if (v < 0) {
    *p++ = '-';
    return write_uint(p, uint64_t{0} - static_cast<uint64_t>(v));
  }
  return write_uint(p, static_cast<uint64_t>(v));
}

// Unix nanosecond times in decimal, as write_int writes them, for a run of times that
// mostly fall in the same second (a batch's spans): the digits of the last time's seconds
// are kept, so a time in the same second is a copy of them and its nanoseconds' 9 digits
// (zero-padded, 8 of them at once) rather than 19 digits made anew. A time before 1 s
// past the epoch (or negative) is written by write_int. One writer per run of text (it
// holds no view into it); not thread-safe.
//
//   UnixNanosWriter times;
//   p = times.write(p, span.start_unix_nanos);  // within kIntBound characters
//   p = times.write(p, span.end_unix_nanos);    // the same second: no division but one
class UnixNanosWriter {
 public:
  // `t` in decimal at `p`; returns the end. Writes within kIntBound bytes from `p` (some
  // past the end it returns, left for the caller to write over).
  char* write(char* p, int64_t t);

 private:
  uint64_t seconds_ = 0;  // whose digits are kept; 0: none (a time below 1 s is not kept)
  size_t size_ = 0;       // the digits' count
  char digits_[16] = {};  // at most 10 digits ((2^63 - 1) / 10^9), then room for a copy
};

// The longest JSON string written for `size` bytes of text: the quotes, and 6 characters
// per byte (a control byte's "\u00XX"; a quote or backslash takes 2, an invalid UTF-8
// byte's U+FFFD 3, any other byte 1).
inline constexpr size_t json_string_bound(size_t size) { return 2 + 6 * size; }

// `s` as a JSON string (quoted), at most json_string_bound(s.size()) characters: the bytes
// that need no escape are copied as they are (printable ASCII 8 bytes at a time; the last
// bytes, past the last whole word, as the string's last 8 bytes at once when those need
// no escape, a string of 4 to 7 bytes as its first and last 4), the rest escaped in place.
char* write_json_string(char* p, std::string_view s);

// Whether every byte of `s` is written as it is by write_json_string, one for one:
// ASCII from 0x20 (space) to 0x7f, neither a quote nor a backslash.
constexpr bool json_plain(std::string_view s) {
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c >= 0x80 || c == '"' || c == '\\') return false;
  }
  return true;
}

// `s`, which must need no escape (json_plain: asserted in debug builds), as a JSON string:
// the quotes and a copy of its bytes, 2 + s.size() characters (the same text as
// write_json_string's). For the text of the program's own literals (span names).
inline char* write_plain_string(char* p, std::string_view s) {
  assert(json_plain(s));
  *p++ = '"';
  p = copy_short(p, s.data(), s.size());
  *p++ = '"';
  return p;
}

// The longest text of write_double: {fmt}'s shortest round trip is at most 24 characters
// ("-", 17 digits, ".", "e-308"), and format_to_n never writes more than this anyway.
inline constexpr size_t kDoubleBound = 32;

// A finite double as {fmt} writes it with "{}" (the shortest text that reads back as `v`:
// fixed notation from 1e-4 to below 1e16, without a ".0" for an integer, "-0" for minus
// zero; exponent notation outside), at most kDoubleBound characters. Written in place
// without {fmt} for an integer below 1e15 in magnitude (as write_int) and a value from
// 1e-4 to below 2^33 in magnitude with at most 6 decimals; {fmt} writes the rest. Not for
// NaN and the infinities (JSON has none: the callers spell them).
char* write_double(char* p, double v);

// What the writer above and the reference encoder (otlp_json.cc) share.

// Whether any of the 8 bytes of `w` needs a look of its own: a control byte (< 0x20), a
// byte >= 0x80 (UTF-8 to check), '"' or '\\' (the bit tricks of "Bit Twiddling Hacks").
inline bool json_needs_look(uint64_t w) {
  constexpr uint64_t kOnes = 0x0101010101010101ull;
  constexpr uint64_t kHighs = 0x8080808080808080ull;
  const auto has_zero = [](uint64_t x) { return (x - kOnes) & ~x & kHighs; };
  const uint64_t below_space = (w - kOnes * 0x20) & ~w & kHighs;
  return ((w & kHighs) | below_space | has_zero(w ^ (kOnes * '"')) |
          has_zero(w ^ (kOnes * '\\'))) != 0;
}

// The length of the valid UTF-8 sequence that starts at s[i] (a byte >= 0x80), or 0
// when none does (a stray continuation byte, an overlong form, a surrogate, a code point
// beyond U+10FFFF, a truncated sequence).
size_t utf8_length(std::string_view s, size_t i);

}  // namespace kvgate::trace
