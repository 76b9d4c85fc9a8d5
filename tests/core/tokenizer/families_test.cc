// The general loader on the real tokenizer.json of eight families (ids from the Hugging
// Face tokenizers library for the same strings), and the fast path proven equal to the
// general path on one corpus.
#include <gtest/gtest.h>

#include "core/common/rng.h"
#include "core/common/unicode.h"
#include "core/tokenizer/tokenizer.h"
#include "fixtures.h"

namespace kvgate::tokenizer {

using unicode::append_utf8;

// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace families_test {

using Ids = std::vector<uint32_t>;

TEST(TokenizerFamilies, Llama2ByteFallbackAndPrependPerSegment) {
  KVGATE_REQUIRE_FIXTURE(t, "llama2");
  EXPECT_FALSE(t->path().fast);
  // U+20000 is not in the vocabulary: its four bytes fall back to <0xNN> tokens; the text
  // after </s> is normalized on its own and gets its own leading ▁.
  const std::string text = "Hello world</s> it's \xF0\xA0\x80\x80x";
  EXPECT_EQ(*t->encode(text),
            (Ids{22557, 1526, 2, 28705, 378, 28742, 28713, 28705, 243, 163, 131, 131, 28744}));
  EXPECT_EQ(*t->decode(*t->encode(text), false), "Hello world</s>  it's \xF0\xA0\x80\x80x");
  EXPECT_EQ(*t->encode(" lead  spaces"), (Ids{28705, 1736, 28705, 10599}));
  EXPECT_EQ(t->post_prefix(), Ids{1});
}

TEST(TokenizerFamilies, Gemma3) {
  KVGATE_REQUIRE_FIXTURE(t, "gemma3");
  EXPECT_EQ(*t->encode("Hello world<end_of_turn>\n\xF0\xA0\x80\x80 12345"),
            (Ids{9259, 1902, 106, 107, 478, 398, 366, 366, 236743, 236770, 236778, 236800, 236812,
                 236810}));
  EXPECT_EQ(*t->encode("<start_of_turn>user"), (Ids{105, 2364}));
  EXPECT_EQ(t->post_prefix(), Ids{2});
}

TEST(TokenizerFamilies, DeepSeekV3ThreeSplitRegexes) {
  KVGATE_REQUIRE_FIXTURE(t, "deepseek_v3");
  EXPECT_FALSE(t->path().fast);
  const std::string text =
      "Hello world<\xEF\xBD\x9C"
      "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C> 12345 "
      "\xE4\xB8\xAD\xE6\x96\x87\xE5\xAD\x97\xE7\xAC\xA6 it's";
  EXPECT_EQ(*t->encode(text),
            (Ids{19923, 2058, 1, 223, 6895, 1883, 223, 525, 10541, 4596, 436, 734}));
  EXPECT_EQ(*t->decode(*t->encode(text), false), text);
}

// Gemma (1): no pre-tokenizer, so the whole normalized text is one BPE word ("▁▁" is a
// token of its own); byte fallback for U+20000.
TEST(TokenizerFamilies, GemmaWholeTextIsOneWord) {
  KVGATE_REQUIRE_FIXTURE(t, "gemma");
  EXPECT_FALSE(t->path().fast);
  const std::string text = "Hello  world<start_of_turn>user\n\xF0\xA0\x80\x80 12345 it's";
  EXPECT_EQ(*t->encode(text), (Ids{4521, 139, 9097, 106, 1645, 108, 457, 377, 345, 345, 235248,
                                   235274, 235284, 235304, 235310, 235308, 665, 235303, 235256}));
  EXPECT_EQ(*t->decode(*t->encode(text), false), text);
  EXPECT_EQ(*t->encode("   lead and trail   "), (Ids{140, 26949, 578, 14604, 140}));
  EXPECT_EQ(t->post_prefix(), Ids{2});
}

// Llama 3.1: Llama 3's Split (the fast path) and a Sequence post-processor (ByteLevel,
// then TemplateProcessing with <|begin_of_text|>).
TEST(TokenizerFamilies, Llama31SequencePostProcessor) {
  KVGATE_REQUIRE_FIXTURE(t, "llama3_1");
  EXPECT_TRUE(t->path().fast);
  const std::string text = "Hello world<|eot_id|>\n\n 12345 \xE4\xB8\xAD\xE6\x96\x87 it's";
  EXPECT_EQ(*t->encode(text),
            (Ids{9906, 1917, 128009, 271, 220, 4513, 1774, 73958, 17161, 433, 596}));
  EXPECT_EQ(*t->decode(*t->encode(text), false), text);
  EXPECT_EQ(*t->encode("<|start_header_id|>user<|end_header_id|>"), (Ids{128006, 882, 128007}));
  EXPECT_EQ(t->post_prefix(), Ids{128000});
}

// gpt-oss (o200k_harmony): a Split regex with case classes (\p{Lu}\p{Lt}... then
// \p{Ll}..., contractions in (?i:...)) that PCRE2 runs, merges as pairs, ignore_merges,
// added tokens above the 200k vocabulary; the post-processor adds nothing.
TEST(TokenizerFamilies, GptOssO200kHarmony) {
  KVGATE_REQUIRE_FIXTURE(t, "gpt_oss");
  EXPECT_FALSE(t->path().fast);
  const std::string text =
      "Hello WORLD's<|start|>assistant<|channel|>final<|message|> 12345 "
      "\xE4\xB8\xAD\xE6\x96\x87 don'T";
  EXPECT_EQ(*t->encode(text), (Ids{13225, 79618, 885, 200006, 173781, 200005, 17196, 200008, 220,
                                   7633, 2548, 83711, 1700, 51532}));
  EXPECT_EQ(*t->decode(*t->encode(text), false), text);
  // U+01C5 is titlecase (Lt), U+0301 a mark (M).
  const std::string cased =
      "CamelCaseWord\xC7\x85x ab\xCC\x81"
      "c /path/\r\n";
  EXPECT_EQ(*t->encode(cased),
            (Ids{137910, 6187, 12929, 131, 227, 87, 692, 13430, 66, 820, 4189, 73079}));
  EXPECT_EQ(*t->decode(*t->encode(cased), false), cased);
  EXPECT_TRUE(t->post_prefix().empty());
}

// Strings mixing every kind of text the fast path's scanner distinguishes.
std::vector<std::string> corpus(uint64_t seed, size_t n) {
  static const char* kPieces[] = {"Hello",
                                  " world",
                                  "it's",
                                  "IT'S",
                                  " 'll",
                                  "12345",
                                  " 3.14",
                                  "\n\n",
                                  "  \n ",
                                  "\t",
                                  "   ",
                                  "\xE4\xB8\xAD\xE6\x96\x87",
                                  "\xF0\x9F\x98\x80",
                                  "caf\xC3\xA9",
                                  "e\xCC\x81",
                                  "!!",
                                  "?\n",
                                  "<|im_end|>",
                                  "<|eot_id|>",
                                  "\xC2\x85",
                                  "\xE2\x80\xA8",
                                  "_x_",
                                  "def f(x):\n    return x",
                                  "\xD9\xA3\xD9\xA4",
                                  "\xE2\x85\xA0"};
  Rng rng(seed);
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    std::string s;
    const size_t k = 1 + rng.below(20);
    for (size_t j = 0; j < k; ++j) {
      if (rng.below(5) == 0) {
        append_utf8(s, static_cast<char32_t>(0x20 + rng.below(0x3000)));
      } else {
        s += kPieces[rng.below(std::size(kPieces))];
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

void expect_fast_equals_general(const std::string& model) {
  const Tokenizer* fast = testing::fixture_tokenizer(model);
  auto text = testing::read_fixture(model, "tokenizer.json");
  if (!fast || !text) GTEST_SKIP() << "fixture " << model << " absent";
  auto general = Tokenizer::load(*text, {.fast_paths = false});
  ASSERT_TRUE(general.ok()) << general.error();
  ASSERT_TRUE(fast->path().fast) << fast->path().why;
  ASSERT_FALSE(general->path().fast);
  size_t tokens = 0;
  for (const std::string& s : corpus(7, 3000)) {
    auto a = fast->encode(s);
    auto b = general->encode(s);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(*a, *b) << s;
    tokens += a->size();
  }
  EXPECT_GT(tokens, 50000u);
}

TEST(TokenizerFamilies, Qwen3FastPathEqualsGeneralPath) { expect_fast_equals_general("qwen3"); }
TEST(TokenizerFamilies, Llama3FastPathEqualsGeneralPath) { expect_fast_equals_general("llama3"); }

}  // namespace families_test
}  // namespace kvgate::tokenizer
