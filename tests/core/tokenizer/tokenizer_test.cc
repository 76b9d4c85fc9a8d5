#include "core/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "fixtures.h"

namespace kvgate::tokenizer {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace tokenizer_test {

using Ids = std::vector<uint32_t>;
using testing::tiny_tokenizer_json;

Tokenizer tiny(const std::string& normalizer = "null") {
  auto t = Tokenizer::load(tiny_tokenizer_json(normalizer));
  EXPECT_TRUE(t.ok()) << t.error();
  return std::move(*t);
}

TEST(Tokenizer, MergesByRank) {
  Tokenizer t = tiny();
  EXPECT_EQ(*t.encode("hello"), (Ids{259}));
  EXPECT_EQ(*t.encode("hell"), (Ids{258}));
  EXPECT_EQ(*t.encode("help"), (Ids{257, 'p'}));
  // " world": the pre-token " world" merges Ġw first.
  EXPECT_EQ(*t.encode("hello world"), (Ids{259, 260, 'o', 'r', 'l', 'd'}));
  EXPECT_EQ(*t.encode(""), Ids{});
}

TEST(Tokenizer, LongWordsUseTheHeapPathWithTheSameResult) {
  Tokenizer t = tiny();
  std::string w;
  Ids want;
  for (int i = 0; i < 100; ++i) {
    w += "hello";
    want.push_back(259);
  }
  EXPECT_EQ(*t.encode(w), want);  // 500 bytes > the short-word limit
}

TEST(Tokenizer, AddedTokensSplitFirstAndHonourStrip) {
  Tokenizer t = tiny();
  EXPECT_EQ(*t.encode("hello<|end|>hello"), (Ids{259, 300, 259}));
  EXPECT_EQ(*t.encode("<|end|<|end|>"), (Ids{'<', '|', 'e', 'n', 'd', '|', 300}));
  // <x> has lstrip and rstrip: the spaces around it disappear into it.
  EXPECT_EQ(*t.encode("hello  <x>  hello"), (Ids{259, 301, 259}));
}

TEST(Tokenizer, NfcNormalizesOutsideAddedTokens) {
  Tokenizer plain = tiny();
  Tokenizer nfc = tiny(R"({"type": "NFC"})");
  // e + U+0301 becomes U+00E9 (bytes C3 A9) under NFC only.
  EXPECT_EQ(*nfc.encode("e\xCC\x81"), (Ids{0xC3, 0xA9}));
  EXPECT_EQ(*plain.encode("e\xCC\x81"), (Ids{'e', 0xCC, 0x81}));
}

TEST(Tokenizer, InvalidUtf8IsAnErrorNamingTheOffset) {
  Tokenizer t = tiny();
  auto r = t.encode("hello\xFFworld");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("invalid UTF-8 at byte 5"), std::string::npos) << r.error();
  EXPECT_FALSE(t.encode("\xED\xA0\x80").ok());
  EXPECT_FALSE(t.encode(std::string("a\0\xC0", 3)).ok());
  EXPECT_TRUE(t.encode(std::string("a\0b", 3)).ok());  // NUL is valid text
}

TEST(Tokenizer, DecodeRoundTripsAndSkipsSpecial) {
  Tokenizer t = tiny();
  const std::string text = "hello world<|end|> \xE4\xB8\xAD\n";
  auto ids = t.encode(text);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*t.decode(*ids, false), text);
  EXPECT_EQ(*t.decode(*ids, true), "hello world \xE4\xB8\xAD\n");
  EXPECT_EQ(*t.decode(Ids{0xE4, 0xB8}, false), "\xEF\xBF\xBD");  // partial char -> U+FFFD
  EXPECT_FALSE(t.decode(Ids{99999}, false).ok());
}

