#include "core/tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kvgate::tokenizer {
namespace {

std::vector<std::string> pieces(SplitPattern p, std::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const size_t e = next_piece(p, s, i);
    EXPECT_GT(e, i);
    out.emplace_back(s.substr(i, e - i));
    i = e;
  }
  return out;
}

using V = std::vector<std::string>;
constexpr auto kQ = SplitPattern::kQwen2;
constexpr auto kL = SplitPattern::kLlama3;

TEST(SplitScanner, WordsTakeOneLeadingNonLetter) {
  EXPECT_EQ(pieces(kQ, "Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(pieces(kQ, "a.b\tc"), (V{"a", ".b", "\tc"}));
  EXPECT_EQ(pieces(kQ, "\nword"), (V{"\n", "word"}));  // \r\n never lead a word
}

TEST(SplitScanner, ContractionsAreCaseInsensitive) {
  EXPECT_EQ(pieces(kQ, "don't"), (V{"don", "'t"}));
  EXPECT_EQ(pieces(kQ, "WE'LL"), (V{"WE", "'LL"}));
  EXPECT_EQ(pieces(kQ, "it'Re"), (V{"it", "'Re"}));
  EXPECT_EQ(pieces(kQ, "x'sy"), (V{"x", "'s", "y"}));
  EXPECT_EQ(pieces(kQ, "'x"), (V{"'x"}));
  EXPECT_EQ(pieces(kQ, "a\u017F'\u017F"), (V{"a\u017F", "'\u017F"}));  // long s folds to s
}

TEST(SplitScanner, NumbersDifferBetweenQwenAndLlama) {
  EXPECT_EQ(pieces(kQ, "12345"), (V{"1", "2", "3", "4", "5"}));
  EXPECT_EQ(pieces(kL, "12345"), (V{"123", "45"}));
  EXPECT_EQ(pieces(kL, " 1234"), (V{" ", "123", "4"}));
}

TEST(SplitScanner, PunctuationKeepsOneSpaceAndTrailingNewlines) {
  EXPECT_EQ(pieces(kQ, "a !?\n\nb"), (V{"a", " !?\n\n", "b"}));
  EXPECT_EQ(pieces(kQ, "x  ++"), (V{"x", " ", " ++"}));
}

TEST(SplitScanner, WhitespaceRunsLeaveTheLastSpaceToTheNextWord) {
  EXPECT_EQ(pieces(kQ, "a   b"), (V{"a", "  ", " b"}));
  EXPECT_EQ(pieces(kQ, "a   "), (V{"a", "   "}));  // at the end: the whole run
  EXPECT_EQ(pieces(kQ, "a \n  \n b"), (V{"a", " \n  \n", " b"}));
  EXPECT_EQ(pieces(kQ, "a\t1"), (V{"a", "\t", "1"}));
  EXPECT_EQ(pieces(kQ, "\u3000\u3000x"), (V{"\u3000", "\u3000x"}));
}

TEST(SplitScanner, RecognizesOnlyKnownPatterns) {
  EXPECT_EQ(
      recognize_split_regex(
          R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"),
      kL);
  EXPECT_EQ(recognize_split_regex(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+)"), std::nullopt);
}

}  // namespace
}  // namespace kvgate::tokenizer
