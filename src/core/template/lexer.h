// The Jinja lexer: template source -> tokens, with Jinja's whitespace control applied to
// the text between tags ({%- -%}, {%+ +%}, trim_blocks, lstrip_blocks) the way Python
// Jinja's lexer does it.
//
// Internal to the template engine (template.h is the public interface).
#pragma once

#include <cstdint>
#include <deque>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace kvgate::jinja {

enum class Tok : uint8_t {
  kData,        // text outside tags (text)
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,        // text
  kString,      // text: the decoded literal (kept alive by the pool)
  kInt,         // i
  kFloat,       // f
  kOp,          // text: one of + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } , . : |
  kEof,
};

struct Token {
  Tok type;
  uint32_t offset;  // into the (newline-normalized) source, for line:column
  std::string_view text;
  int64_t i = 0;
  double f = 0;
};

struct LexOptions {
  bool trim_blocks = true;  // as transformers sets them
  bool lstrip_blocks = true;
};

// Thrown by the lexer and parser; offset is into the normalized source.
struct SyntaxError {
  uint32_t offset;
  std::string message;
};

// Python Jinja's source normalization: "\r\n" and "\r" become "\n" and one trailing
// newline is dropped (keep_trailing_newline=False).
std::string normalize_source(std::string_view source);

// REQUIRES: source is normalized. Token texts view `source` or strings in `pool`.
// Throws SyntaxError.
std::vector<Token> lex(std::string_view source, const LexOptions& options,
                       std::deque<std::string>& pool);

}  // namespace kvgate::jinja
