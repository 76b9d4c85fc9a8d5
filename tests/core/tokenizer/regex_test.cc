#include "core/tokenizer/regex.h"

#include <gtest/gtest.h>

#include <random>

#include "core/tokenizer/pre_tokenizers.h"

namespace kvgate::tokenizer {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace regex_test {

std::vector<std::string> matches(const std::string& pattern, std::string_view text) {
  auto re = Regex::compile(pattern);
  EXPECT_TRUE(re.ok()) << re.error();
  if (!re) return {};
  Regex::Scratch scratch;
  std::vector<Regex::Span> spans;
  EXPECT_TRUE(re->find_all(text, scratch, spans).ok());
  std::vector<std::string> out;
  for (auto s : spans) out.emplace_back(text.substr(s.start, s.end - s.start));
  return out;
}

using Strings = std::vector<std::string>;

TEST(Regex, UnicodePropertiesAndLookaheads) {
  EXPECT_EQ(matches(R"(\p{N}{1,3})", "ab 12345 ٣٤"), (Strings{"123", "45", "٣٤"}));
  EXPECT_EQ(matches(R"(\s+(?!\S)|\s+)", "a   b  "), (Strings{"  ", " ", "  "}));
  EXPECT_EQ(matches(R"((?i:'s|'ll))", "IT'S we'LL"), (Strings{"'S", "'LL"}));
  EXPECT_EQ(matches("[\u4e00-\u9fa5]+", "ab中文cd字"), (Strings{"中文", "字"}));
}

TEST(Regex, OnigurumaWhitespaceIncludesNextLine) {
  // Oniguruma's \s is Unicode White_Space, which has U+0085; PCRE2's lacks it.
  EXPECT_EQ(matches(R"(\s+)", "a\xC2\x85 b"), (Strings{"\xC2\x85 "}));
  EXPECT_EQ(matches(R"([^\s]+)",
                    "a\xC2\x85"
                    "b"),
            (Strings{"a", "b"}));
  EXPECT_EQ(matches(R"(\S+)",
                    "a\xC2\x85"
                    "b"),
            (Strings{"a", "b"}));
}

TEST(Regex, OnigurumaEscapesTranslated) {
  EXPECT_EQ(matches(R"(\h+)", "xx 0fA9 zz"), (Strings{"0fA9"}));  // hex digit, not space
  EXPECT_EQ(matches(R"(\u00e9)", "caf\xC3\xA9"), (Strings{"\xC3\xA9"}));
  EXPECT_EQ(matches(R"(\w+)", "h\xC3\xA9llo_1 \xE2\x85\xA0"),
            (Strings{"h\xC3\xA9llo_1", "\xE2\x85\xA0"}));
  EXPECT_EQ(matches("(?m:a.b)", "a\nb"), (Strings{"a\nb"}));  // Ruby's m is dot-all
}

TEST(Regex, EmptyMatchesAdvanceLikeOnigFindIter) {
  // An empty match right after the previous match is skipped by one character.
  EXPECT_EQ(matches("a*", "baab"), (Strings{"", "aa", ""}));
  EXPECT_EQ(matches("x*", ""), (Strings{""}));
}

TEST(Regex, RefusesWhatPcre2CannotMeanTheSame) {
  for (const char* p : {"[a[b]]", "[a-z&&[^q]]", R"([\S])", R"([\W])", "(abc", R"(\u12)"}) {
    auto re = Regex::compile(p);
    EXPECT_FALSE(re.ok()) << p;
  }
}

TEST(Regex, LiteralMatchesNonOverlapping) {
  Regex lit = Regex::literal("aa");
  Regex::Scratch scratch;
  std::vector<Regex::Span> spans;
  ASSERT_TRUE(lit.find_all("aaaaa", scratch, spans).ok());
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[1].start, 2u);
  spans.clear();
  ASSERT_TRUE(Regex::literal("").find_all("abc", scratch, spans).ok());
  EXPECT_TRUE(spans.empty());
}

TEST(Regex, AsciiVariantListsEachClassesAsciiMembers) {
  EXPECT_EQ(ascii_variant(R"(\p{N}{1,3})"), R"([\x30-\x39]{1,3})");
  EXPECT_EQ(ascii_variant(R"([^\r\n\p{L}]?x)"),
            R"([\x00-\x09\x0B-\x0C\x0E-\x40\x5B-\x60\x7B-\x7F]?x)");
  // Non-ASCII literals and classes without ASCII members match nothing on ASCII text, and
  // keep quantifiers meaningful.
  EXPECT_EQ(ascii_variant("\u00e9*|[\u4e00-\u9fa5]+"), R"([^\x00-\x7F]*|[^\x00-\x7F]+)");
  EXPECT_EQ(ascii_variant(R"((?<=a)\x{41}\x{4E00}\.)"), R"((?<=a)\x41[^\x00-\x7F]\.)");
  // Outside the subset where the variant is exact: no variant.
  for (const char* p :
       {"(?i)[a-z]", R"(\bx)", R"((a)\1)", "(*UCP)a", R"(\Qa\E)", "(?x)a b", "(?#c)a"})
    EXPECT_EQ(ascii_variant(p), std::nullopt) << p;
}

// Split patterns of real tokenizers (DeepSeek V3's three, written as tokenizer.json holds
// them: with raw CR and LF characters; GPT-2's; Qwen2's and Llama 3's) and constructs the
// variants must keep: lookarounds, anchors, dot-all, empty matches, non-ASCII literals.
const std::vector<std::string>& variant_patterns() {
  static const std::vector<std::string> p = {
      R"(\p{N}{1,3})",
      "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}"
      "\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
      std::string(kGpt2Regex),
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
      R"((?<=a)b+|(?<!\d)\d|x(?=y))",
      R"((?<=[aeiou])(?=[^aeiou\s]))",  // only empty matches, though PCRE2's minimum is 1
      R"((?m:a.c)|^\s*$|\d+|\w+|\W)",
      "\u00e9+|z|[\u00e0-\u00ff]",
      "a*|b",
      R"(\s+)",
      R"([^\s]+)",
  };
  return p;
}

std::string random_text(std::mt19937& rng, size_t max_len, bool ascii_only) {
  static const std::vector<std::string> ascii = {
      "a",    "Z",  "q",    "'s",   "'LL",  "0",    "7",    " ",  " ",  "  ",   "\t",     "\n",
      "\r\n", "\r", "!",    ".",    ",",    "\"",   "#",    "_",  "-",  "(",    "]",      "\\",
      "`",    "~",  "\x01", "\x0b", "\x0c", "\x1f", "\x7f", "ab", "xy", "word", " Hello", "42"};
  static const std::vector<std::string> wide = {"\u00e9", "\u4e2d\u6587", "\u3042", "\u0663",
                                                "\u00a0", "\u0085",       "\u2028", "\U0001F600",
                                                "\u0301", "\u00b2",       "\u2160"};
  std::string s;
  const size_t n = rng() % max_len;
  for (size_t i = 0; i < n; ++i) {
    if (!ascii_only && rng() % 8 == 0) {
      s += wide[rng() % wide.size()];
    } else {
      s += ascii[rng() % ascii.size()];
    }
  }
  return s;
}

std::vector<Regex::Span> spans_of(const Regex& re, std::string_view text, Regex::Variants v) {
  Regex::Scratch scratch;
  std::vector<Regex::Span> spans;
  EXPECT_TRUE(re.find_all(text, scratch, spans, v).ok());
  return spans;
}

bool same_spans(const std::vector<Regex::Span>& a, const std::vector<Regex::Span>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].start != b[i].start || a[i].end != b[i].end) return false;
  return true;
}

