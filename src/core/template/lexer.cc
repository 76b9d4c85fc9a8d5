#include "core/template/lexer.h"

#include <cstring>

#include "core/common/unicode.h"

namespace kvgate::jinja {
namespace {

using unicode::append_utf8;

// The length of the whitespace character at s[i] (Python's str.isspace, which is also what
// `\s` and str.strip() mean for Python Jinja's lexer), or 0. It matches the UTF-8 bytes of
// those characters, so a template that is not valid UTF-8 is never decoded past its end.
size_t space_at(std::string_view s, size_t i) {
  auto byte = [&](size_t k) -> unsigned {
    return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0;
  };
  const unsigned b0 = byte(0), b1 = byte(1), b2 = byte(2);
  if ((b0 >= 0x09 && b0 <= 0x0D) || (b0 >= 0x1C && b0 <= 0x20)) return 1;
  if (b0 == 0xC2 && (b1 == 0x85 || b1 == 0xA0)) return 2;  // U+0085, U+00A0
  if (b0 == 0xE1 && b1 == 0x9A && b2 == 0x80) return 3;    // U+1680
  if (b0 == 0xE2 && b1 == 0x80 &&
      ((b2 >= 0x80 && b2 <= 0x8A) || b2 == 0xA8 || b2 == 0xA9 || b2 == 0xAF))
    return 3;                                            // U+2000..U+200A, U+2028, U+2029, U+202F
  if (b0 == 0xE2 && b1 == 0x81 && b2 == 0x9F) return 3;  // U+205F
  if (b0 == 0xE3 && b1 == 0x80 && b2 == 0x80) return 3;  // U+3000
  return 0;
}

// Python's str.rstrip() (what `{%-` does to the text before the tag).
std::string_view rstrip_space(std::string_view s) {
  size_t e = s.size();
  while (e > 0) {
    if (space_at(s, e - 1) == 1) {
      e -= 1;
    } else if (e >= 2 && space_at(s, e - 2) == 2) {
      e -= 2;
    } else if (e >= 3 && space_at(s, e - 3) == 3) {
      e -= 3;
    } else {
      break;
    }
  }
  return s.substr(0, e);
}

// Past the whitespace at s[i] (`\s*`).
size_t skip_space(std::string_view s, size_t i) {
  while (i < s.size()) {
    const size_t n = space_at(s, i);
    if (n == 0) break;
    i += n;
  }
  return i;
}

bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  Lexer(std::string_view src, const LexOptions& opt, std::deque<std::string>& pool)
      : src_(src), opt_(opt), pool_(pool) {}

  std::vector<Token> run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      const size_t tag = find_tag(pos);
      std::string_view text = src_.substr(pos, tag - pos);
      if (tag == src_.size()) {
        emit_data(text, pos);
        break;
      }
      const char kind = src_[tag + 1];  // '{', '%' or '#'
      const char mod = tag + 2 < src_.size() ? src_[tag + 2] : 0;
      if (mod == '-') {
        text = rstrip_space(text);
      } else if (kind != '{' && mod != '+' && opt_.lstrip_blocks) {
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
        // Python Jinja 3.1 strips when `\s+` matches the rest of the line: any whitespace,
        // not only the spaces and tabs that older Jinja (and @huggingface/jinja) strip.
        if ((l_pos > 0 || line_starting) && skip_space(text, l_pos) == text.size())
          text = text.substr(0, l_pos);
      }
      emit_data(text, pos);
      size_t p = tag + 2 + ((mod == '-' || mod == '+') ? 1 : 0);
      if (kind == '#') {
        pos = end_comment(tag, p);
      } else if (kind == '%' && is_raw(p)) {
        pos = raw_block(tag, p);
      } else {
        pos = tag_body(kind, tag, p);
      }
      line_starting = pos > 0 && src_[pos - 1] == '\n';
    }
    tokens_.push_back({Tok::kEof, static_cast<uint32_t>(src_.size()), {}});
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(size_t at, std::string message) {
    throw SyntaxError{static_cast<uint32_t>(at), std::move(message)};
  }

  size_t find_tag(size_t pos) const {
    for (size_t i = src_.find('{', pos); i != std::string_view::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    }
    return src_.size();
  }

  void emit_data(std::string_view text, size_t at) {
    if (!text.empty()) tokens_.push_back({Tok::kData, static_cast<uint32_t>(at), text});
  }

