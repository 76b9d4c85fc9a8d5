// The Precompiled normalizer of tokenizer.json: SentencePiece's compiled normalization
// rules (`precompiled_charsmap`, e.g. "nmt_nfkc" as T5, ALBERT, XLM-R and mBART ship it),
// run with the Hugging Face library's semantics (its spm_precompiled crate).
//
// The charsmap (base64 in tokenizer.json) is a little-endian u32 byte size S, then S/4
// little-endian u32 units of a darts-clone double-array trie over UTF-8 byte strings,
// then the replacement texts: NUL-terminated UTF-8, each trie value an offset into them.
//
// Normalization walks the text one extended grapheme cluster G at a time (utf8proc):
//   - G of fewer than 6 bytes with a key that is a prefix of G: the replacement of the
//     SHORTEST such key, and nothing else of G (not the longest match SentencePiece
//     itself takes: the library takes the first of its common-prefix results, and drops
//     what follows the key; "\r\n" under a map with "\r" keeps only \r's replacement);
//   - otherwise each character of G on its own: the replacement of its shortest key
//     prefix, or the character itself.
// Key lookups stop at a NUL byte (none matches across or at it).
//
// Where the library would panic on a malformed map (an index outside the trie or the
// texts, a value not at a character boundary) kvgate finds no key instead; maps the
// library cannot load (bad base64, texts not UTF-8) and an empty trie are load errors.
// Immutable after parse(); normalize() and lookup() are thread-safe and allocate nothing
// but `out`'s growth.
//
//   Result<PrecompiledCharsMap> m = PrecompiledCharsMap::parse(base64_text);
//   std::string out;
//   m->normalize("\uFB01ne", out);  // nmt_nfkc: "fine"
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.h"

namespace kvgate::tokenizer {

class PrecompiledCharsMap {
 public:
  // From the base64 text of `precompiled_charsmap` (standard alphabet, padding optional).
  static Result<PrecompiledCharsMap> parse(std::string_view base64);
  // From the decoded bytes (what parse() decodes to).
  static Result<PrecompiledCharsMap> from_bytes(std::string_view bytes);

  // The replacement of the shortest key that is a prefix of `key` (bytes up to the first
  // NUL), or nullopt when no key is. The view points into this map.
  std::optional<std::string_view> lookup(std::string_view key) const;

  // Appends the normalized form of valid UTF-8 `in` to `out`.
  void normalize(std::string_view in, std::string& out) const;

  size_t trie_units() const { return units_.size(); }
  size_t memory_bytes() const { return units_.capacity() * sizeof(uint32_t) + texts_.capacity(); }

 private:
  // Offset into texts_ of the shortest key prefix's replacement, or kNone.
  static constexpr uint32_t kNone = 0xFFFFFFFF;
  uint32_t find(const unsigned char* key, size_t len) const;
  std::string_view text_at(uint32_t offset) const;
  void append_grapheme(std::string_view g, std::string& out) const;

  std::vector<uint32_t> units_;  // the double array
  std::string texts_;            // NUL-terminated replacements
  // Per ASCII byte b (1..127): the offset of the replacement of key "b", or kNone; most
  // text is ASCII and one table read replaces the trie walk.
  std::array<uint32_t, 128> ascii_{};
};

}  // namespace kvgate::tokenizer