TEST(Tokenizer, RejectsUnsupportedConstructsNamingTheField) {
  auto expect_error = [](const std::string& json, const std::string& field) {
    auto r = Tokenizer::load(json);
    ASSERT_FALSE(r.ok()) << field;
    EXPECT_NE(r.error().find(field), std::string::npos) << r.error();
  };
  expect_error(tiny_tokenizer_json(R"({"type": "BertNormalizer"})"), "normalizer.type");
  expect_error(tiny_tokenizer_json(R"({"type": "Precompiled", "precompiled_charsmap": "AAAA"})"),
               "Precompiled");
  expect_error(tiny_tokenizer_json("null", R"([a[b]])"),
               "pre_tokenizer.pretokenizers[0].pattern.Regex");
  std::string j = tiny_tokenizer_json();
  expect_error(j.substr(0, j.size() / 2), "not valid JSON");
  std::string dropout = j;
  dropout.replace(dropout.find("\"dropout\": null"), 15, "\"dropout\": 0.1");
  expect_error(dropout, "model.dropout");
  std::string unigram = j;
  unigram.replace(unigram.find("\"type\": \"BPE\""), 13, "\"type\": \"Unigram\"");
  expect_error(unigram, "model.type: unsupported \"Unigram\"");
  std::string merge = j;
  merge.replace(merge.find("\"hell o\""), 8, "\"hell q\"");
  expect_error(merge, "model.merges[3]");
  std::string order = j;
  order.replace(order.find("{\"type\": \"Split\""), 0,
                R"({"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}, )");
  expect_error(order, "ByteLevel step before");
  std::string dec = j;
  dec.replace(dec.find("\"decoder\": {\"type\": \"ByteLevel\""), 31,
              "\"decoder\": {\"type\": \"WordPiece\"");
  expect_error(dec, "decoder.type");
  expect_error("{}", "model: missing");
  expect_error("[]", "model: missing");
}

// single_word: a match touching a word character is dropped (and the automaton moves on).
TEST(Tokenizer, SingleWordAddedTokens) {
  std::string j = tiny_tokenizer_json();
  j.replace(j.find("\"single_word\": false"), 20, "\"single_word\": true");
  auto t = Tokenizer::load(j);
  ASSERT_TRUE(t.ok()) << t.error();
  EXPECT_EQ(*t->encode("a <|end|> b"), (Ids{'a', ' ', 300, ' ', 'b'}));
  const Ids glued = *t->encode("a<|end|>b");
  EXPECT_EQ(std::count(glued.begin(), glued.end(), 300u), 0);
}

// Ids from the Hugging Face tokenizers library (the Node addon) for the same strings.
TEST(TokenizerFixture, Llama3MatchesReferenceIds) {
  KVGATE_REQUIRE_FIXTURE(t, "llama3");
  EXPECT_EQ(*t->encode("Hello world<|eot_id|> it's"), (Ids{9906, 1917, 128009, 433, 596}));
  EXPECT_EQ(t->token_to_id("<|begin_of_text|>"), 128000u);
}

TEST(TokenizerFixture, Qwen3MatchesReferenceIds) {
  KVGATE_REQUIRE_FIXTURE(t, "qwen3");
  EXPECT_EQ(*t->encode("Hello world<|im_end|>\n<think>"), (Ids{9707, 1879, 151645, 198, 151667}));
  EXPECT_EQ(*t->encode("  12 你好"), (Ids{220, 220, 16, 17, 220, 108386}));
  EXPECT_LE(t->memory_bytes(), 64u << 20);
  const std::string text = "Round trip: héllo 🎉 <|im_start|>user\n";
  EXPECT_EQ(*t->decode(*t->encode(text), false), text);
}

}  // namespace tokenizer_test
}  // namespace kvgate::tokenizer

namespace kvgate::tokenizer {
namespace tokenizer_test {

TEST(Tokenizer, ReadsTemplateProcessingForSpecialTokens) {
  std::string j = testing::tiny_tokenizer_json();
  const std::string pp =
      R"({"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
        {"type": "TemplateProcessing",
         "single": [{"SpecialToken": {"id": "<|end|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
         "pair": [], "special_tokens": {"<|end|>": {"id": "<|end|>", "ids": [300], "tokens": ["<|end|>"]}}}]})";
  j.replace(j.find("\"post_processor\": null"), 22, "\"post_processor\": " + pp);
  auto t = Tokenizer::load(j);
  ASSERT_TRUE(t.ok()) << t.error();
  EXPECT_EQ(t->post_prefix(), std::vector<uint32_t>{300});
  EXPECT_TRUE(t->post_suffix().empty());
  std::string bad = j;
  bad.replace(bad.find("\"ids\": [300]"), 12, "\"ids\": [\"x\"]");
  EXPECT_FALSE(Tokenizer::load(bad).ok());
  std::string other = testing::tiny_tokenizer_json();
  other.replace(other.find("\"post_processor\": null"), 22,
                R"("post_processor": {"type": "BertProcessing"})");  // no sep/cls
  auto r = Tokenizer::load(other);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("post_processor.sep"), std::string::npos) << r.error();
}

}  // namespace tokenizer_test
}  // namespace kvgate::tokenizer
