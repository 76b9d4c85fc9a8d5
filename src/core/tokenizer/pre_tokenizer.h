// The `Split` regex pre-tokenizers of byte-level BPE tokenizers, as hand-written scanners.
//
// tokenizer.json carries the pre-tokenizer as a regular expression; the Hugging Face
// library runs it with Oniguruma. kvgate recognizes the known expressions by their exact
// text and runs an equivalent scanner (no regex engine, one pass, no allocation):
//
//   kQwen2: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|
//           ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+        (Qwen2, 2.5, 3)
//   kLlama3: the same with \p{N}{1,3}                                  (Llama 3, 3.1, 3.2)
//
// Pieces are consecutive and cover the whole input (the behaviour "Isolated").
//
//   auto kind = recognize_split_regex(pattern);          // nullopt: unsupported
//   for (size_t i = 0; i < s.size();) { size_t e = next_piece(*kind, s, i); ...; i = e; }
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace kvgate::tokenizer {

enum class SplitPattern { kQwen2, kLlama3 };

std::optional<SplitPattern> recognize_split_regex(std::string_view regex);

// End of the piece that starts at byte `pos`.
// REQUIRES: s is valid UTF-8, pos < s.size() at a code point boundary.
size_t next_piece(SplitPattern pattern, std::string_view s, size_t pos);

}  // namespace kvgate::tokenizer
