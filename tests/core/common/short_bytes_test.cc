#include "core/common/short_bytes.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace kvgate {
namespace {

// Every length from 0 to past the inline ones, at every alignment: the bytes std::memcpy
// copies, none written around them, the end returned.
TEST(ShortBytes, CopiesAsMemcpyAndNothingAround) {
  std::string from(80, '\0');
  for (size_t i = 0; i < from.size(); ++i) from[i] = static_cast<char>('a' + i % 26);
  for (size_t n = 0; n <= 48; ++n) {
    for (size_t at = 0; at < 8; ++at) {
      std::string to(n + 24, '#');
      char* const end = copy_short(to.data() + at + 8, from.data() + at, n);
      EXPECT_EQ(end, to.data() + at + 8 + n);
      std::string expected(n + 24, '#');
      std::memcpy(expected.data() + at + 8, from.data() + at, n);
      EXPECT_EQ(to, expected) << "n=" << n << " at=" << at;
    }
  }
  // Nothing read when empty.
  char c = '#';
  EXPECT_EQ(copy_short(&c, nullptr, 0), &c);
  EXPECT_EQ(c, '#');
}

// Equal and unequal at every position, every length: as std::memcmp == 0.
TEST(ShortBytes, ComparesAsMemcmp) {
  for (size_t n = 0; n <= 48; ++n) {
    std::string a(n, 'x');
    for (size_t i = 0; i < n; ++i) a[i] = static_cast<char>('A' + (i * 7) % 50);
    std::string b = a;
    EXPECT_TRUE(equal_short(a.data(), b.data(), n)) << n;
    for (size_t i = 0; i < n; ++i) {
      std::string c = a;
      c[i] = static_cast<char>(c[i] ^ 0x20);
      EXPECT_FALSE(equal_short(a.data(), c.data(), n)) << "n=" << n << " differs at " << i;
      EXPECT_FALSE(equal_short(c.data(), a.data(), n)) << "n=" << n << " differs at " << i;
    }
  }
  EXPECT_TRUE(equal_short(nullptr, nullptr, 0));
}

}  // namespace
}  // namespace kvgate