  // After a tag's end marker at `end` (one past it): '-' strips all whitespace that
  // follows, trim_blocks one newline after a block or comment.
  size_t after_end(size_t end, bool minus, bool plus, bool block) {
    if (minus) return skip_space(src_, end);
    if (block && !plus && opt_.trim_blocks && end < src_.size() && src_[end] == '\n')
      return end + 1;
    return end;
  }

  size_t end_comment(size_t tag, size_t p) {
    const size_t e = src_.find("#}", p);
    if (e == std::string_view::npos) fail(tag, "missing end of comment tag");
    const bool minus = e > p && src_[e - 1] == '-';
    const bool plus = e > p && src_[e - 1] == '+';
    return after_end(e + 2, minus, plus, true);
  }

  // {% raw %}: is the tag at p (after "{%" and its modifier) `raw`?
  bool is_raw(size_t p) const {
    size_t i = skip_space(src_, p);
    if (src_.compare(i, 3, "raw") != 0) return false;
    i += 3;
    if (i < src_.size() && is_name_char(src_[i])) return false;
    i = skip_space(src_, i);
    if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) ++i;
    return src_.compare(i, 2, "%}") == 0;
  }

  size_t raw_block(size_t tag, size_t p) {
    size_t i = skip_space(src_, p) + 3;
    i = skip_space(src_, i);
    bool minus = false;
    if (src_[i] == '-' || src_[i] == '+') minus = src_[i++] == '-';
    size_t body = i + 2;
    if (minus) body = skip_space(src_, body);
    // Find {%[-+]? endraw [-+]?%}
    for (size_t k = src_.find("{%", body); k != std::string_view::npos;
         k = src_.find("{%", k + 1)) {
      size_t j = k + 2;
      const char m = j < src_.size() ? src_[j] : 0;
      if (m == '-' || m == '+') ++j;
      j = skip_space(src_, j);
      if (src_.compare(j, 6, "endraw") != 0) continue;
      j = skip_space(src_, j + 6);
      bool end_minus = false, end_plus = false;
      if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) {
        end_minus = src_[j] == '-';
        end_plus = src_[j] == '+';
        ++j;
      }
      if (src_.compare(j, 2, "%}") != 0) continue;
      std::string_view text = src_.substr(body, k - body);
      if (m == '-') text = rstrip_space(text);
      emit_data(text, body);
      return after_end(j + 2, end_minus, end_plus, true);
    }
    fail(tag, "missing end of raw directive");
  }

  size_t tag_body(char kind, size_t tag, size_t p) {
    const bool var = kind == '{';
    tokens_.push_back({var ? Tok::kVarBegin : Tok::kBlockBegin, static_cast<uint32_t>(tag), {}});
    int depth = 0;  // open brackets: an end marker inside them is not the end
    size_t i = p;
    while (true) {
      i = skip_space(src_, i);  // Python Jinja's `\s+` between tokens: any whitespace
      if (i >= src_.size())
        fail(tag, var ? "unexpected end of template, expected '}}'"
                      : "unexpected end of template, expected '%}'");
      const char end = var ? '}' : '%';
      if (depth == 0) {
        bool minus = false, plus = false;
        size_t j = i;
        if (src_[j] == '-' && j + 2 < src_.size() + 0 && src_[j + 1] == end && src_[j + 2] == '}') {
          minus = true;
          ++j;
        } else if (!var && src_[j] == '+' && j + 2 < src_.size() + 0 && src_[j + 1] == '%' &&
                   src_[j + 2] == '}') {
          plus = true;
          ++j;
        }
        if (j + 1 < src_.size() && src_[j] == end && src_[j + 1] == '}') {
          tokens_.push_back({var ? Tok::kVarEnd : Tok::kBlockEnd, static_cast<uint32_t>(i), {}});
          return after_end(j + 2, minus, plus, !var);
        }
      }
      const char c = src_[i];
      const size_t start = i;
      if (is_name_start(c)) {
        while (i < src_.size() && is_name_char(src_[i])) ++i;
        tokens_.push_back(
            {Tok::kName, static_cast<uint32_t>(start), src_.substr(start, i - start)});
      } else if (is_digit(c)) {
        i = number(start);
      } else if (c == '\'' || c == '"') {
        i = string_literal(start);
      } else {
        static constexpr const char* kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
        size_t n = 0;
        for (const char* op : kTwo)
          if (src_.compare(i, 2, op) == 0) n = 2;
        if (n == 0 && std::strchr("+-*/%~<>=()[]{},.:|;", c) != nullptr && c != 0) n = 1;
        if (n == 0) fail(i, std::string("unexpected char '") + c + "'");
        if (c == '(' || c == '[' || c == '{') ++depth;
        if (c == ')' || c == ']' || c == '}') {
          if (depth == 0) fail(i, std::string("unexpected '") + c + "'");
          --depth;
        }
        tokens_.push_back({Tok::kOp, static_cast<uint32_t>(start), src_.substr(start, n)});
        i += n;
      }
    }
  }

  size_t number(size_t start) {
    size_t i = start;
    std::string digits;
    auto run = [&] {
      while (i < src_.size() && (is_digit(src_[i]) || (src_[i] == '_' && i + 1 < src_.size() &&
                                                       is_digit(src_[i + 1])))) {
        if (src_[i] != '_') digits.push_back(src_[i]);
        ++i;
      }
    };
    run();
    const bool after_dot =
        !tokens_.empty() && tokens_.back().type == Tok::kOp && tokens_.back().text == ".";
    bool is_float = false;
    if (!after_dot && i + 1 < src_.size() && src_[i] == '.' && is_digit(src_[i + 1])) {
      is_float = true;
      digits.push_back('.');
      ++i;
      run();
    }
    if (!after_dot && i < src_.size() && (src_[i] == 'e' || src_[i] == 'E')) {
      size_t j = i + 1;
      if (j < src_.size() && (src_[j] == '+' || src_[j] == '-')) ++j;
      if (j < src_.size() && is_digit(src_[j])) {
        is_float = true;
        digits.append(src_.substr(i, j - i));
        i = j;
        run();
      }
    }
    Token t{is_float ? Tok::kFloat : Tok::kInt, static_cast<uint32_t>(start),
            src_.substr(start, i - start)};
    if (is_float) {
      t.f = std::strtod(digits.c_str(), nullptr);
    } else {
      errno = 0;
      t.i = std::strtoll(digits.c_str(), nullptr, 10);
      if (errno == ERANGE) fail(start, "integer literal out of range (kvgate ints are 64-bit)");
    }
    tokens_.push_back(t);
    return i;
  }

  size_t string_literal(size_t start) {
    const char q = src_[start];
    size_t i = start + 1;
    std::string out;
    bool escaped = false;
    while (true) {
      if (i >= src_.size()) fail(start, "unexpected end of string");
      const char c = src_[i];
      if (c == q) break;
      if (c != '\\') {
        out.push_back(c);
        ++i;
        continue;
      }
      escaped = true;
      if (i + 1 >= src_.size()) fail(start, "unexpected end of string");
      const char e = src_[i + 1];
      i += 2;
      switch (e) {
        case 'n':
          out.push_back('\n');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '\'':
          out.push_back('\'');
          break;
        case '"':
          out.push_back('"');
          break;
        case 'a':
          out.push_back('\a');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'v':
          out.push_back('\v');
          break;
        case '0':
          out.push_back('\0');
          break;
        case '\n':
          break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
          if (i + n > src_.size()) fail(i - 2, "truncated \\" + std::string(1, e) + " escape");
          char32_t cp = 0;
          for (size_t k = 0; k < n; ++k) {
            const char h = src_[i + k];
            int d = (h >= '0' && h <= '9')   ? h - '0'
                    : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                    : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                             : -1;
            if (d < 0) fail(i - 2, "truncated \\" + std::string(1, e) + " escape");
            cp = cp * 16 + static_cast<char32_t>(d);
          }
          if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) fail(i - 2, "invalid escape");
          append_utf8(out, cp);
          i += n;
          break;
        }
        default:  // Python keeps unknown escapes as written
          out.push_back('\\');
          out.push_back(e);
      }
    }
    Token t{Tok::kString, static_cast<uint32_t>(start), {}};
    if (!escaped) {
      t.text = src_.substr(start + 1, i - start - 1);
    } else {
      pool_.push_back(std::move(out));
      t.text = pool_.back();
    }
    tokens_.push_back(t);
    return i + 1;
  }

  std::string_view src_;
  const LexOptions& opt_;
  std::deque<std::string>& pool_;
  std::vector<Token> tokens_;
};

}  // namespace

std::string normalize_source(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::vector<Token> lex(std::string_view source, const LexOptions& options,
                       std::deque<std::string>& pool) {
  return Lexer(source, options, pool).run();
}

}  // namespace kvgate::jinja
