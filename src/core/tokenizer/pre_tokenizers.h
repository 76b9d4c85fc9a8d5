// The general pre-tokenizer of tokenizer.json: cuts a normalized piece of text into the
// words the model encodes one by one, with the Hugging Face library's semantics.
//
// Steps (a Sequence is flattened at load and runs in order, each on every piece so far):
//   Split          matches of a regex (PCRE2, regex.h) or literal; `behavior` and `invert`
//   ByteLevel      optional prefix space, optional GPT-2 regex; the model then works on
//                  raw bytes (must be the last step: later steps would see mapped bytes)
//   Metaspace      ' ' -> replacement, prepend_scheme always/first/never, optional split
//   Digits         runs of numeric characters (or each one, individual_digits)
//   Punctuation    each punctuation character, with a behavior
//   Whitespace     \w+|[^\w\s]+ (whitespace dropped)
//   WhitespaceSplit / CharDelimiterSplit   split on whitespace / one character, dropped
// The hand-written scanners of pre_tokenizer.h are the fast path for two known regexes;
// the tokenizer chooses them only where a test proves them equal to this general path.
//
// Immutable after construction; run() is thread-safe given its own Scratch.
//
//   PreTokenizer pre;  // from tokenizer.json via Tokenizer::load
//   PreTokenizer::Scratch s;
//   std::vector<Piece> words;
//   pre.run("Hello world", /*at_start=*/true, s, words);  // views valid until the next run
#pragma once

#include <list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.h"
#include "core/tokenizer/regex.h"

namespace kvgate::tokenizer {

// A word of the pre-tokenized text. at_start: it begins at offset 0 of the original input
// (Metaspace's prepend_scheme "first" looks at that).
struct Piece {
  std::string_view text;
  bool at_start;
};

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

class PreTokenizer {
 public:
  enum Kind {
    kSplit,
    kByteLevel,
    kMetaspace,
    kDigits,
    kPunctuation,
    kWhitespace,
    kWhitespaceSplit,
    kCharDelimiter
  };
  enum class Prepend { kAlways, kFirst, kNever };
  struct Step {
    Kind kind;
    std::optional<Regex> regex;  // kSplit; kByteLevel with use_regex (the GPT-2 regex)
    SplitBehavior behavior = SplitBehavior::kIsolated;  // kSplit, kPunctuation
    bool invert = false;                                // kSplit
    bool add_prefix_space = false;                      // kByteLevel
    std::string replacement;  // kMetaspace; kCharDelimiter: the delimiter (one character)
    Prepend prepend = Prepend::kAlways;  // kMetaspace
    bool split = true;                   // kMetaspace
    bool individual_digits = false;      // kDigits
  };

  struct Scratch {
    Regex::Scratch regex;
    std::list<std::string> owned;  // texts the steps rewrote (stable addresses)
    std::vector<Piece> cur, next;
    std::vector<Regex::Span> spans;
    struct Mark {
      size_t start, end;
      bool match;
    };
    std::vector<Mark> marks, kept;
  };

  void add(Step step) { steps_.push_back(std::move(step)); }
  bool empty() const { return steps_.empty(); }
  const std::vector<Step>& steps() const { return steps_; }
  // True when a ByteLevel step is present: words are then raw bytes for a byte-level model.
  bool byte_level() const;

  // Appends the words of `text` to `out` (empty words are dropped, as the library does).
  // The words view `text` or strings in `s`, valid until `s` is used again.
  Status run(std::string_view text, bool at_start, Scratch& s, std::vector<Piece>& out) const;

  std::string describe() const;
  size_t memory_bytes() const;  // heap bytes held (regexes, texts)

 private:
  Status apply(const Step& step, const Piece& in, Scratch& s, std::vector<Piece>& out) const;
  std::vector<Step> steps_;
};

// The GPT-2 regex ByteLevel splits with when use_regex is true.
inline constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace kvgate::tokenizer
