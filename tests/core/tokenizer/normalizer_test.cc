#include "core/tokenizer/normalizer.h"

#include <gtest/gtest.h>
#include <utf8proc.h>

#include <cstdlib>

#include "core/common/rng.h"
#include "core/common/unicode.h"
#include "core/tokenizer/decoder.h"

namespace kvgate::tokenizer {

using unicode::append_utf8;

namespace {

std::string normalize(const Normalizer& n, std::string_view in) {
  Regex::Scratch scratch;
  std::string out;
  EXPECT_TRUE(n.normalize(in, out, scratch).ok());
  return out;
}

Normalizer one(Normalizer::Step s) {
  Normalizer n;
  n.add(std::move(s));
  return n;
}

TEST(Normalizer, UnicodeForms) {
  const std::string decomposed = "e\xCC\x81";  // e + combining acute
  EXPECT_EQ(normalize(one({.kind = Normalizer::kNfc}), decomposed), "\xC3\xA9");
  EXPECT_EQ(normalize(one({.kind = Normalizer::kNfd}), "\xC3\xA9"), decomposed);
  EXPECT_EQ(normalize(one({.kind = Normalizer::kNfkc}), "\xEF\xAC\x81"), "fi");  // ligature
  EXPECT_EQ(normalize(one({.kind = Normalizer::kNfkd}), "\xE2\x91\xA0"), "1");   // circled 1
}

// normalize_form runs utf8proc only on the non-ASCII runs (with the ASCII character before
// each): the same as utf8proc on the whole text, for texts mixing ASCII with combining
// marks (also after ASCII: e + U+0301, < + U+0338), precomposed letters, Hangul jamo and
// syllables, compatibility characters and singletons (U+2000, U+FB01, U+212B).
TEST(Normalizer, FormsOfNonAsciiRunsEqualFormsOfTheWholeText) {
  static constexpr std::pair<char32_t, char32_t> kRanges[] = {
      {0x20, 0x7E},     {0x300, 0x36F},   {0xC0, 0x17F},    {0x1100, 0x1175},
      {0x11A8, 0x11C2}, {0xAC00, 0xAC40}, {0x2000, 0x2010}, {0xFB00, 0xFB06},
      {0x2126, 0x212B}, {0x338, 0x338},   {0x3099, 0x309A}, {0x304B, 0x3062}};
  const NormalForm forms[] = {NormalForm::kNfc, NormalForm::kNfd, NormalForm::kNfkc,
                              NormalForm::kNfkd};
  const int opts[] = {UTF8PROC_COMPOSE, UTF8PROC_DECOMPOSE, UTF8PROC_COMPOSE | UTF8PROC_COMPAT,
                      UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT};
  Rng rng(5);
  for (int t = 0; t < 4000; ++t) {
    std::string text;
    const size_t len = 1 + rng.below(40);
    for (size_t i = 0; i < len; ++i) {
      const auto& r = kRanges[rng.below(2) ? 0 : rng.below(std::size(kRanges))];
      append_utf8(text, r.first + static_cast<char32_t>(rng.below(r.second - r.first + 1)));
    }
    for (size_t f = 0; f < 4; ++f) {
      utf8proc_uint8_t* mapped = nullptr;
      const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                  static_cast<utf8proc_ssize_t>(text.size()), &mapped,
                                  static_cast<utf8proc_option_t>(UTF8PROC_STABLE | opts[f]));
      ASSERT_GE(n, 0);
      const std::string want(reinterpret_cast<const char*>(mapped), static_cast<size_t>(n));
      std::free(mapped);
      std::string got;
      normalize_form(forms[f], text, got);
      ASSERT_EQ(got, want) << "form " << f << ": " << text;
    }
  }
}

TEST(Normalizer, LowercaseStripReplacePrepend) {
  EXPECT_EQ(normalize(one({.kind = Normalizer::kLowercase}), "\xC4\xB0STANBUL \xCE\xA9"),
            "i\xCC\x87stanbul \xCF\x89");
  EXPECT_EQ(normalize(one({.kind = Normalizer::kStrip, .strip_left = true, .strip_right = true}),
                      "\xE3\x80\x80 a b \n"),
            "a b");
  EXPECT_EQ(normalize(one({.kind = Normalizer::kStrip, .strip_right = true}), "  a  "), "  a");
  EXPECT_EQ(normalize(one({.kind = Normalizer::kReplace,
                           .pattern = Regex::compile(R"(\s+)").value(),
                           .content = " "}),
                      "a \t\n b"),
            "a b");
  const Normalizer prepend = one({.kind = Normalizer::kPrepend, .content = "\xE2\x96\x81"});
  EXPECT_EQ(normalize(prepend, "hi"), "\xE2\x96\x81hi");
  EXPECT_EQ(normalize(prepend, ""), "");  // only a non-empty text
}

TEST(Normalizer, SequenceRunsInOrder) {
  Normalizer n;
  n.add({.kind = Normalizer::kPrepend, .content = "\xE2\x96\x81"});
  n.add({.kind = Normalizer::kReplace, .pattern = Regex::literal(" "), .content = "\xE2\x96\x81"});
  EXPECT_EQ(normalize(n, "a b"),
            "\xE2\x96\x81"
            "a\xE2\x96\x81"
            "b");
}

std::string decode(const Decoder& d, std::vector<std::string> tokens) {
  Regex::Scratch scratch;
  auto r = d.decode(std::move(tokens), scratch);
  EXPECT_TRUE(r.ok());
  return r.ok() ? *r : "";
}

TEST(Decoder, MetaspaceByteLevelBpeSuffixAndNone) {
  Decoder meta;
  meta.set_present(true);
  meta.add({.kind = Decoder::kMetaspace, .text = "\xE2\x96\x81", .drop_first = true});
  EXPECT_EQ(decode(meta, {"\xE2\x96\x81Hey",
                          "\xE2\x96\x81"
                          "friend"}),
            "Hey friend");
  Decoder bl;
  bl.set_present(true);
  bl.add({.kind = Decoder::kByteLevel});
  EXPECT_EQ(decode(bl, {"Hello", "\xC4\xA0world", "<|x|>"}), "Hello world<|x|>");
  Decoder suffix;
  suffix.set_present(true);
  suffix.add({.kind = Decoder::kBpeSuffix, .text = "</w>"});
  EXPECT_EQ(decode(suffix, {"hel", "lo</w>", "you</w>"}), "hello you");
  Decoder none;
  EXPECT_EQ(decode(none, {"a", "b"}), "a b");
}

}  // namespace
}  // namespace kvgate::tokenizer
