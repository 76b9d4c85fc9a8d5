#include "core/tokenizer/byte_level.h"

#include <array>

#include "core/common/unicode.h"

namespace kvgate::tokenizer {

using unicode::append_utf8;
using unicode::CodePoint;
using unicode::decode_utf8;

namespace {

constexpr bool shown_as_itself(unsigned b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

constexpr std::array<char32_t, 256> make_byte_to_char() {
  std::array<char32_t, 256> t{};
  char32_t next = 256;
  for (unsigned b = 0; b < 256; ++b) t[b] = shown_as_itself(b) ? b : next++;
  return t;
}
constexpr std::array<char32_t, 256> kByteToChar = make_byte_to_char();

}  // namespace

char32_t byte_to_char(uint8_t b) { return kByteToChar[b]; }

std::optional<uint8_t> char_to_byte(char32_t c) {
  if (c < 256) {
    if (shown_as_itself(c)) return static_cast<uint8_t>(c);
    return std::nullopt;
  }
  if (c >= 256 + 68) return std::nullopt;  // 68 bytes are remapped to U+0100..U+0143
  for (unsigned b = 0; b < 256; ++b)
    if (kByteToChar[b] == c) return static_cast<uint8_t>(b);
  return std::nullopt;
}

std::optional<std::string> byte_level_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const CodePoint c = decode_utf8(s, i);
    auto b = char_to_byte(c.cp);
    if (!b) return std::nullopt;
    out.push_back(static_cast<char>(*b));
    i += c.len;
  }
  return out;
}

std::string byte_level_encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char b : bytes) append_utf8(out, kByteToChar[static_cast<uint8_t>(b)]);
  return out;
}

}  // namespace kvgate::tokenizer
