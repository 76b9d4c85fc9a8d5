#include "openai/json_scan.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cstdio>
#include <initializer_list>
#include <string>

namespace kvgate::openai {
namespace {

// The scanner's verdict on a whole text holding one value, as skip_value + at_end.
bool valid(std::string_view text) {
  JsonScanner s(text);
  return s.skip_value() && s.at_end();
}

// The decoded string value of `text` (one JSON string), or "<bad>".
std::string decoded(std::string_view text) {
  JsonScanner s(text);
  std::string out;
  if (!s.string_value(&out) || !s.at_end()) return "<bad>";
  return out;
}

TEST(JsonScanner, AcceptsValidJson) {
  for (std::string_view t : {
           R"({})",
           R"([])",
           R"( {"a" : [1, -2.5e3, 0, true, false, null, "x"]} )",
           "\t\r\n{\"a\":{}}\n",
           R"({"":""})",
           R"([[[]],{}])",
           R"("plain")",
           "-0",
           "0.0",
           "1E+5",
           "1e-5",
           "18446744073709551616",
           R"({"a":1,"a":2})",
           "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xef\xbf\xbf\"",  // é € 😀 U+FFFF
           R"("\ud83d\ude00 \u00e9 \/ \b\f\n\r\t \" \\")",
       }) {
    EXPECT_TRUE(valid(t)) << t;
  }
}

TEST(JsonScanner, RefusesInvalidJson) {
  for (std::string_view t : std::initializer_list<std::string_view>{
           "",
           " ",
           "{",
           "}",
           "[1,]",
           R"({"a":1,})",
           R"({"a" 1})",
           R"({a:1})",
           "{'a':1}",
           R"({"a":1}x)",
           "[1 2]",
           "01",
           "1.",
           ".5",
           "-",
           "1e",
           "1e+",
           "+1",
           "tru",
           "nul",
           "True",
           "NaN",
           "Infinity",
           R"("abc)",
           "\"a\x01\"",
           "\"a\nb\"",
           R"("\x")",
           R"("\u00zz")",
           R"("\ud800")",
           R"("\udc00")",
           R"("\ud800\u0041")",
           "\"\xc0\x80\"",
           "\"\xed\xa0\x80\"",
           "\"\xf4\x90\x80\x80\"",
           "\"\x80\"",
           "\"\xe2\x82\"",
           "\xef\xbb\xbf{}",
           "[1]/*c*/",
           std::string_view("\"a\0b\"", 5),
           std::string_view("{\"a\":1}\0", 8),
       }) {
    EXPECT_FALSE(valid(t)) << t;
  }
}

TEST(JsonScanner, RefusesWhatItDoesNotVouchFor) {
  // Valid JSON, but beyond the scanner's promise: the callers fall back to Boost.JSON.
  EXPECT_FALSE(valid("1e99999"));  // Boost.JSON fails on some long exponents (overflow)
  EXPECT_TRUE(valid("1e9999"));
  EXPECT_FALSE(valid(std::string(JsonScanner::kMaxNumberChars + 1, '1')));
  EXPECT_TRUE(valid(std::string(JsonScanner::kMaxNumberChars, '1')));
  const int d = JsonScanner::kMaxDepth;
  EXPECT_TRUE(valid(std::string(d, '[') + std::string(d, ']')));
  EXPECT_FALSE(valid(std::string(d + 1, '[') + std::string(d + 1, ']')));
}