// The ASCII variant and the batched calls find exactly the matches of the plain search
// (the Unicode pattern, one PCRE2 call per match), on ASCII and mixed text.
TEST(Regex, AsciiAndBatchedVariantsEqualThePlainSearch) {
  std::mt19937 rng(20);
  for (const std::string& p : variant_patterns()) {
    auto re = Regex::compile(p);
    ASSERT_TRUE(re.ok()) << re.error();
    int checked = 0;
    for (int k = 0; k < 6000; ++k) {
      const std::string text = random_text(rng, k % 100 == 0 ? 3000 : 40, k % 3 != 0);
      const auto plain = spans_of(*re, text, {.ascii = false, .batched = false});
      for (Regex::Variants v : {Regex::Variants{true, false}, Regex::Variants{false, true},
                                Regex::Variants{true, true}}) {
        const auto got = spans_of(*re, text, v);
        ASSERT_TRUE(same_spans(plain, got)) << "pattern " << p << " ascii=" << v.ascii
                                            << " batched=" << v.batched << " text: " << text;
        ++checked;
      }
    }
    EXPECT_EQ(checked, 18000);
  }
}

// The tokenizers' split patterns do get both speed-ups.
TEST(Regex, TokenizerSplitPatternsHaveTheFastVariants) {
  const auto& p = variant_patterns();
  for (size_t i : {0u, 1u, 2u, 3u}) {
    auto re = Regex::compile(p[i]);
    ASSERT_TRUE(re.ok());
    EXPECT_TRUE(re->has_ascii_variant()) << p[i];
    EXPECT_TRUE(re->has_batched_variant()) << p[i];
  }
}

}  // namespace regex_test
}  // namespace kvgate::tokenizer
