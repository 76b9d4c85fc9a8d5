// The normalizer of tokenizer.json: a sequence of text rewrites applied to each piece of
// the input between added tokens, before pre-tokenization.
//
// Steps, with the Hugging Face library's semantics:
//   NFC, NFD, NFKC, NFKD  Unicode normalization forms (utf8proc)
//   Lowercase             Unicode lowercase mapping, character by character (U+0130 -> i̇)
//   Strip                 removes White_Space on the left and/or right
//   Replace               every match of a literal or regex -> `content`
//   Prepend               `content` before a non-empty text
//   Precompiled           SentencePiece's compiled rules (precompiled.h)
// A Sequence is flattened into one list at load; the empty list is the identity.
// Immutable after construction; normalize() is thread-safe given its own Scratch.
//
//   Normalizer n;
//   n.add({.kind = Normalizer::kPrepend, .content = "\u2581"});
//   std::string out;
//   n.normalize("hi", out, scratch);  // "▁hi"
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.h"
#include "core/tokenizer/precompiled.h"
#include "core/tokenizer/regex.h"

namespace kvgate::tokenizer {

class Normalizer {
 public:
  enum Kind { kNfc, kNfd, kNfkc, kNfkd, kLowercase, kStrip, kReplace, kPrepend, kPrecompiled };
  struct Step {
    Kind kind;
    bool strip_left = false, strip_right = false;  // kStrip
    std::optional<Regex> pattern;                  // kReplace
    std::string content;                           // kReplace, kPrepend
    std::optional<PrecompiledCharsMap> charsmap;   // kPrecompiled
  };

  void add(Step step) { steps_.push_back(std::move(step)); }
  bool empty() const { return steps_.empty(); }
  // True when the only step is NFC (the tokenizer's fast path normalizes in place).
  bool is_nfc_only() const { return steps_.size() == 1 && steps_[0].kind == kNfc; }

  // Writes the normalized form of `in` (valid UTF-8) to `out` (replacing its contents).
  Status normalize(std::string_view in, std::string& out, Regex::Scratch& scratch) const;

  // "NFC", "Prepend(▁) + Replace( →▁)", ... for `kvgate tokenize --explain`.
  std::string describe() const;
  size_t memory_bytes() const;  // heap bytes held (regexes, texts)

 private:
  std::vector<Step> steps_;
};

// Unicode lowercase of valid UTF-8 `s` appended to `out`, as Rust's char::to_lowercase.
void lowercase(std::string_view s, std::string& out);
// Unicode normalization form of valid UTF-8 `s` appended to `out`.
enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };
void normalize_form(NormalForm form, std::string_view s, std::string& out);

}  // namespace kvgate::tokenizer
