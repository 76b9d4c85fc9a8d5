#include "core/trace/json_cursor.h"

#include <array>
#include <bit>

namespace kvgate::trace {
namespace {

// "00" "01" ... "99": two digits per lookup.
constexpr std::array<char, 200> kDigitPairs = [] {
  std::array<char, 200> t{};
  for (size_t i = 0; i < 100; ++i) {
    t[2 * i] = static_cast<char>('0' + i / 10);
    t[2 * i + 1] = static_cast<char>('0' + i % 10);
  }
  return t;
}();

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

}  // namespace

char* write_uint(char* p, uint64_t v) {
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
  while (i < n) {
    if (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, in + i, 8);
      if (!json_needs_look(w)) {
        // 8 printable ASCII bytes, none a quote or a backslash: as they are.
        std::memcpy(p, &w, 8);
        p += 8;
        i += 8;
        continue;
      }
    }
    const auto c = static_cast<unsigned char>(in[i]);
    if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
      *p++ = in[i++];
      continue;
    }
    if (c >= 0x80) {
      if (const size_t len = utf8_length(s, i); len > 0) {
        // A valid sequence: as it is (len bytes for len bytes).
        for (const size_t end = i + len; i < end; ++i) *p++ = in[i];
        continue;
      }
    }
    p = write_escape(p, c);
    ++i;
  }
  *p++ = '"';
  return p;
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
