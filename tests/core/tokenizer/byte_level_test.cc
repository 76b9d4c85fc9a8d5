// The byte-level alphabet (GPT-2's): every byte has a printable character and back.
#include "core/tokenizer/byte_level.h"

#include <gtest/gtest.h>

namespace kvgate::tokenizer {
namespace {

TEST(ByteLevel, RoundTripsEveryByte) {
  for (int b = 0; b < 256; ++b) {
    const char32_t c = byte_to_char(static_cast<uint8_t>(b));
    ASSERT_EQ(char_to_byte(c), b);
  }
  EXPECT_EQ(byte_to_char(' '), U'\u0120');   // Ġ
  EXPECT_EQ(byte_to_char('\n'), U'\u010A');  // Ċ
  EXPECT_EQ(char_to_byte(U'\u4E2D'), std::nullopt);
  EXPECT_EQ(byte_level_decode("\xC4\xA0hi"), std::string(" hi"));
  EXPECT_EQ(byte_level_decode("\xE4\xB8\xAD"), std::nullopt);
}

}  // namespace
}  // namespace kvgate::tokenizer
