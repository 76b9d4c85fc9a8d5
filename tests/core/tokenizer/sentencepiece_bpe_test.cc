// The character-mode pipeline on a tiny SentencePiece-style tokenizer.json (the shape of
// Llama 2 and Gemma): Prepend + Replace normalizer, no pre-tokenizer, BPE over characters
// with byte fallback and a fused unk, the Replace/ByteFallback/Fuse/Strip decoder and a
// TemplateProcessing post-processor.
#include <gtest/gtest.h>

#include <cstdio>

#include "core/common/rng.h"
#include "core/tokenizer/bpe.h"
#include "core/tokenizer/tokenizer.h"

namespace kvgate::tokenizer {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace sentencepiece_bpe_test {

using Ids = std::vector<uint32_t>;

std::string spm_json(bool fuse_unk) {
  return std::string(R"({"version": "1.0",
  "added_tokens": [
    {"id": 1, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
    {"id": 2, "content": "</s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}],
  "normalizer": {"type": "Sequence", "normalizers": [
    {"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
  "pre_tokenizer": null,
  "post_processor": {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
    "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
             {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
    "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
  "decoder": {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"},
    {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
  "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "continuing_subword_prefix": null,
    "end_of_word_suffix": null, "fuse_unk": )") +
         (fuse_unk ? "true" : "false") + R"(, "byte_fallback": true,
    "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0xC3>": 3, "<0xA9>": 4, "▁": 5, "h": 6, "e": 7,
              "l": 8, "o": 9, "▁h": 10, "▁he": 11, "ll": 12, "llo": 13, "▁hello": 14},
    "merges": ["▁ h", "▁h e", "l l", "ll o", "▁he llo"]}})";
}

TEST(SentencePieceBpe, MergesCharactersFallsBackToBytesAndFusesUnknowns) {
  auto t = Tokenizer::load(spm_json(true));
  ASSERT_TRUE(t.ok()) << t.error();
  EXPECT_FALSE(t->bpe().byte_level());
  EXPECT_EQ(*t->encode("hello"), (Ids{14}));
  EXPECT_EQ(*t->encode("h\xC3\xA9"), (Ids{10, 3, 4}));    // é: its two bytes
  EXPECT_EQ(*t->encode("hx\xE2\x82\xAC"), (Ids{10, 0}));  // x and €: no bytes, one fused unk
  auto unfused = Tokenizer::load(spm_json(false));
  ASSERT_TRUE(unfused.ok());
  EXPECT_EQ(*unfused->encode("hx\xE2\x82\xAC"), (Ids{10, 0, 0}));
  // Each piece between added tokens is normalized on its own: a ▁ each.
  EXPECT_EQ(*t->encode("hello</s>hello"), (Ids{14, 2, 14}));
}

TEST(SentencePieceBpe, DecodesThroughTheDecoderChain) {
  auto t = Tokenizer::load(spm_json(true));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t->decode(Ids{10, 3, 4}, false), "h\xC3\xA9");
  EXPECT_EQ(*t->decode(Ids{14, 2, 14}, false), "hello</s> hello");
  EXPECT_EQ(*t->decode(Ids{14, 2, 14}, true), "hello hello");
  EXPECT_EQ(*t->decode(Ids{10, 3}, false), "h\xEF\xBF\xBD");  // a lone byte: U+FFFD
}

TEST(SentencePieceBpe, PostProcessorSingleAndPair) {
  auto t = Tokenizer::load(spm_json(true));
  ASSERT_TRUE(t.ok());
  const Ids a{14}, b{10};
  std::vector<uint32_t> out;
  t->post_process(a, nullptr, out);
  EXPECT_EQ(out, (Ids{1, 14}));
  out.clear();
  const std::span<const uint32_t> bs(b);
  t->post_process(a, &bs, out);
  EXPECT_EQ(out, (Ids{1, 14, 1, 10}));
}

TEST(SentencePieceBpe, SubwordPrefixAndWordSuffix) {
  BpeModel::Options prefix{.byte_level = false, .continuing_subword_prefix = "##"};
  auto p = BpeModel::build({{"a", 0}, {"##b", 1}, {"ab", 2}}, {{"a", "##b"}}, prefix);
  ASSERT_TRUE(p.ok()) << p.error();
  Ids out;
  p->encode_word("ab", out);
  EXPECT_EQ(out, Ids{2});
  out.clear();
  p->encode_word("ba", out);  // neither "b" nor "##a" exists, no unk: both dropped
  EXPECT_TRUE(out.empty());
  BpeModel::Options suffix{.byte_level = false, .end_of_word_suffix = "</w>"};
  auto s =
      BpeModel::build({{"a", 0}, {"b</w>", 1}, {"ab</w>", 2}, {"b", 3}}, {{"a", "b</w>"}}, suffix);
  ASSERT_TRUE(s.ok()) << s.error();
  out.clear();
  s->encode_word("ab", out);
  EXPECT_EQ(out, Ids{2});
  out.clear();
  s->encode_word("ba", out);
  EXPECT_EQ(out, (Ids{3}));  // "a" at the end is looked up as "a</w>": absent, dropped
}

// Long words are cut into chunks that no merge crosses (bpe.h): the result must be plain
// BPE's, whether a character without a token becomes inert byte tokens (all 256 present,
// none merged: a hard cut), byte tokens that merge, or a (fused) unk.
void check_chunking(const BpeModel::Options& options, bool all_bytes, bool merge_bytes) {
  std::vector<BpeModel::VocabEntry> vocab = {{"<unk>", 0},
                                             {"\u2581", 1},
                                             {"h", 2},
                                             {"e", 3},
                                             {"l", 4},
                                             {"o", 5},
                                             {"\u2581h", 6},
                                             {"\u2581he", 7},
                                             {"ll", 8},
                                             {"llo", 9},
                                             {"\u2581hello", 10},
                                             {"\u4e2d", 11},
                                             {"\u6587", 12},
                                             {"\u4e2d\u6587", 13},
                                             {"o\u2581", 14},
                                             {"\U0001F600", 15}};
  std::vector<BpeModel::Merge> merges = {{"\u2581", "h"}, {"\u2581h", "e"},    {"l", "l"},
                                         {"ll", "o"},     {"\u2581he", "llo"}, {"\u4e2d", "\u6587"},
                                         {"o", "\u2581"}};
  uint32_t next = 16;
  for (int b = 0; b < 256; ++b) {
    if (!all_bytes && b != 0xC3 && b != 0xA9) continue;
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab.push_back({name, next++});
  }
  if (merge_bytes) {
    vocab.push_back({"<0xC3><0xA9>", next++});
    merges.push_back({"<0xC3>", "<0xA9>"});
  }
  auto m = BpeModel::build(vocab, merges, options);
  ASSERT_TRUE(m.ok()) << m.error();
  EXPECT_EQ(m->fallback_inert(), options.byte_fallback && all_bytes && !merge_bytes);
  // ▁ h e l o, 中 文 (merge), é (bytes), x and € (no token), 😀 (4 bytes, a token).
  static constexpr std::string_view kAlphabet[] = {
      "\u2581", "h", "e", "l", "o", "\u4e2d", "\u6587", "\u00e9", "x", "\u20ac", "\U0001F600"};
  Rng rng(7);
  Ids fast, plain;
  for (int w = 0; w < 5000; ++w) {
    std::string word;
    const size_t len = 1 + rng.below(w % 2 ? 40 : 300);
    for (size_t i = 0; i < len; ++i) word += kAlphabet[rng.below(std::size(kAlphabet))];
    fast.clear();
    plain.clear();
    m->encode_word(word, fast);
    m->encode_word_from_bytes(word, plain);
    ASSERT_EQ(fast, plain) << "word " << w << ": " << word;
  }
}

TEST(SentencePieceBpe, LongWordChunkingEqualsPlainBpe) {
  BpeModel::Options fused{
      .byte_level = false, .unk_token = "<unk>", .fuse_unk = true, .byte_fallback = true};
  BpeModel::Options unfused = fused;
  unfused.fuse_unk = false;
  check_chunking(fused, /*all_bytes=*/true, /*merge_bytes=*/false);  // inert byte tokens
  check_chunking(fused, true, true);    // a merge takes two byte tokens: not inert
  check_chunking(fused, false, false);  // bytes missing: unk, fused
  check_chunking(unfused, false, false);
}

}  // namespace sentencepiece_bpe_test
}  // namespace kvgate::tokenizer
