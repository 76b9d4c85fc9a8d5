#include "core/trace/json_cursor.h"

#include <fmt/format.h>

#include <array>
#include <bit>
#include <cmath>

namespace kvgate::trace {
namespace {

// `x` < 10^8 in decimal, without leading zeros: its length first, then two digits at a
// time from the end.
char* write_below_1e8(char* p, uint32_t x) {
  const size_t n = x < 10         ? 1
                   : x < 100      ? 2
                   : x < 1000     ? 3
                   : x < 10000    ? 4
                   : x < 100000   ? 5
                   : x < 1000000  ? 6
                   : x < 10000000 ? 7
                                  : 8;
  char* q = p + n;
  while (x >= 100) {
    q -= 2;
    std::memcpy(q, &kDigitPairs[(x % 100) * 2], 2);
    x /= 100;
  }
  if (x >= 10) {
    std::memcpy(q - 2, &kDigitPairs[x * 2], 2);
  } else {
    q[-1] = static_cast<char>('0' + x);
  }
  return p + n;
}

// The 8 decimal digits of `x` < 10^8, leading zeros included, at `p`: `x` is split into
// halves of 4 digits (32-bit lanes of one word), each into 2 of 2 digits (16-bit lanes),
// each into 2 digits (bytes), all lanes at once; the divisions by 100 and 10 are
// multiplications exact below these bounds (x * 10486 >> 20 for x < 10^4, x * 103 >> 10
// for x < 100), and no lane's product reaches the next lane.
void write_8_digits(char* p, uint32_t x) {
  uint64_t y = (x / 10000) | (static_cast<uint64_t>(x % 10000) << 32);
  const uint64_t hundreds = ((y * 10486) >> 20) & 0x0000007f0000007fULL;
  y = ((y - hundreds * 100) << 16) | hundreds;
  const uint64_t tens = ((y * 103) >> 10) & 0x000f000f000f000fULL;
  y = tens | ((y - tens * 10) << 8);
  y += 0x3030303030303030ULL;
  // The most significant digit is in the lowest byte: the first in memory.
  if constexpr (std::endian::native == std::endian::big) y = __builtin_bswap64(y);
  std::memcpy(p, &y, sizeof y);
}

// A control byte's escape, or a byte >= 0x80 that starts no valid UTF-8 sequence: U+FFFD.
char* write_escape(char* p, unsigned char c) {
  switch (c) {
    case '"':
      return copy_literal(p, "\\\"");
    case '\\':
      return copy_literal(p, "\\\\");
    case '\n':
      return copy_literal(p, "\\n");
    case '\r':
      return copy_literal(p, "\\r");
    case '\t':
      return copy_literal(p, "\\t");
    default:
      break;
  }
  if (c >= 0x80) return copy_literal(p, "\xef\xbf\xbd");  // U+FFFD
  static constexpr char kHex[] = "0123456789abcdef";
  p = copy_literal(p, "\\u00");
  p[0] = kHex[c >> 4];
  p[1] = kHex[c & 0xf];
  return p + 2;
}

// The byte at s[i] that the 8-byte words found to need a look (or any byte past them):
// copied as it is when plain, with its sequence when it starts valid UTF-8, else escaped;
// `i` is moved past what was written.
inline char* write_looked_at(char* p, std::string_view s, size_t& i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
    *p++ = s[i++];
    return p;
  }
  if (c >= 0x80) {
    if (const size_t len = utf8_length(s, i); len > 0) {
      // A valid sequence: as it is (len bytes for len bytes).
      for (const size_t end = i + len; i < end; ++i) *p++ = s[i];
      return p;
    }
  }
  ++i;
  return write_escape(p, c);
}

}  // namespace

char* write_long_uint(char* p, uint64_t v) {
  constexpr uint64_t k1e8 = 100'000'000;
  if (v < k1e8) return write_below_1e8(p, static_cast<uint32_t>(v));
  // 9 to 20 digits: the head (up to 12 digits: in two parts past 8), then 8 digits.
  const uint64_t head = v / k1e8;
  if (head < k1e8) {
    p = write_below_1e8(p, static_cast<uint32_t>(head));
  } else {
    p = write_below_1e8(p, static_cast<uint32_t>(head / k1e8));  // < 1845
    write_8_digits(p, static_cast<uint32_t>(head % k1e8));
    p += 8;
  }
  write_8_digits(p, static_cast<uint32_t>(v % k1e8));
  return p + 8;
}

char* UnixNanosWriter::write(char* p, int64_t t) {
  constexpr uint64_t k1e9 = 1'000'000'000;
  if (t < static_cast<int64_t>(k1e9)) return write_int(p, t);
  const auto u = static_cast<uint64_t>(t);
  const uint64_t seconds = u / k1e9;
  if (seconds != seconds_) {
    seconds_ = seconds;
    size_ = static_cast<size_t>(write_uint(digits_, seconds) - digits_);
  }
  // All 16 bytes (a constant size: two stores), the nanoseconds written over those past
  // the seconds' digits: 16 <= kIntBound.
  static_assert(sizeof digits_ <= kIntBound);
  std::memcpy(p, digits_, sizeof digits_);
  p += size_;
  const auto nanos = static_cast<uint32_t>(u - seconds * k1e9);
  *p = static_cast<char>('0' + nanos / 100'000'000);
  write_8_digits(p + 1, nanos % 100'000'000);
  return p + 9;
}

