#include "core/tokenizer/pre_tokenizer.h"

#include "core/common/unicode.h"

namespace kvgate::tokenizer {

using unicode::char_class_slow;
using unicode::CodePoint;
using unicode::decode_utf8;
using unicode::kLetter;
using unicode::kNewline;
using unicode::kNumber;
using unicode::kSpace;

namespace {

constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct Cursor {
  std::string_view s;
  // Class and length of the code point at i (i < s.size()).
  uint8_t cls(size_t i, uint32_t& len) const {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      len = 1;
      return unicode::internal::kAsciiClass[b];
    }
    const CodePoint c = decode_utf8(s, i);
    len = c.len;
    return char_class_slow(c.cp);
  }
  // End of the run of code points starting at i whose class satisfies pred.
  template <typename Pred>
  size_t run(size_t i, Pred pred) const {
    while (i < s.size()) {
      uint32_t len;
      if (!pred(cls(i, len))) break;
      i += len;
    }
    return i;
  }
};

// Lower-cases ASCII; maps U+017F (long s, case-folds to 's') to 's'.
char32_t fold(std::string_view s, size_t i, uint32_t& len) {
  const CodePoint c = decode_utf8(s, i);
  len = c.len;
  if (c.cp >= 'A' && c.cp <= 'Z') return c.cp + 32;
  if (c.cp == 0x17F) return 's';
  return c.cp;
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d) at pos (s[pos] == '\''); returns the end or 0.
size_t contraction(std::string_view s, size_t pos) {
  size_t i = pos + 1;
  if (i >= s.size()) return 0;
  uint32_t l1;
  const char32_t c1 = fold(s, i, l1);
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return i + l1;
  if (c1 == 'r' || c1 == 'v' || c1 == 'l') {
    const size_t j = i + l1;
    if (j >= s.size()) return 0;
    uint32_t l2;
    const char32_t c2 = fold(s, j, l2);
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l'))
      return j + l2;
  }
  return 0;
}

}  // namespace

std::optional<SplitPattern> recognize_split_regex(std::string_view regex) {
  if (regex == kQwen2Regex) return SplitPattern::kQwen2;
  if (regex == kLlama3Regex) return SplitPattern::kLlama3;
  return std::nullopt;
}

size_t next_piece(SplitPattern pattern, std::string_view s, size_t pos) {
  const Cursor cur{s};
  uint32_t len0;
  const uint8_t c0 = cur.cls(pos, len0);
  const size_t p1 = pos + len0;
  auto is_letter = [](uint8_t c) { return (c & kLetter) != 0; };

  // 1. Contractions.
  if (s[pos] == '\'') {
    if (size_t e = contraction(s, pos)) return e;
  }
  // 2. [^\r\n\p{L}\p{N}]?\p{L}+
  if (c0 & kLetter) return cur.run(p1, is_letter);
  if (!(c0 & (kNewline | kNumber)) && p1 < s.size()) {
    uint32_t len1;
    if (cur.cls(p1, len1) & kLetter) return cur.run(p1 + len1, is_letter);
  }
  // 3. \p{N} or \p{N}{1,3}
  if (c0 & kNumber) {
    if (pattern == SplitPattern::kQwen2) return p1;
    size_t e = p1;
    for (int k = 1; k < 3 && e < s.size(); ++k) {
      uint32_t len;
      if (!(cur.cls(e, len) & kNumber)) break;
      e += len;
    }
    return e;
  }
  // 4.  ?[^\s\p{L}\p{N}]+[\r\n]*
  auto is_other = [](uint8_t c) { return (c & (kSpace | kLetter | kNumber)) == 0; };
  auto is_newline = [](uint8_t c) { return (c & kNewline) != 0; };
  {
    const size_t start = s[pos] == ' ' ? p1 : pos;
    const size_t e = cur.run(start, is_other);
    if (e > start) return cur.run(e, is_newline);
  }
  // Here c0 is whitespace: everything else was taken above.
  // 5. \s*[\r\n]+ : up to and including the last \r or \n of the whitespace run.
  size_t last_newline_end = 0;
  size_t last_start = pos;
  size_t e = pos;
  while (e < s.size()) {
    uint32_t len;
    const uint8_t c = cur.cls(e, len);
    if (!(c & kSpace)) break;
    last_start = e;
    e += len;
    if (c & kNewline) last_newline_end = e;
  }
  if (last_newline_end) return last_newline_end;
  // 6. \s+(?!\S) : the whole run at the end of the text, else all but its last char.
  if (e == s.size()) return e;
  if (last_start > pos) return last_start;
  // 7. \s+
  return e;
}

}  // namespace kvgate::tokenizer
