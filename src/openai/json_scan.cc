#include "openai/json_scan.h"

#include <simdjson.h>

#include <array>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace kvgate::openai {

namespace {

// What the escape \x stands for, for every x but 'u'; 0: not a (simple) escape.
constexpr std::array<char, 256> kSimpleEscape = [] {
  std::array<char, 256> t{};
  t['"'] = '"';
  t['\\'] = '\\';
  t['/'] = '/';
  t['b'] = '\b';
  t['f'] = '\f';
  t['n'] = '\n';
  t['r'] = '\r';
  t['t'] = '\t';
  return t;
}();

bool is_digit(char c) { return c >= '0' && c <= '9'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Moves `q` to the first quote, backslash, control or (kNonAscii) non-ASCII byte, 16
// bytes at a time, or to within 16 bytes of `end` (byte by byte from there is the
// caller's).
template <bool kNonAscii = true>
inline const char* to_special(const char* q, const char* end) {
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i control = _mm_set1_epi8(0x1F);
  while (end - q >= 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
    const __m128i special =
        _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                     _mm_cmpeq_epi8(_mm_min_epu8(v, control), v));
    const int mask = _mm_movemask_epi8(special) | (kNonAscii ? _mm_movemask_epi8(v) : 0);
    if (mask != 0) return q + __builtin_ctz(static_cast<unsigned>(mask));
    q += 16;
  }
#endif
  return q;
}

// The common string, inline: at its opening quote, with no escape, control or non-ASCII
// byte before its closing quote: moves `p` past that quote. Otherwise (p unchanged) the
// caller takes scan_string.
inline bool skip_plain_string(const char*& p, const char* end) {
  for (const char* q = to_special(p + 1, end); q != end; ++q) {
    const auto c = static_cast<unsigned char>(*q);
    if (c == '"') {
      p = q + 1;
      return true;
    }
    if (c == '\\' || c < 0x20 || c >= 0x80) return false;
  }
  return false;
}

}  // namespace

bool JsonScanner::begin_object() {
  if (peek() != '{' || depth_ == kMaxDepth) return false;
  ++p_;
  ++depth_;
  return true;
}

bool JsonScanner::begin_array() {
  if (peek() != '[' || depth_ == kMaxDepth) return false;
  ++p_;
  ++depth_;
  return true;
}

JsonScanner::Next JsonScanner::close_or_comma(char close, bool first) {
  const char c = peek();
  if (c == close) {
    ++p_;
    --depth_;
    return Next::kEnd;
  }
  if (!first) {
    if (c != ',') return Next::kBad;
    ++p_;
  }
  return Next::kItem;
}

JsonScanner::Next JsonScanner::next_member(bool first, std::string_view& key) {
  if (const Next n = close_or_comma('}', first); n != Next::kItem) return n;
  if (peek() != '"') return Next::kBad;
  const char* start = p_;
  bool escaped = false;
  if (!skip_plain_string(p_, end_) && !scan_string(nullptr, &escaped)) return Next::kBad;
  key = std::string_view(start + 1, static_cast<size_t>(p_ - start - 2));
  if (escaped) {
    // Rare: decode it, as Boost.JSON compares decoded keys.
    p_ = start;
    key_.clear();
    if (!scan_string(&key_)) return Next::kBad;
    key = key_;
  }
  if (peek() != ':') return Next::kBad;
  ++p_;
  return Next::kItem;
}

JsonScanner::Next JsonScanner::next_element(bool first) {
  return close_or_comma(']', first);  // the element itself is checked by whoever reads it
}

bool JsonScanner::skip_key() {
  if (peek() != '"' || (!skip_plain_string(p_, end_) && !scan_string(nullptr))) return false;
  if (peek() != ':') return false;
  ++p_;
  return true;
}

// Iterative, with the kinds of the open containers as bits (1: object), so a skipped
// tree costs no calls per level and its keys are checked but never decoded.
bool JsonScanner::skip_value() {
  static_assert(kMaxDepth <= 64);
  uint64_t objects = 0;
  const int base = depth_;
  for (;;) {
    // A value.
    switch (peek()) {
      case '{':
      case '[': {
        if (depth_ == kMaxDepth) return false;
        const bool object = *p_ == '{';
        ++p_;
        const uint64_t bit = uint64_t{1} << (depth_ - base);
        objects = object ? objects | bit : objects & ~bit;
        ++depth_;
        const char c = peek();
        if (c == (object ? '}' : ']')) {
          ++p_;
          --depth_;
          break;  // to what follows a value
        }
        if (object && !skip_key()) return false;
        continue;  // to its first value
      }
      case '"':
        if (!skip_plain_string(p_, end_) && !scan_string(nullptr)) return false;
        break;
      case 't':
      case 'f':
      case 'n': {
        Literal lit;
        if (!literal(lit)) return false;
        break;
      }
      default: {
        Number n;
        if (!number(n)) return false;  // rejects anything that is not a number, too
      }
    }
    // What follows a value: the end, a comma and the next one, or closing brackets.
    for (;;) {
      if (depth_ == base) return true;
      const bool object = objects >> (depth_ - 1 - base) & 1;
      const char c = peek();
      if (c == ',') {
        ++p_;
        if (object && !skip_key()) return false;
        break;  // to the next value
      }
      if (c != (object ? '}' : ']')) return false;
      ++p_;
      --depth_;
    }
  }
}