TEST(JsonScanner, DecodesStrings) {
  EXPECT_EQ(decoded(R"("hello")"), "hello");
  EXPECT_EQ(decoded(R"("a\nb\t\"q\" \\ \/")"), "a\nb\t\"q\" \\ /");
  EXPECT_EQ(decoded(R"("\u00e9\u20ac\ud83d\ude00")"), "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  EXPECT_EQ(decoded(R"("\u0000")"), std::string(1, '\0'));
  EXPECT_EQ(decoded("\"caf\xc3\xa9\""), "caf\xc3\xa9");
  // Long enough for the 16-byte steps, with specials at every offset.
  for (size_t at = 0; at < 40; ++at) {
    std::string plain(40, 'x');
    std::string text = plain;
    text.insert(at, "\\n");
    plain.insert(at, "\n");
    EXPECT_EQ(decoded("\"" + text + "\""), plain) << at;
    std::string raw = std::string(40, 'y');
    raw[at] = '\x1f';
    EXPECT_EQ(decoded("\"" + raw + "\""), "<bad>") << at;
  }
}

TEST(JsonScanner, ReadsMembersWithDecodedKeys) {
  JsonScanner s(R"( { "a" : 1 , "k\u0065y" : "v" } )");
  ASSERT_TRUE(s.begin_object());
  std::string_view key;
  ASSERT_EQ(s.next_member(true, key), JsonScanner::Next::kItem);
  EXPECT_EQ(key, "a");
  ASSERT_TRUE(s.skip_value());
  ASSERT_EQ(s.next_member(false, key), JsonScanner::Next::kItem);
  EXPECT_EQ(key, "key");
  std::string v;
  ASSERT_TRUE(s.string_value(&v));
  EXPECT_EQ(v, "v");
  EXPECT_EQ(s.next_member(false, key), JsonScanner::Next::kEnd);
  EXPECT_TRUE(s.at_end());
}

TEST(JsonScanner, TypesNumbersAsBoostJsonDoes) {
  auto num = [](std::string_view t) {
    JsonScanner s(t);
    JsonScanner::Number n;
    EXPECT_TRUE(s.number(n) && s.at_end()) << t;
    return n;
  };
  EXPECT_TRUE(num("42").is_integer());
  EXPECT_EQ(num("42").magnitude, 42u);
  EXPECT_TRUE(num("18446744073709551615").is_integer());  // uint64
  EXPECT_EQ(num("18446744073709551615").magnitude, UINT64_MAX);
  EXPECT_FALSE(num("18446744073709551616").is_integer());  // double
  EXPECT_TRUE(num("-9223372036854775808").is_integer());   // int64
  EXPECT_FALSE(num("-9223372036854775809").is_integer());  // double
  EXPECT_FALSE(num("1.0").is_integer());
  EXPECT_FALSE(num("1e2").is_integer());
  EXPECT_TRUE(num("-0").is_integer());
  EXPECT_TRUE(num("-0").negative);
}

// Strings of every short byte sequence and every escape: the scanner accepts exactly what
// Boost.JSON accepts, and decodes it to the same text. (Run once with every 3-byte
// sequence too, 17.5 million strings: no difference; here a sample of the longer ones.)
void expect_boost_agrees(const std::string& text) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(text, ec);
  JsonScanner s(text);
  std::string out;
  const bool ok = s.string_value(&out) && s.at_end();
  ASSERT_EQ(ok, !ec) << text;
  if (ok) {
    ASSERT_EQ(out, std::string(v.as_string())) << text;
  }
}

TEST(JsonScanner, AgreesWithBoostJsonOnEveryShortByteSequence) {
  const int sample[] = {0x00, 0x1f, 0x20, 0x22, 0x5c, 0x7f, 0x80, 0x8f,
                        0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xf4, 0xff};
  auto str = [](std::initializer_list<int> bytes) {
    std::string t = "\"";
    for (int b : bytes) t += static_cast<char>(b);
    return t + "\"";
  };
  for (int a = 0; a < 256; ++a) {
    for (int b = 0; b < 256; ++b) expect_boost_agrees(str({'x', a, b, 'y'}));
    for (int b : sample) {
      for (int c : sample) {
        expect_boost_agrees(str({a, b, c}));
        if (a >= 0xf0) {
          for (int d : sample) expect_boost_agrees(str({a, b, c, d}));
        }
      }
    }
  }
}

TEST(JsonScanner, AgreesWithBoostJsonOnEveryEscape) {
  char buf[32];
  for (int b = 0; b < 256; ++b) {
    expect_boost_agrees("\"\\" + std::string(1, static_cast<char>(b)) + "\"");
  }
  for (int u = 0; u < 0x10000; ++u) {
    std::snprintf(buf, sizeof buf, "\"a\\u%04Xb\"", u);
    expect_boost_agrees(buf);
  }
  for (int high : {0xd800, 0xd83d, 0xdbff, 0xdc00, 0xdfff}) {
    for (int low = 0; low < 0x10000; low += 7) {
      std::snprintf(buf, sizeof buf, "\"\\u%04x\\u%04x\"", high, low);
      expect_boost_agrees(buf);
    }
    for (const char* after : {"", "x", "\\n", "\\u", "\\u12", "\\udc0"}) {
      std::snprintf(buf, sizeof buf, "\"\\u%04x%s\"", high, after);
      expect_boost_agrees(buf);
    }
  }
  for (const char* t : {"\"\\u12\"", "\"\\u\"", "\"\\u12g4\"", "\"\\\"", "\"\\"}) {
    expect_boost_agrees(t);
  }
}

}  // namespace
}  // namespace kvgate::openai
