#include "core/tokenizer/normalizer.h"

#include <gtest/gtest.h>

#include "core/tokenizer/decoder.h"

namespace kvgate::tokenizer {
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
