// The decoder of tokenizer.json: turns the strings of decoded tokens back into text, with
// the Hugging Face library's semantics (each step maps the list of token strings to a new
// list; the result is their concatenation).
//
//   ByteLevel      tokens in GPT-2's byte alphabet -> bytes -> UTF-8 (U+FFFD for bad bytes)
//   Metaspace      replacement -> ' ' (dropped in the first token unless prepend "never")
//   ByteFallback   runs of <0xNN> tokens -> their bytes as UTF-8 (else one U+FFFD each)
//   Fuse           all tokens -> one
//   Strip          removes up to `start`/`stop` copies of a character at each token's ends
//   Replace        literal or regex -> content, in each token
//   BPEDecoder     end_of_word suffix -> ' ' (removed in the last token)
// No decoder at all joins the tokens with spaces, as the library does.
// Immutable after construction; decode() is thread-safe given its own Scratch.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/common/result.h"
#include "core/tokenizer/regex.h"

namespace kvgate::tokenizer {

class Decoder {
 public:
  enum Kind { kByteLevel, kMetaspace, kByteFallback, kFuse, kStrip, kReplace, kBpeSuffix };
  struct Step {
    Kind kind;
    std::string text;              // kMetaspace: the replacement; kStrip: the character;
                                   // kReplace: the content; kBpeSuffix: the suffix
    bool drop_first = true;        // kMetaspace: prepend_scheme is not "never"
    size_t start = 0, stop = 0;    // kStrip
    std::optional<Regex> pattern;  // kReplace
  };

  // present == false: tokenizer.json has no decoder (tokens are joined with spaces).
  void set_present(bool present) { present_ = present; }
  void add(Step step) { steps_.push_back(std::move(step)); }
  bool is_byte_level_only() const {
    return present_ && steps_.size() == 1 && steps_[0].kind == kByteLevel;
  }

  // The text of `tokens` (consumed).
  Result<std::string> decode(std::vector<std::string> tokens, Regex::Scratch& scratch) const;
  std::string describe() const;
  size_t memory_bytes() const;  // heap bytes held (regexes, texts)

 private:
  bool present_ = false;
  std::vector<Step> steps_;
};

}  // namespace kvgate::tokenizer
