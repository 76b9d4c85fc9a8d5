#include "core/tokenizer/regex.h"

#include <gtest/gtest.h>

namespace kvgate::tokenizer {
namespace {

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

}  // namespace
}  // namespace kvgate::tokenizer
