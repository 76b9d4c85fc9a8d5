#include "core/trace/json_cursor.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <bit>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace kvgate::trace {
// Named after the file, not anonymous: the tests compile in unity batches.
namespace json_cursor_test {

template <class T>
std::string with_to_chars(T v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// What write_int wrote, in a buffer with guard bytes after the bound: none is touched.
std::string written(int64_t v) {
  std::string buf(kIntBound + 8, '#');
  char* const end = write_int(buf.data(), v);
  EXPECT_LE(end - buf.data(), static_cast<ptrdiff_t>(kIntBound));
  EXPECT_EQ(buf.substr(kIntBound), std::string(8, '#'));
  return buf.substr(0, static_cast<size_t>(end - buf.data()));
}

std::string written_unsigned(uint64_t v) {
  std::string buf(kIntBound + 8, '#');
  char* const end = write_uint(buf.data(), v);
  EXPECT_LE(end - buf.data(), static_cast<ptrdiff_t>(kIntBound));
  EXPECT_EQ(buf.substr(kIntBound), std::string(8, '#'));
  return buf.substr(0, static_cast<size_t>(end - buf.data()));
}

// Every length of number, at its edges (10^k - 1, 10^k, 10^k + 1) and in between, and the
// extremes: the same text as std::to_chars.
TEST(JsonCursor, IntegersAsToChars) {
  std::vector<uint64_t> values = {0, 1, 7, 42, 12345678, 87654321, 99999999, 100000000};
  for (uint64_t p = 1; p <= 10'000'000'000'000'000'000ULL; p *= 10) {
    values.insert(values.end(), {p - 1, p, p + 1, p * 3 + 7, p / 7 * 5});
    if (p == 10'000'000'000'000'000'000ULL) break;
  }
  for (uint64_t v = 0; v < 10'000; ++v) values.push_back(v);  // the short ones, each
  values.push_back(1'700'000'000'001'000'000ULL);             // a time in Unix nanoseconds
  values.push_back(std::numeric_limits<uint64_t>::max());
  uint64_t x = 0x9e3779b97f4a7c15ULL;
  for (int i = 0; i < 2000; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    values.push_back(x >> (i % 64));
  }
  for (const uint64_t v : values) {
    EXPECT_EQ(written_unsigned(v), with_to_chars(v)) << v;
    const auto s = static_cast<int64_t>(v & 0x7fffffffffffffffULL);
    EXPECT_EQ(written(s), with_to_chars(s)) << s;
    EXPECT_EQ(written(-s), with_to_chars(-s)) << -s;
  }
  EXPECT_EQ(written(std::numeric_limits<int64_t>::min()), "-9223372036854775808");
  EXPECT_EQ(written(std::numeric_limits<int64_t>::max()), "9223372036854775807");
  EXPECT_EQ(written_unsigned(std::numeric_limits<uint64_t>::max()), "18446744073709551615");
}

// What `times` wrote for `t`, in a buffer with guard bytes after the bound: none is touched.
std::string written_time(UnixNanosWriter& times, int64_t t) {
  std::string buf(kIntBound + 8, '#');
  char* const end = times.write(buf.data(), t);
  EXPECT_LE(end - buf.data(), static_cast<ptrdiff_t>(kIntBound));
  EXPECT_EQ(buf.substr(kIntBound), std::string(8, '#'));
  return buf.substr(0, static_cast<size_t>(end - buf.data()));
}

// Times written by one writer, in an order that keeps and changes its second: the same
// text as std::to_chars for each (zero-padded nanoseconds, a second of another length of
// digits, the second boundaries, below 1 s, 0 and negative times, the extremes).
TEST(JsonCursor, UnixNanosAsToChars) {
  constexpr int64_t k1e9 = 1'000'000'000;
  const int64_t now = 1'700'000'000'000'000'000;
  std::vector<int64_t> times = {
      now,
      now + 1,            // the same second
      now + 999'999'999,  // its last nanosecond
      now + k1e9,         // the next second, at its first nanosecond
      now + k1e9 + 5,     // nanoseconds with leading zeros
      now + 999'999'999,  // back to the earlier second
      now + 100'000'000,  // one leading digit
      now + 10,
      0,         // the epoch: not kept
      now + 42,  // the kept second is still now's
      1,
      999'999'999,  // below 1 s: no seconds' digits
      k1e9,         // 1 s exactly: the first kept second (1 digit)
      k1e9 + 1,
      2 * k1e9 - 1,
      9'999'999'999,  // 1 digit of seconds, then 2
      10'000'000'000,
      10'000'000'007,
      -1,  // negative: write_int's
      -now,
      999'999'999'999'999'999,  // 9 digits of seconds, then 10
      1'000'000'000'000'000'000,
      now,
      std::numeric_limits<int64_t>::max(),
      std::numeric_limits<int64_t>::max() - 1,
      std::numeric_limits<int64_t>::min(),
      now + 3 * k1e9 + 123'456'789,
  };
  uint64_t x = 0x9e3779b97f4a7c15ULL;
  for (int i = 0; i < 2000; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    // Mostly within a few seconds of `now` (as a batch's are), sometimes anywhere.
    times.push_back(i % 10 == 9 ? static_cast<int64_t>(x >> (i % 64))
                                : now + static_cast<int64_t>(x % (4 * 1'000'000'000ULL)));
  }
  UnixNanosWriter writer;
  for (const int64_t t : times) EXPECT_EQ(written_time(writer, t), with_to_chars(t)) << t;
  // A fresh writer's first time, at 1 s and at 0.
  UnixNanosWriter fresh;
  EXPECT_EQ(written_time(fresh, k1e9), "1000000000");
  UnixNanosWriter zero;
  EXPECT_EQ(written_time(zero, 0), "0");
  EXPECT_EQ(written_time(zero, now), "1700000000000000000");
  EXPECT_EQ(written_time(zero, now + 7), "1700000000000000007");
}

// What write_json_string wrote for `s`, within its bound (guard bytes before and after it
// untouched). `s` is read from a copy of its exact size on the heap: a read past its end
// is one past an allocation (AddressSanitizer reports it).
std::string json(std::string_view s) {
  const std::vector<char> exact(s.begin(), s.end());
  const size_t bound = json_string_bound(s.size());
  std::string buf(8 + bound + 8, '#');
  char* const start = buf.data() + 8;
  char* const end = write_json_string(start, std::string_view(exact.data(), exact.size()));
  EXPECT_LE(static_cast<size_t>(end - start), bound);
  EXPECT_EQ(buf.substr(0, 8), std::string(8, '#'));
  EXPECT_EQ(buf.substr(8 + bound), std::string(8, '#'));
  return std::string(start, end);
}

// The JSON string of `s` written the obvious way, a byte at a time: the model.
std::string json_model(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t n = utf8_length(s, i);
      if (n == 0) {
        out += "\xef\xbf\xbd";
        ++i;
      } else {
        out += s.substr(i, n);
        i += n;
      }
      continue;
    }
    if (c == '"') {
      out += "\\\"";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20) {
      out += "\\u00";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
    ++i;
  }
  out += '"';
  return out;
}

// Plain text of `n` bytes, varied (letters, digits, punctuation; neither a quote nor a
// backslash).
std::string plain_text(size_t n) {
  static constexpr char kPlain[] = "abcdefghijklmnopqrstuvwxyz0123456789-._~/:?=&% ABCXYZ";
  std::string out;
  for (size_t i = 0; i < n; ++i) out += kPlain[(i * 5 + n) % (sizeof kPlain - 1)];
  return out;
}

// The bytes that need a look, one at a time and as UTF-8 sequences valid or not.
const std::vector<std::string>& specials() {
  static const std::vector<std::string> kSpecials = {
      "\"", "\\", "\n", "\r", "\t", std::string(1, '\0'), "\x01", "\x1f",
      "\x7f",                      // no escape, but the edge of the scan's range
      "\xff", "\x80", "\xc0\xaf",  // invalid: a byte never in UTF-8, a stray
                                   // continuation, an overlong form
      "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",  // valid: 2, 3, 4 bytes
      "\xe2\x82", "\xf0\x9f\x98", "\xed\xa0\x80"};     // truncated, truncated, a surrogate
  return kSpecials;
}

TEST(JsonCursor, StringsEscapedInPlace) {
  EXPECT_EQ(json(""), "\"\"");
  EXPECT_EQ(json("chat"), "\"chat\"");
  EXPECT_EQ(json("http://127.0.0.1:8001/v1/chat"), "\"http://127.0.0.1:8001/v1/chat\"");
  EXPECT_EQ(json("a\"b\\c\nd\re\tf"), "\"a\\\"b\\\\c\\nd\\re\\tf\"");
  EXPECT_EQ(json(std::string_view("\x00\x01\x1f\x7f", 4)), "\"\\u0000\\u0001\\u001f\x7f\"");
  EXPECT_EQ(json("h\xc3\xa9llo \xf0\x9f\x98\x80"), "\"h\xc3\xa9llo \xf0\x9f\x98\x80\"");
  EXPECT_EQ(json("a\xff"), "\"a\xef\xbf\xbd\"");
  EXPECT_EQ(json("\xe2\x82"), "\"\xef\xbf\xbd\xef\xbf\xbd\"");
  // At its longest: 6 characters a byte.
  const std::string controls(40, '\x01');
  std::string expected = "\"";
  for (size_t i = 0; i < controls.size(); ++i) expected += "\\u0001";
  expected += "\"";
  EXPECT_EQ(json(controls), expected);
  EXPECT_EQ(expected.size(), json_string_bound(controls.size()));
}

// Strings of every length from 0 to 40 (the 4-byte and 8-byte words, the last word over
// what was written, whole words and tails), plain, and with each byte that needs a look
// at every offset: the same text as the model.
TEST(JsonCursor, StringsAsTheModelAtEveryOffset) {
  for (size_t n = 0; n <= 40; ++n) {
    const std::string plain = plain_text(n);
    EXPECT_EQ(json(plain), json_model(plain)) << n;
    for (const std::string& special : specials()) {
      for (size_t at = 0; at + special.size() <= n; ++at) {
        std::string text = plain;
        text.replace(at, special.size(), special);
        EXPECT_EQ(json(text), json_model(text)) << "length " << n << " at " << at;
      }
    }
  }
}

// Two bytes that need a look in one string, at every pair of offsets: escapes before the
// last word (the text written is longer than the bytes read) and within it.
TEST(JsonCursor, StringsWithTwoEscapesAsTheModel) {
  const std::string kTwo[] = {"\"", "\x01", "\xff", "\xc3\xa9", "\xf0\x9f\x98\x80"};
  for (size_t n = 2; n <= 26; ++n) {
    for (const std::string& a : kTwo) {
      for (const std::string& b : kTwo) {
        for (size_t i = 0; i + a.size() <= n; ++i) {
          for (size_t j = i + a.size(); j + b.size() <= n; ++j) {
            std::string text = plain_text(n);
            text.replace(i, a.size(), a);
            text.replace(j, b.size(), b);
            EXPECT_EQ(json(text), json_model(text)) << "length " << n << " at " << i << ", " << j;
          }
        }
      }
    }
  }
}

// What write_plain_string wrote for `s` (guard bytes after 2 + size untouched).
std::string plain_json(std::string_view s) {
  std::string buf(2 + s.size() + 8, '#');
  char* const end = write_plain_string(buf.data(), s);
  EXPECT_EQ(static_cast<size_t>(end - buf.data()), 2 + s.size());
  EXPECT_EQ(buf.substr(2 + s.size()), std::string(8, '#'));
  return buf.substr(0, static_cast<size_t>(end - buf.data()));
}

// Text that needs no escape (json_plain): copied as write_json_string copies it; any byte
// that needs one makes it not plain (0x7f is plain: it is not escaped).
TEST(JsonCursor, PlainStrings) {
  EXPECT_EQ(plain_json(std::string_view()), "\"\"");
  EXPECT_EQ(plain_json("kvgate.upstream"), "\"kvgate.upstream\"");
  for (size_t n = 0; n <= 40; ++n) {
    const std::string text = plain_text(n);
    EXPECT_TRUE(json_plain(text)) << text;
    EXPECT_EQ(plain_json(text), json(text)) << text;
  }
  const std::string edges = std::string(" ~\x7f!#[]") + "\x7f";
  EXPECT_TRUE(json_plain(edges));
  EXPECT_EQ(plain_json(edges), json(edges));
  for (const std::string& special : specials()) {
    if (special == "\x7f") continue;
    EXPECT_FALSE(json_plain("kvgate." + special)) << special;
  }
  static_assert(json_plain("kvgate.upstream") && !json_plain("a\"b"));
}

// What write_double wrote for `v`, within kDoubleBound (guard bytes after it untouched).
std::string double_json(double v) {
  std::string buf(kDoubleBound + 8, '#');
  char* const end = write_double(buf.data(), v);
  EXPECT_LE(static_cast<size_t>(end - buf.data()), kDoubleBound);
  EXPECT_EQ(buf.substr(kDoubleBound), std::string(8, '#'));
  return buf.substr(0, static_cast<size_t>(end - buf.data()));
}

// Finite doubles of every kind: zeros, integers at the edge of the integers written in
// place (1e15) and of fixed notation (1e16), decimals of up to 6 places and more, at the
// edges of the decimals written in place (1e-4, 2^33), binary fractions, values near
// powers of 10, random bit patterns and values from uniform ranges (a fixed seed): the
// same text as {fmt}'s "{}".
TEST(JsonCursor, DoublesAsFmt) {
  constexpr double kMax = std::numeric_limits<double>::max();
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> values;
  // Zeros and integers, to the edges of those written in place (below 1e15) and of
  // fixed notation (below 1e16).
  values.insert(values.end(), {0.0, -0.0, 1.0, -1.0, 3.0, 42.0, -42.0, 999999999999999.0});
  values.insert(values.end(), {-999999999999999.0, 1e15, -1e15, 1e15 + 1, 1e16, 1e16 - 2});
  values.insert(values.end(), {1e17, 9007199254740993.0, 1e21, 1e22, 1e300});
  // Decimals: of up to 6 places and more, to the edges of those written in place (1e-4,
  // 2^33), and those that read back only with many digits.
  values.insert(values.end(), {0.5, 0.25, 0.1, 0.2, 0.3, 0.1 + 0.2, 123.456789, -123.456789});
  values.insert(values.end(), {123.4567891, 1e-4, -1e-4, 9.99e-5, 1e-5, 1e-7, 0.000123});
  values.insert(values.end(), {0.0001234567, 0.000101, 0.999999, 0.9999995, 0.9999999});
  values.insert(values.end(), {999999.999999, 999999.9999995, 1234567.25, 3.14159});
  values.insert(values.end(), {2.718281828459045, 999999999999999.9, -1e-300});
  values.insert(values.end(), {0x1p33, 0x1p33 - 0.5, 0x1p33 - 0.25, 8589934591.999999, 8589934591.5,
                               8589934591.000001, 4294967296.000001, 4294967295.999999,
                               0x1p32 + 0x1p-20, 0x1p33 + 0x1p-19});
  values.insert(values.end(), {std::numeric_limits<double>::min(),
                               std::numeric_limits<double>::denorm_min(), kMax, -kMax});
  for (const double edge : {1e-4, 1e15, 1e16, 0x1p33, 0x1p32, 1.0, 0.1, 1e-5}) {
    double below = edge;
    double above = edge;
    for (int i = 0; i < 4; ++i) {
      below = std::nextafter(below, 0.0);
      above = std::nextafter(above, kInf);
      values.insert(values.end(), {below, above, -below, -above});
    }
  }
  // Powers of 2 and their neighbours, odd multiples of binary fractions.
  for (int k = -60; k <= 60; ++k) {
    const double p = std::ldexp(1.0, k);
    values.insert(values.end(), {p, -p, 3 * p, p + 1, p - 1, 1 - p, 1 + p});
  }
  for (int n = 1; n <= 24; ++n) {
    for (const double k : {1.0, 3.0, 5.0, 7.0, 1001.0, 123457.0, 16777215.0}) {
      values.push_back(std::ldexp(k, -n));
    }
  }
  // Powers of 10 and their neighbours.
  for (int k = -12; k <= 22; ++k) {
    const double p = std::pow(10.0, k);
    values.insert(values.end(), {p, -p, std::nextafter(p, 0.0), std::nextafter(p, kInf), p * 7});
  }
  std::mt19937_64 rng(0x6b76676174655f31ULL);
  // Decimals of 0 to 9 places: m / 10^places for random m (whose text is mostly that).
  for (int places = 0; places <= 9; ++places) {
    const double scale = std::pow(10.0, places);
    for (int i = 0; i < 2000; ++i) {
      const uint64_t m = rng() % (i % 2 == 0 ? 100'000'000'000ULL : 10'000'000ULL);
      values.push_back(static_cast<double>(m) / scale);
      values.push_back(-static_cast<double>(m) / scale);
    }
  }
  // Random bit patterns (the finite ones).
  for (int i = 0; i < 20000; ++i) {
    const double v = std::bit_cast<double>(rng());
    if (std::isfinite(v)) values.push_back(v);
  }
  // Uniform ranges.
  const std::pair<double, double> kRanges[] = {{-1, 1},       {0, 1e-3}, {0, 0x1p34},
                                               {-1e16, 1e16}, {0, 100},  {1e14, 1e16}};
  for (const auto& [lo, hi] : kRanges) {
    std::uniform_real_distribution<double> uniform(lo, hi);
    for (int i = 0; i < 5000; ++i) values.push_back(uniform(rng));
  }
  // Integers, small and large, in ranges of magnitude.
  for (int i = 0; i < 5000; ++i) {
    const auto m = static_cast<int64_t>(rng() >> (11 + i % 53));
    values.push_back(static_cast<double>(i % 2 == 0 ? m : -m));
  }
  for (const double v : values) {
    EXPECT_EQ(double_json(v), fmt::format("{}", v))
        << fmt::format("{:a}", v) << " bits " << std::bit_cast<uint64_t>(v);
  }
}

}  // namespace json_cursor_test
}  // namespace kvgate::trace