bool JsonScanner::string_value(std::string* out) { return peek() == '"' && scan_string(out); }

bool JsonScanner::literal(Literal& lit) {
  auto take = [&](std::string_view word) {
    if (static_cast<size_t>(end_ - p_) < word.size() ||
        std::memcmp(p_, word.data(), word.size()) != 0) {
      return false;
    }
    p_ += word.size();
    return true;
  };
  switch (peek()) {
    case 't':
      lit = Literal::kTrue;
      return take("true");
    case 'f':
      lit = Literal::kFalse;
      return take("false");
    case 'n':
      lit = Literal::kNull;
      return take("null");
    default:
      return false;
  }
}

bool JsonScanner::number(Number& n) {
  skip_ws();
  // A local cursor: the compiler cannot keep a member in a register across char reads.
  const char* p = p_;
  const char* const end = end_;
  n = Number{};
  n.integral = true;
  n.fits = true;
  if (p != end && *p == '-') {
    n.negative = true;
    ++p;
  }
  if (p == end || !is_digit(*p)) return false;
  if (*p == '0') {
    ++p;
  } else {
    uint64_t m = 0;
    while (p != end && is_digit(*p)) {
      const uint64_t d = static_cast<uint64_t>(*p - '0');
      if (m > (UINT64_MAX - d) / 10) n.fits = false;
      m = m * 10 + d;
      ++p;
    }
    n.magnitude = n.fits ? m : 0;
  }
  if (p != end && *p == '.') {
    n.integral = false;
    ++p;
    if (p == end || !is_digit(*p)) return false;
    while (p != end && is_digit(*p)) ++p;
  }
  if (p != end && (*p == 'e' || *p == 'E')) {
    n.integral = false;
    ++p;
    if (p != end && (*p == '+' || *p == '-')) ++p;
    const char* digits = p;
    while (p != end && is_digit(*p)) ++p;
    // Boost.JSON fails on exponents that overflow: leave long ones to it.
    if (p == digits || static_cast<size_t>(p - digits) > kMaxExponentDigits) return false;
  }
  const bool short_enough = static_cast<size_t>(p - p_) <= kMaxNumberChars;
  p_ = p;
  return short_enough;
}

bool JsonScanner::scan_string(std::string* out, bool* escaped) {
  // A local cursor, stored back before the rare calls that move p_ themselves.
  const char* p = p_ + 1;  // past the opening quote
  const char* const end = end_;
  const char* run = p;
  for (;;) {
    p = to_special(p, end);
    if (p == end) return false;
    const auto c = static_cast<unsigned char>(*p);
    if (c == '"') {
      if (out) out->append(run, static_cast<size_t>(p - run));
      p_ = p + 1;
      return true;
    }
    if (c == '\\') {
      if (escaped) *escaped = true;
      const char e = p + 1 != end ? kSimpleEscape[static_cast<unsigned char>(p[1])] : '\0';
      if (e != '\0') {  // \n, \" and the like: inline, back to the 16-byte steps
        if (out) {
          out->append(run, static_cast<size_t>(p - run));
          *out += e;
        }
        p = run = p + 2;
        continue;
      }
      if (out) out->append(run, static_cast<size_t>(p - run));
      p_ = p;
      if (!read_escape(out)) return false;  // \u, or not an escape
      p = run = p_;
    } else if (c < 0x20) {
      return false;
    } else if (c >= 0x80) {
      // Non-ASCII text: checked in one go up to the next quote, backslash or control byte
      // (no UTF-8 sequence spans an ASCII byte, so the pieces check apart).
      const char* stop = to_special<false>(p, end);
      while (stop != end && static_cast<unsigned char>(*stop) >= 0x20 && *stop != '"' &&
             *stop != '\\') {
        ++stop;
      }
      if (!simdjson::validate_utf8(p, static_cast<size_t>(stop - p))) return false;
      p = stop;
    } else {
      ++p;
    }
  }
}

bool JsonScanner::read_escape(std::string* out) {
  ++p_;  // the backslash
  if (p_ == end_) return false;
  char c = *p_++;
  switch (c) {
    case '"':
    case '\\':
    case '/':
      break;
    case 'b':
      c = '\b';
      break;
    case 'f':
      c = '\f';
      break;
    case 'n':
      c = '\n';
      break;
    case 'r':
      c = '\r';
      break;
    case 't':
      c = '\t';
      break;
    case 'u': {
      auto hex4 = [&](uint32_t& v) {
        if (end_ - p_ < 4) return false;
        v = 0;
        for (int i = 0; i < 4; ++i) {
          const int h = hex_value(*p_++);
          if (h < 0) return false;
          v = v << 4 | static_cast<uint32_t>(h);
        }
        return true;
      };
      uint32_t cp;
      if (!hex4(cp)) return false;
      if (cp >= 0xDC00 && cp <= 0xDFFF) return false;  // a trailing surrogate alone
      if (cp >= 0xD800 && cp <= 0xDBFF) {
        uint32_t low;
        if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return false;
        p_ += 2;
        if (!hex4(low) || low < 0xDC00 || low > 0xDFFF) return false;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
      }
      if (out) append_utf8(cp, *out);
      return true;
    }
    default:
      return false;
  }
  if (out) *out += c;
  return true;
}

}  // namespace kvgate::openai
