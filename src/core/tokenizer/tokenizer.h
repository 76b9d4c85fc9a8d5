// A byte-level BPE tokenizer loaded from a Hugging Face tokenizer.json (Qwen2/2.5/3,
// Llama 3.x): text -> token ids identical to the Hugging Face tokenizers library, and
// ids -> text. The file's contents are given as a string; the core does no file I/O.
//
// Pipeline of encode(): validate UTF-8 -> split out added tokens (leftmost-longest,
// lstrip/rstrip) -> normalize the rest (NFC or none) -> added tokens marked `normalized`
// -> Split pre-tokenizer (pre_tokenizer.h) -> BPE on raw bytes (bpe.h).
//
// Immutable after load(); every method is const and thread-safe.
//
//   Result<Tokenizer> tok = Tokenizer::load(json_text);
//   if (!tok) return Error(tok.error());       // names the unsupported field
//   Result<std::vector<uint32_t>> ids = tok->encode("Hello world");
//   std::string text = tok->decode(*ids, /*skip_special=*/false).value();
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.h"
#include "core/tokenizer/added_tokens.h"
#include "core/tokenizer/bpe.h"
#include "core/tokenizer/pre_tokenizer.h"

namespace kvgate::tokenizer {

// A point in the text where the encoding provably splits: right after an added token.
// Encoding text[0, text_end) gives exactly the first `ids` ids of the whole encoding.
struct Boundary {
  size_t text_end;
  size_t ids;
};

class Tokenizer {
 public:
  // Parses tokenizer.json. Errors name the field that is missing or unsupported, e.g.
  // "pre_tokenizer.pretokenizers[0].pattern.Regex: unsupported regex ...".
  static Result<Tokenizer> load(std::string_view tokenizer_json);

  // Token ids of `text`, without any post-processor tokens (what vLLM does for chat
  // prompts, whose template already holds the BOS text). Invalid UTF-8 is an error
  // naming the byte offset.
  Result<std::vector<uint32_t>> encode(std::string_view text) const;
  // As encode(), appending to `out`. If `boundaries` is given, appends one Boundary per
  // added token (ids counted from the start of `out` as it was on entry).
  Status encode_into(std::string_view text, std::vector<uint32_t>& out,
                     std::vector<Boundary>* boundaries = nullptr) const;

  // The Boundary of every added token in `text` (ids left 0): where an encoding may be cut.
  // Errors on invalid UTF-8 like encode().
  Status find_boundaries(std::string_view text, std::vector<Boundary>& out) const;

  // Text of `ids` (byte-level decoding, ill-formed UTF-8 replaced by U+FFFD); an unknown
  // id is an error. skip_special drops added tokens marked special.
  Result<std::string> decode(std::span<const uint32_t> ids, bool skip_special) const;

  // Id of an added token or vocabulary entry with exactly this text.
  std::optional<uint32_t> token_to_id(std::string_view text) const;
  // Number of distinct ids (vocabulary plus added tokens).
  size_t vocab_size() const;
  // Heap bytes held by the loaded tokenizer (approximate; for the memory benchmark).
  size_t memory_bytes() const;

 private:
  void encode_normalized(std::string_view text, std::vector<uint32_t>& out) const;
  void encode_pieces(std::string_view text, std::vector<uint32_t>& out) const;

  struct Loaded;  // parser state, in tokenizer_json.cc
  friend struct Loaded;

  BpeModel bpe_;
  std::vector<AddedToken> added_;
  AddedTokenMatcher raw_matcher_;         // added tokens with normalized == false
  AddedTokenMatcher normalized_matcher_;  // added tokens with normalized == true
  std::vector<int32_t> added_by_id_;      // id -> index in added_, or -1
  SplitPattern split_ = SplitPattern::kQwen2;
  bool nfc_ = false;
};

}  // namespace kvgate::tokenizer
