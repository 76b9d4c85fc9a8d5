#include "core/trace/json_cursor.h"

#include <gtest/gtest.h>

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
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
  values.push_back(1'700'000'000'001'000'000ULL);  // a time in Unix nanoseconds
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

// What write_json_string wrote for `s`, within its bound (guard bytes after it untouched).
std::string json(std::string_view s) {
  const size_t bound = json_string_bound(s.size());
  std::string buf(bound + 8, '#');
  char* const end = write_json_string(buf.data(), s);
  EXPECT_LE(static_cast<size_t>(end - buf.data()), bound);
  EXPECT_EQ(buf.substr(bound), std::string(8, '#'));
  return buf.substr(0, static_cast<size_t>(end - buf.data()));
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

}  // namespace json_cursor_test
}  // namespace kvgate::trace
