#include "core/tokenizer/bpe.h"

#include <gtest/gtest.h>

#include "core/common/rng.h"
#include "core/common/unicode.h"
#include "fixtures.h"

namespace kvgate::tokenizer {

using unicode::append_utf8;

namespace {

// The character pre-merging shortcut (bpe_premerge.cc) must give exactly what plain
// byte-level BPE gives: random words from scripts whose bytes the vocabularies also
// merge across character boundaries (Cyrillic, punctuation, CJK, Hangul, kana, Latin-1).
void check_premerge(const Tokenizer& tok, uint64_t seed) {
  static constexpr std::pair<char32_t, char32_t> kRanges[] = {
      {0x20, 0x7E},     {0xA0, 0x17F},    {0x400, 0x4FF},   {0x2000, 0x206F}, {0x3000, 0x30FF},
      {0x4E00, 0x9FFF}, {0xAC00, 0xD7A3}, {0xFF00, 0xFFEF}, {0x600, 0x6FF},   {0xE00, 0xE7F}};
  Rng rng(seed);
  std::vector<uint32_t> fast, plain;
  for (int w = 0; w < 20000; ++w) {
    std::string word;
    const auto range = kRanges[rng.below(std::size(kRanges))];
    const size_t len = 1 + rng.below(w % 10 == 0 ? 120 : 12);
    for (size_t i = 0; i < len; ++i) {
      const auto& r = rng.below(4) == 0 ? kRanges[rng.below(std::size(kRanges))] : range;
      append_utf8(word, r.first + static_cast<char32_t>(rng.below(r.second - r.first + 1)));
    }
    fast.clear();
    plain.clear();
    tok.bpe().encode_word(word, fast);
    tok.bpe().encode_word_from_bytes(word, plain);
    ASSERT_EQ(fast, plain) << "word " << w << ": " << word;
  }
}

TEST(BpePremerge, EqualsPlainBpeQwen3) {
  KVGATE_REQUIRE_FIXTURE(t, "qwen3");
  check_premerge(*t, 1);
}

TEST(BpePremerge, EqualsPlainBpeLlama3) {
  KVGATE_REQUIRE_FIXTURE(t, "llama3");
  check_premerge(*t, 2);
}

// DeepSeek V3 takes the general pre-tokenizer path but still pre-merges characters.
TEST(BpePremerge, EqualsPlainBpeDeepSeekV3) {
  KVGATE_REQUIRE_FIXTURE(t, "deepseek_v3");
  ASSERT_TRUE(t->bpe().premerge());
  check_premerge(*t, 3);
}

// The character mode's whole-word lookup (a word equal to a token that BPE maps to
// itself) changes nothing either.
TEST(BpeShortcuts, CharacterModeEqualsPlainBpeLlama2) {
  KVGATE_REQUIRE_FIXTURE(t, "llama2");
  ASSERT_FALSE(t->bpe().byte_level());
  EXPECT_TRUE(t->bpe().fallback_inert());
  check_premerge(*t, 4);
}

}  // namespace
}  // namespace kvgate::tokenizer
