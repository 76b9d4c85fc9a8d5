// GPT-2's byte-level alphabet: every byte 0..255 is shown as one printable code point, so
// that a vocabulary of byte strings can be written as JSON text. tokenizer.json stores its
// vocabulary and merges in this alphabet; kvgate converts them back to raw bytes at load
// and tokenizes raw bytes directly.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvgate::tokenizer {

// The code point byte `b` is shown as.
char32_t byte_to_char(uint8_t b);

// The byte code point `c` stands for, or nullopt when `c` is not in the alphabet.
std::optional<uint8_t> char_to_byte(char32_t c);

// Decodes a byte-level string (valid UTF-8) into raw bytes; nullopt when a code point
// is outside the alphabet.
std::optional<std::string> byte_level_decode(std::string_view s);

// Encodes raw bytes in the byte-level alphabet (the vocabulary's spelling of them).
std::string byte_level_encode(std::string_view bytes);

}  // namespace kvgate::tokenizer
