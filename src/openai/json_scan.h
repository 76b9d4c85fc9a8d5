// JsonScanner: a forward, validating, allocation-free reader of JSON text, for the
// per-request fast paths (inspect_request, parse_usage: json_fast.h) that need a few
// fields of a body without building a tree.
//
// It vouches only for a strict subset of what Boost.JSON accepts: every call returns
// false ("not sure") on anything outside it — malformed text, but also nesting deeper
// than kMaxDepth, number tokens longer than kMaxNumberChars or with exponents of more
// than kMaxExponentDigits digits (Boost.JSON fails on some huge ones). A caller that gets
// false falls back to the full Boost.JSON parse (json_dom.h), which then decides,
// so the two always agree. What it accepts it checks as Boost.JSON does: RFC 8259
// grammar, no raw control characters in strings, valid escapes (surrogates paired),
// well-formed UTF-8; keys compare decoded.
//
//   JsonScanner s(text);
//   if (!s.begin_object()) return fallback();
//   std::string_view key;
//   for (bool first = true;; first = false) {
//     JsonScanner::Next n = s.next_member(first, key);
//     if (n == JsonScanner::Next::kEnd) break;
//     if (n == JsonScanner::Next::kBad) return fallback();
//     if (key == "x") { ... } else if (!s.skip_value()) return fallback();
//   }
//   if (!s.at_end()) return fallback();
//
// The scanner views `text`; it must outlive the scanner. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvgate::openai {

class JsonScanner {
 public:
  // Below Boost.JSON's own limits (32 by default, 64 for requests): deeper is its call.
  static constexpr int kMaxDepth = 24;
  static constexpr size_t kMaxNumberChars = 64;
  static constexpr size_t kMaxExponentDigits = 4;

  explicit JsonScanner(std::string_view text) : p_(text.data()), end_(text.data() + text.size()) {}

  enum class Next : uint8_t { kItem, kEnd, kBad };

  // The next value's first byte after whitespace, or '\0' at the end of the text.
  char peek() {
    // Compact JSON (as SDKs and engines send it) has no whitespace between tokens: one
    // compare finds the next byte (every byte JSON allows as whitespace is below '!').
    if (p_ != end_ && static_cast<unsigned char>(*p_) > ' ') [[likely]] {
      return *p_;
    }
    skip_ws();
    return p_ == end_ ? '\0' : *p_;
  }
  // True when only whitespace is left.
  bool at_end() {
    skip_ws();
    return p_ == end_;
  }

  // Consumes '{' / '['.
  bool begin_object();
  bool begin_array();
  // After begin_object: consumes `,` (unless first), the key and ':' and returns kItem with
  // the decoded key (valid until the next call), or consumes '}' and returns kEnd.
  Next next_member(bool first, std::string_view& key);
  // After begin_array: positions at the next element (consuming `,` unless first), or
  // consumes ']' and returns kEnd.
  Next next_element(bool first);

  // Skips one value of any kind, checking it.
  bool skip_value();
  // Reads a string value, appending its decoded text to *out when out is not null.
  bool string_value(std::string* out);
  // Reads true, false or null.
  enum class Literal : uint8_t { kTrue, kFalse, kNull };
  bool literal(Literal& lit);

  // A number as Boost.JSON would type it: integral (no fraction or exponent) with its
  // sign and magnitude, `fits` when the magnitude fits in a uint64 (otherwise Boost.JSON
  // makes it a double, as it does every number with a fraction or an exponent).
  struct Number {
    bool integral = false;
    bool negative = false;
    bool fits = false;
    uint64_t magnitude = 0;
    // Boost.JSON's int64 or uint64 (not double).
    bool is_integer() const {
      return integral && fits && (!negative || magnitude <= (uint64_t{1} << 63));
    }
  };
  bool number(Number& n);

 private:
  // At a container's next item: consumes its closing `close` (kEnd), or, unless `first`,
  // the comma before the item (kItem; kBad when neither is there).
  Next close_or_comma(char close, bool first);
  void skip_ws() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  // At '"': past the closing quote; `escaped` set when the string holds a backslash.
  bool scan_string(std::string* out, bool* escaped = nullptr);
  // A key of an object being skipped, and its ':'.
  bool skip_key();
  bool read_escape(std::string* out);

  const char* p_;
  const char* end_;
  int depth_ = 0;
  std::string key_;  // a key with escapes, decoded
};

}  // namespace kvgate::openai
