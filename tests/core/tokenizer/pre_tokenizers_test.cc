#include "core/tokenizer/pre_tokenizers.h"

#include <gtest/gtest.h>

namespace kvgate::tokenizer {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace pre_tokenizers_test {

using Strings = std::vector<std::string>;

Strings run(const PreTokenizer& pre, std::string_view text, bool at_start = true) {
  PreTokenizer::Scratch s;
  std::vector<Piece> pieces;
  EXPECT_TRUE(pre.run(text, at_start, s, pieces).ok());
  Strings out;
  for (const Piece& p : pieces) out.emplace_back(p.text);
  return out;
}

PreTokenizer split(SplitBehavior b, bool invert = false) {
  PreTokenizer pre;
  pre.add({.kind = PreTokenizer::kSplit,
           .regex = Regex::literal("-"),
           .behavior = b,
           .invert = invert});
  return pre;
}

// The library's documented example: "the-final--countdown" split on "-".
TEST(PreTokenizers, SplitBehaviors) {
  const std::string t = "the-final--countdown";
  EXPECT_EQ(run(split(SplitBehavior::kRemoved), t), (Strings{"the", "final", "countdown"}));
  EXPECT_EQ(run(split(SplitBehavior::kIsolated), t),
            (Strings{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(run(split(SplitBehavior::kMergedWithPrevious), t),
            (Strings{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(run(split(SplitBehavior::kMergedWithNext), t),
            (Strings{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(run(split(SplitBehavior::kContiguous), t),
            (Strings{"the", "-", "final", "--", "countdown"}));
  EXPECT_EQ(run(split(SplitBehavior::kRemoved, /*invert=*/true), t), (Strings{"-", "-", "-"}));
}

TEST(PreTokenizers, ByteLevelPrefixSpaceAndGpt2Regex) {
  PreTokenizer pre;
  pre.add({.kind = PreTokenizer::kByteLevel,
           .regex = Regex::compile(kGpt2Regex).value(),
           .add_prefix_space = true});
  EXPECT_EQ(run(pre, "Hello it's  42!"), (Strings{" Hello", " it", "'s", " ", " 42", "!"}));
  EXPECT_TRUE(pre.byte_level());
}

TEST(PreTokenizers, MetaspacePrependSchemes) {
  auto meta = [](PreTokenizer::Prepend p, bool split) {
    PreTokenizer pre;
    pre.add(
        {.kind = PreTokenizer::kMetaspace, .replacement = "\u2581", .prepend = p, .split = split});
    return pre;
  };
  EXPECT_EQ(run(meta(PreTokenizer::Prepend::kAlways, true), "Hey friend"),
            (Strings{"\u2581Hey", "\u2581friend"}));
  EXPECT_EQ(run(meta(PreTokenizer::Prepend::kFirst, true), "Hey friend", /*at_start=*/false),
            (Strings{"Hey", "\u2581friend"}));
  EXPECT_EQ(run(meta(PreTokenizer::Prepend::kNever, false), "Hey friend"),
            (Strings{"Hey\u2581friend"}));
}

TEST(PreTokenizers, DigitsPunctuationWhitespace) {
  PreTokenizer digits;
  digits.add({.kind = PreTokenizer::kDigits, .individual_digits = true});
  EXPECT_EQ(run(digits, "a123b"), (Strings{"a", "1", "2", "3", "b"}));
  PreTokenizer runs;
  runs.add({.kind = PreTokenizer::kDigits});
  EXPECT_EQ(run(runs, "a123b"), (Strings{"a", "123", "b"}));
  PreTokenizer punct;
  punct.add({.kind = PreTokenizer::kPunctuation});
  EXPECT_EQ(run(punct, "Hey, you!?"), (Strings{"Hey", ",", " you", "!", "?"}));
  PreTokenizer ws;
  ws.add({.kind = PreTokenizer::kWhitespace});
  EXPECT_EQ(run(ws, "Hey man!  How's it?"),
            (Strings{"Hey", "man", "!", "How", "'", "s", "it", "?"}));
  PreTokenizer wss;
  wss.add({.kind = PreTokenizer::kWhitespaceSplit});
  EXPECT_EQ(run(wss, "Hey man!\u3000x"), (Strings{"Hey", "man!", "x"}));
}

TEST(PreTokenizers, SequenceAppliesEachStepToEveryPiece) {
  PreTokenizer pre;
  pre.add({.kind = PreTokenizer::kSplit, .regex = Regex::compile(R"(\p{N}{1,3})").value()});
  pre.add({.kind = PreTokenizer::kSplit,
           .regex = Regex::compile(R"(\s+)").value(),
           .behavior = SplitBehavior::kMergedWithPrevious});
  EXPECT_EQ(run(pre, "ab 12345 cd"), (Strings{"ab ", "123", "45", " ", "cd"}));
}

}  // namespace pre_tokenizers_test
}  // namespace kvgate::tokenizer
