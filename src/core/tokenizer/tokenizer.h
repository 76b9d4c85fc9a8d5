// A BPE tokenizer loaded from any Hugging Face tokenizer.json built from the components
// the library uses for LLM tokenizers (Qwen, Llama 2/3, DeepSeek, Gemma, Mistral, GPT-2,
// ...): text -> token ids identical to the Hugging Face tokenizers library, and ids ->
// text. The file's contents are given as a string; the core does no file I/O.
//
// Pipeline of encode(), as the library's: validate UTF-8 -> split out the added tokens
// with normalized == false (added_tokens.h) -> normalize each piece in between
// (normalizer.h) -> split out the normalized added tokens -> pre-tokenize (pre_tokenizers.h)
// -> BPE per word (bpe.h). post_process() adds the post-processor's special tokens.
//
// Two paths, chosen at load and reported by path(): the general one runs the components
// as configured (regexes with PCRE2); the fast one replaces a Split regex kvgate knows by
// its hand-written scanner (pre_tokenizer.h). Tests run both on one corpus (they agree).
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
#include "core/tokenizer/decoder.h"
#include "core/tokenizer/normalizer.h"
#include "core/tokenizer/post_processor.h"
#include "core/tokenizer/pre_tokenizer.h"
#include "core/tokenizer/pre_tokenizers.h"

namespace kvgate::tokenizer {

// A point in the text where the encoding provably splits: right after an added token.
// Encoding text[0, text_end) gives exactly the first `ids` ids of the whole encoding.
struct Boundary {
  size_t text_end;
  size_t ids;
};

// Which path encode() takes and why (kvgate tokenize --explain, kvgate serve --check).
struct TokenizerPath {
  bool fast = false;
  std::string why;         // "the Split regex is Qwen2's: hand-written scanner", ...
  std::string components;  // "normalizer NFC; pre-tokenizer Split(PCRE2) + ByteLevel; ..."
};

class Tokenizer {
 public:
  struct LoadOptions {
    // false: never take the fast path (the conformance tests prove the general path).
    bool fast_paths = true;
  };
  // Parses tokenizer.json. Errors name the field that is missing or unsupported, e.g.
  // "model.type: unsupported \"Unigram\" (kvgate implements BPE)".
  static Result<Tokenizer> load(std::string_view tokenizer_json, const LoadOptions& options);
  static Result<Tokenizer> load(std::string_view tokenizer_json) {
    return load(tokenizer_json, LoadOptions{});
  }

  // Token ids of `text`, without any post-processor tokens (what vLLM does for chat
  // prompts, whose template already holds the BOS text). Invalid UTF-8 is an error
  // naming the byte offset.
  Result<std::vector<uint32_t>> encode(std::string_view text) const;
  // As encode(), appending to `out`. If `boundaries` is given, appends one Boundary per
  // added token (ids counted from the start of `out` as it was on entry).
  Status encode_into(std::string_view text, std::vector<uint32_t>& out,
                     std::vector<Boundary>* boundaries = nullptr) const;

  // The Boundary of every added token in `text` (ids left 0): where an encoding may be cut.
  // Errors on invalid UTF-8 like encode(). None when cutting is not exact for this
  // tokenizer (a Metaspace that prepends only at the very start of the text, or a
  // single_word added token, whose match depends on the character before it): the
  // PromptCache then encodes from scratch.
  Status find_boundaries(std::string_view text, std::vector<Boundary>& out) const;

  // The ids the post-processor adds around a single sequence when special tokens are
  // requested (vLLM: completions prompts; chat prompts carry them in the template text):
  // Llama 3.1's TemplateProcessing puts <|begin_of_text|> first; ByteLevel adds none.
  const std::vector<uint32_t>& post_prefix() const { return post_prefix_; }
  const std::vector<uint32_t>& post_suffix() const { return post_suffix_; }
  // The post-processor applied to the ids of one sequence (b == nullptr) or a pair.
  void post_process(std::span<const uint32_t> a, const std::span<const uint32_t>* b,
                    std::vector<uint32_t>& out) const {
    post_.apply(a, b, out);
  }

  const TokenizerPath& path() const { return path_; }

  // Text of `ids` through the configured decoder (byte-level: ill-formed UTF-8 replaced by
  // U+FFFD); an unknown id is an error. skip_special drops added tokens marked special.
  Result<std::string> decode(std::span<const uint32_t> ids, bool skip_special) const;

  // Id of an added token or vocabulary entry with exactly this text.
  std::optional<uint32_t> token_to_id(std::string_view text) const;
  // Number of distinct ids (vocabulary plus added tokens).
  size_t vocab_size() const;
  const BpeModel& bpe() const { return bpe_; }
  // Heap bytes held by the loaded tokenizer: the model's tables, the added tokens and their
  // tries, the normalizer's, pre-tokenizer's and decoder's regexes (PCRE2 code and JIT
  // code included). Approximate (allocator slack not counted); for the memory benchmark.
  size_t memory_bytes() const;

 private:
  struct Work;  // per-call scratch, in tokenizer.cc
  Status encode_segment(std::string_view text, bool at_start, std::vector<uint32_t>& out,
                        Work& w) const;
  Status encode_words(std::string_view text, bool at_start, std::vector<uint32_t>& out,
                      Work& w) const;

  struct Loaded;  // parser state, in tokenizer_json.cc
  friend struct Loaded;

  BpeModel bpe_;
  std::vector<AddedToken> added_;
  AddedTokenMatcher raw_matcher_;         // added tokens with normalized == false
  AddedTokenMatcher normalized_matcher_;  // added tokens with normalized == true
  std::vector<int32_t> added_by_id_;      // id -> index in added_, or -1
  Normalizer normalizer_;
  PreTokenizer pre_;
  std::optional<SplitPattern> fast_split_;  // the fast path's scanner, if chosen
  Decoder decoder_;
  PostProcessor post_;
  std::vector<uint32_t> post_prefix_, post_suffix_;
  TokenizerPath path_;
  bool cut_exact_ = true;  // see find_boundaries
};

}  // namespace kvgate::tokenizer
