#include "core/common/unicode.h"

#include <gtest/gtest.h>

namespace kvgate::unicode {
namespace {

constexpr size_t npos = std::string_view::npos;

TEST(Utf8, AcceptsWellFormedText) {
  EXPECT_EQ(find_invalid_utf8(""), npos);
  EXPECT_EQ(find_invalid_utf8("plain ascii text that is longer than eight bytes"), npos);
  EXPECT_EQ(find_invalid_utf8("h\xC3\xA9llo \xE4\xB8\xAD \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF"), npos);
}

TEST(Utf8, FindsIllFormedBytes) {
  EXPECT_EQ(find_invalid_utf8("ab\xFF"), 2u);            // never valid
  EXPECT_EQ(find_invalid_utf8("abc\xC0\xAF"), 3u);       // overlong '/'
  EXPECT_EQ(find_invalid_utf8("\xE0\x80\xAF"), 0u);      // overlong, 3 bytes
  EXPECT_EQ(find_invalid_utf8("x\xED\xA0\x80"), 1u);     // surrogate U+D800
  EXPECT_EQ(find_invalid_utf8("\xF4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(find_invalid_utf8("12345678\xE4\xB8"), 8u);  // truncated at the end
  EXPECT_EQ(find_invalid_utf8("\xE4"
                              "a"
                              "\xB8"),
            0u);                             // continuation missing
  EXPECT_EQ(find_invalid_utf8("\x80"), 0u);  // lone continuation
}

// Texts of 64 bytes and more are checked by simdjson's validator first: the same answers,
// with the offset of the first ill-formed byte.
TEST(Utf8, LongTextsGiveTheSameAnswers) {
  std::string prefix;
  while (prefix.size() < 150) prefix += "h\xC3\xA9 \xE4\xB8\xAD\xF0\x9F\x98\x80 ascii ";
  EXPECT_EQ(find_invalid_utf8(prefix), npos);
  EXPECT_EQ(find_invalid_utf8(prefix + "\xF4\x8F\xBF\xBF" + prefix), npos);
  for (std::string_view bad : {"\xFF", "\xC0\xAF", "\xE0\x80\xAF", "\xED\xA0\x80",
                               "\xF4\x90\x80\x80", "\xE4\xB8", "\x80"}) {
    EXPECT_EQ(find_invalid_utf8(prefix + std::string(bad) + prefix), prefix.size()) << bad;
    EXPECT_EQ(find_invalid_utf8(prefix + std::string(bad)), prefix.size()) << bad;
  }
}

TEST(Utf8, LossyReplacesMaximalSubparts) {
  EXPECT_EQ(utf8_lossy("ok"), "ok");
  EXPECT_EQ(utf8_lossy("a\xFF"
                       "b"),
            "a\xEF\xBF\xBD"
            "b");
  // A truncated 3-byte sequence is one U+FFFD, like Rust's from_utf8_lossy.
  EXPECT_EQ(utf8_lossy("\xE4\xB8"
                       "z"),
            "\xEF\xBF\xBD"
            "z");
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x98"), "\xEF\xBF\xBD");
  EXPECT_EQ(utf8_lossy("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(CharClass, FollowsUnicodeCategories) {
  EXPECT_EQ(char_class('a'), kLetter);
  EXPECT_EQ(char_class(U'\u00E9'), kLetter);
  EXPECT_EQ(char_class(U'\u4E2D'), kLetter);  // CJK: Lo
  EXPECT_EQ(char_class(U'\u02B0'), kLetter);  // Lm
  EXPECT_EQ(char_class('7'), kNumber);
  EXPECT_EQ(char_class(U'\u0663'), kNumber);  // Arabic-Indic digit: Nd
  EXPECT_EQ(char_class(U'\u216B'), kNumber);  // Roman numeral: Nl
  EXPECT_EQ(char_class(U'\u00BD'), kNumber);  // 1/2: No
  EXPECT_EQ(char_class('\n'), kSpace | kNewline);
  EXPECT_EQ(char_class(U'\u3000'), kSpace);
  EXPECT_EQ(char_class(U'\u0085'), kSpace);
  EXPECT_EQ(char_class(U'\u2028'), kSpace);
  EXPECT_EQ(char_class(U'\u200B'), 0);  // zero width space is Cf, not \s
  EXPECT_EQ(char_class(U'\uFEFF'), 0);
  EXPECT_EQ(char_class(U'\u0301'), kMark);
  EXPECT_EQ(char_class('!'), kPunctuation);
  EXPECT_EQ(char_class('+'), kSymbol);
  EXPECT_EQ(char_class(U'\U0001F600'), kSymbol);
}

TEST(Nfc, ComposesAndKeepsAscii) {
  std::string out;
  nfc("cafe\xCC\x81", out);  // e + combining acute
  EXPECT_EQ(out, "caf\xC3\xA9");
  out.clear();
  nfc("plain", out);
  EXPECT_EQ(out, "plain");
}

}  // namespace
}  // namespace kvgate::unicode