char* write_json_string(char* p, std::string_view s) {
  *p++ = '"';
  const char* const in = s.data();
  const size_t n = s.size();
  size_t i = 0;
  if (n < 8) {
    if (n >= 4) {
      // Its first 4 bytes and its last 4 (overlapping) in one word: when none needs a
      // look, the string is copied as two stores.
      uint32_t head;
      uint32_t tail;
      std::memcpy(&head, in, 4);
      std::memcpy(&tail, in + n - 4, 4);
      if (!json_needs_look(uint64_t{head} | (uint64_t{tail} << 32))) {
        std::memcpy(p, in, 4);
        std::memcpy(p + n - 4, in + n - 4, 4);
        p[n] = '"';
        return p + n + 1;
      }
    }
    while (i < n) p = write_looked_at(p, s, i);
    *p++ = '"';
    return p;
  }
  while (i + 8 <= n) {
    uint64_t w;
    std::memcpy(&w, in + i, 8);
    if (!json_needs_look(w)) {
      // 8 printable ASCII bytes, none a quote or a backslash: as they are.
      std::memcpy(p, &w, 8);
      p += 8;
      i += 8;
      continue;
    }
    p = write_looked_at(p, s, i);
  }
  if (i < n) {
    // Fewer than 8 bytes left (n - 8 < i < n): the string's last 8 bytes as one word,
    // overlapping those written. When none needs a look, the bytes from n - 8 to i were
    // plain, so each was written as it is, one for one (an escape or a UTF-8 sequence
    // among them would need a look): they are the last i - (n - 8) bytes written, and the
    // word is stored over them, the rest of the string with them.
    uint64_t w;
    std::memcpy(&w, in + n - 8, 8);
    if (!json_needs_look(w)) {
      const size_t written = i - (n - 8);  // 1 to 7
      std::memcpy(p - written, &w, 8);
      p += 8 - written;
    } else {
      while (i < n) p = write_looked_at(p, s, i);
    }
  }
  *p++ = '"';
  return p;
}

char* write_double(char* p, double v) {
  const double a = std::fabs(v);  // not below 1e15 when NaN
  if (a < 1e15) {
    const auto whole = static_cast<int64_t>(v);
    if (static_cast<double>(whole) == v) {
      // An integer below 1e15: {fmt} writes its digits (the shortest text that reads
      // back as it, in fixed notation, without ".0"). Minus zero ("-0") is left to {fmt}.
      if (whole != 0 || !std::signbit(v)) return write_int(p, whole);
    } else if (a >= 1e-4 && a < 0x1p33) {
      // At most 6 decimals: d = r / 10^6, when it reads back as `a` (r < 2^53 is exact,
      // the division correctly rounded), is the text {fmt} writes. The numbers that read
      // back as `a` span at most an ulp of it here, 2^-20 < 10^-6, and two numbers of at
      // most 6 decimals differ by 10^-6 or more: d is the only one among them. The
      // shortest that reads back has no more digits than d, so at most 6 decimals too,
      // unless a power of 10 lies between it and d: that power (10^-4 or more) would be d,
      // of 1 digit, and no other number of 1 digit is that close to it. {fmt} writes it
      // in fixed notation (from 1e-4 to below 1e16), without trailing zeros.
      const auto r = static_cast<uint64_t>(a * 1e6 + 0.5);
      if (static_cast<double>(r) / 1e6 == a) {
        if (v < 0) *p++ = '-';
        p = write_uint(p, r / 1'000'000);
        const auto decimals = static_cast<uint32_t>(r % 1'000'000);  // not 0: not an integer
        *p = '.';
        // The 6 decimals, zero-padded, then the trailing zeros dropped (there is a digit
        // that is not 0).
        std::memcpy(p + 1, &kDigitPairs[(decimals / 10000) * 2], 2);
        std::memcpy(p + 3, &kDigitPairs[(decimals / 100 % 100) * 2], 2);
        std::memcpy(p + 5, &kDigitPairs[(decimals % 100) * 2], 2);
        p += 7;
        while (p[-1] == '0') --p;
        return p;
      }
    }
  }
  return fmt::format_to_n(p, kDoubleBound, "{}", v).out;
}

size_t utf8_length(std::string_view s, size_t i) {
  const auto byte = [s](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  size_t n = 0;
  unsigned char lo = 0x80;  // the second byte's range
  unsigned char hi = 0xbf;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;  // overlong
    if (c == 0xed) hi = 0x9f;  // surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;  // overlong
    if (c == 0xf4) hi = 0x8f;  // beyond U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size() || byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xbf) return 0;
  }
  return n;
}

}  // namespace kvgate::trace
