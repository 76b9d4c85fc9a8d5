// UTF-8 and the Unicode character classes the tokenizer's pre-tokenizer needs, and the
// UTF-8 steps of the chat templates' Jinja engine (core/template): here in common, below
// both, so that the tokenizer may use the template engine and not the other way round.
//
// Text reaching the tokenizer is validated once (validate_utf8); after that the scanners
// decode code points with decode_utf8 without re-checking. Classes follow Oniguruma's
// Unicode definitions, which is what the Hugging Face tokenizers library matches with:
// \p{L} = Lu Ll Lt Lm Lo, \p{N} = Nd Nl No, \s = \t..\r, U+0085, Zs, Zl, Zp.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvgate::unicode {

// Offset of the first byte that is not part of well-formed UTF-8 (overlongs, surrogates
// and code points above U+10FFFF are ill-formed), or npos when `s` is valid.
size_t find_invalid_utf8(std::string_view s);

// One code point and its encoded length.
struct CodePoint {
  char32_t cp;
  uint32_t len;
};

// REQUIRES: s is valid UTF-8 and i < s.size() is at a code point boundary.
inline CodePoint decode_utf8(std::string_view s, size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return {b0, 1};
  auto cont = [&](size_t k) {
    return static_cast<char32_t>(static_cast<unsigned char>(s[i + k]) & 0x3F);
  };
  if (b0 < 0xE0) return {(static_cast<char32_t>(b0 & 0x1F) << 6) | cont(1), 2};
  if (b0 < 0xF0) return {(static_cast<char32_t>(b0 & 0x0F) << 12) | (cont(1) << 6) | cont(2), 3};
  return {(static_cast<char32_t>(b0 & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3), 4};
}

void append_utf8(std::string& out, char32_t cp);

// Class bits of one code point.
enum CharClass : uint8_t {
  kLetter = 1,        // \p{L}
  kNumber = 2,        // \p{N}
  kSpace = 4,         // \s
  kNewline = 8,       // \r or \n
  kMark = 16,         // \p{M}
  kPunctuation = 32,  // \p{P}
  kSymbol = 64,       // \p{S}
};

uint8_t char_class_slow(char32_t cp);

namespace internal {
constexpr uint8_t ascii_class(unsigned c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return kLetter;
  if (c >= '0' && c <= '9') return kNumber;
  if (c == '\n' || c == '\r') return kSpace | kNewline;
  if (c == ' ' || (c >= 9 && c <= 13)) return kSpace;
  if (c < 32 || c == 127) return 0;  // Cc
  // ASCII symbols (Sm, Sc, Sk); every other printable non-alphanumeric is punctuation.
  if (c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' || c == '`' ||
      c == '|' || c == '~')
    return kSymbol;
  return kPunctuation;
}
constexpr std::array<uint8_t, 128> make_ascii_table() {
  std::array<uint8_t, 128> t{};
  for (unsigned c = 0; c < 128; ++c) t[c] = ascii_class(c);
  return t;
}
inline constexpr std::array<uint8_t, 128> kAsciiClass = make_ascii_table();
}  // namespace internal

inline uint8_t char_class(char32_t cp) {
  return cp < 128 ? internal::kAsciiClass[cp] : char_class_slow(cp);
}

// True for Unicode White_Space (Rust's char::is_whitespace; used by lstrip/rstrip).
bool is_white_space(char32_t cp);

// True for a Unicode word character (\w of Rust's regex crate and of Oniguruma): letters,
// marks, Nd, Nl, Pc, ZWNJ/ZWJ and the Other_Alphabetic symbols (circled/squared letters).
bool is_word_char(char32_t cp);

// Unicode NFC of valid UTF-8 `s` appended to `out`. ASCII-only input is copied as is.
void nfc(std::string_view s, std::string& out);

// Replaces ill-formed sequences of `bytes` with U+FFFD the way Rust's
// String::from_utf8_lossy does (one U+FFFD per maximal ill-formed subpart).
std::string utf8_lossy(std::string_view bytes);

}  // namespace kvgate::unicode
