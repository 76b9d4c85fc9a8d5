// The regular expressions of tokenizer.json (Split pre-tokenizers, Replace normalizers and
// decoders), run with PCRE2 (JIT-compiled, UTF and Unicode-property mode).
//
// The Hugging Face library compiles these patterns with Oniguruma (Ruby syntax). compile()
// translates the few constructs whose meaning differs before handing the pattern to PCRE2:
//   \s \S   Oniguruma's White_Space (has U+0085, not U+180E; PCRE2's \s is the opposite)
//   \w \W   Unicode Word: letters, marks, Nd, Nl, Pc, ZWJ/ZWNJ, the Other_Alphabetic symbols
//   \h \H   Oniguruma: a hex digit (PCRE2: horizontal space)
//   \uHHHH  Oniguruma only: becomes \x{HHHH}
//   (?m)    Oniguruma: dot matches newline (PCRE2's (?s)); ^ and $ always match at lines
// A construct PCRE2 cannot express the same way (nested classes, && intersections, \S \W \H
// inside a class) is refused with an error naming it.
//
// On ASCII text a variant of the pattern without UTF and Unicode properties runs instead
// (ascii_variant below), proven equal by tests/core/tokenizer/regex_test.cc.
//
// Matches are iterated like the onig crate's find_iter: leftmost-first, non-overlapping, an
// empty match right where the previous match ended is skipped by one character.
//
// Immutable after compile(); find_all is thread-safe given its own Scratch.
//
//   auto re = Regex::compile(R"(\p{N}{1,3})");
//   Regex::Scratch scratch;
//   std::vector<Regex::Span> spans;
//   re->find_all("abc 12345", scratch, spans);  // {4,7} {7,9}
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.h"

namespace kvgate::tokenizer {

class Regex {
 public:
  struct Span {
    size_t start, end;
  };
  // Per-thread match state (PCRE2 match data), reusable across calls and patterns.
  class Scratch {
   public:
    Scratch();
    ~Scratch();
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;
    // Created on first use: a Scratch that never meets a regex costs nothing.
    void* match_data();
    void* match_context();  // carries the callout of batched matching

   private:
    void* data_ = nullptr;
    void* context_ = nullptr;
  };

  // Compiles an Oniguruma-syntax pattern. Errors name the offending construct.
  static Result<Regex> compile(std::string_view oniguruma_pattern);
  // A pattern matching `text` literally (tokenizer.json's {"String": ...} patterns).
  static Regex literal(std::string_view text);

  // The two equivalent ways find_all can run, both on by default (the tests turn them off
  // to compare): `ascii`, text that is all ASCII is matched with the pattern's ASCII
  // variant (ascii_variant below); `batched`, a run of adjacent matches is found by one
  // PCRE2 call (for patterns that cannot match the empty string, see regex.cc).
  struct Variants {
    bool ascii = true;
    bool batched = true;
  };

  // Appends the matches in `text` (valid UTF-8) to `out`. An error only when PCRE2 gives up
  // (its match limits), never on valid input of reasonable size.
  Status find_all(std::string_view text, Scratch& scratch, std::vector<Span>& out) const {
    return find_all(text, scratch, out, Variants());
  }
  Status find_all(std::string_view text, Scratch& scratch, std::vector<Span>& out,
                  Variants variants) const;

  bool is_literal() const { return !code_; }
  bool has_ascii_variant() const;
  bool has_batched_variant() const;
  // Bytes held: the compiled pattern and its JIT code (PCRE2_INFO_SIZE, _JITSIZE), or the
  // literal.
  size_t memory_bytes() const;
  // The PCRE2 pattern compile() produced (for error messages and tests).
  const std::string& translated() const { return translated_; }

 private:
  struct Code;
  std::shared_ptr<const Code> code_;  // null for a literal
  std::string literal_;
  std::string translated_;
};

// The Oniguruma -> PCRE2 translation compile() applies (exposed for tests).
Result<std::string> oniguruma_to_pcre2(std::string_view pattern);

// The ASCII variant of a translated pattern: compiled without UTF and Unicode properties,
// it matches an ASCII subject exactly where the pattern (UTF, UCP) does, without decoding
// UTF-8 or looking up properties (3-4x faster on English text and code). Each class and
// class escape becomes the explicit set of its ASCII members, as PCRE2 itself decides
// them; a non-ASCII literal becomes a class no ASCII character is in; everything else is
// kept. Nullopt outside the subset where that is exact: case-insensitive patterns with
// classes, verbs, comments, \Q..\E, backreferences, \b and other escapes whose meaning
// depends on the mode.
std::optional<std::string> ascii_variant(std::string_view pcre2_pattern);

}  // namespace kvgate::tokenizer
