#include "io/http_head.h"

#include <algorithm>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace kvgate::io {
namespace {

// Letters, digits and the characters of `extra`.
constexpr std::array<bool, 256> alnum_and(std::string_view extra) {
  std::array<bool, 256> t{};
  for (int c = '0'; c <= '9'; ++c) t[c] = true;
  for (int c = 'a'; c <= 'z'; ++c) t[c] = true;
  for (int c = 'A'; c <= 'Z'; ++c) t[c] = true;
  for (char c : extra) t[static_cast<unsigned char>(c)] = true;
  return t;
}
// A field value's (and a reason phrase's) characters: visible ASCII, space, tab, obs-text.
constexpr std::array<bool, 256> make_text_table() {
  std::array<bool, 256> t{};
  for (int c = 0x20; c <= 0x7e; ++c) t[c] = true;
  for (int c = 0x80; c <= 0xff; ++c) t[c] = true;
  t['\t'] = true;
  return t;
}
// RFC 9110 tchar.
constexpr std::array<bool, 256> kToken = alnum_and("!#$%&'*+-.^_`|~");
// A request target's characters, kept to RFC 3986's unreserved, reserved (without '#')
// and '%': anything rarer goes to Beast.
constexpr std::array<bool, 256> kTarget = alnum_and("-._~:/?[]@!$&'()*+,;=%");
constexpr std::array<bool, 256> kText = make_text_table();

uint64_t load8(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
uint32_t load4(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// True when `s` equals `lower`, a lowercase literal of letters and '-', ignoring the case of
// `s`'s letters; 8 (or 4) bytes a step, the last step overlapping. (c | 0x20) folds only
// 'A'-'Z' onto letters, and maps no byte other than '-' and CR onto '-'; callers pass
// tokens or text lines, which hold no CR.
bool lower_equals(std::string_view s, std::string_view lower) {
  const size_t n = s.size();
  if (n != lower.size()) return false;
  const char* a = s.data();
  const char* b = lower.data();
  if (n >= 8) {
    constexpr uint64_t kCase = 0x2020202020202020u;
    for (size_t i = 0; i + 8 < n; i += 8) {
      if ((load8(a + i) | kCase) != load8(b + i)) return false;
    }
    return (load8(a + n - 8) | kCase) == load8(b + n - 8);
  }
  if (n >= 4) {
    constexpr uint32_t kCase = 0x20202020u;
    return (load4(a) | kCase) == load4(b) && (load4(a + n - 4) | kCase) == load4(b + n - 4);
  }
  for (size_t i = 0; i < n; ++i) {
    if ((static_cast<unsigned char>(a[i]) | 0x20) != static_cast<unsigned char>(b[i])) {
      return false;
    }
  }
  return true;
}

// The first control byte (below 0x20, or 0x7f) in [p, end), or `end`: 16 bytes a step
// where SSE2 is there (every x86-64), as field values are most of a head's bytes.
const char* find_control(const char* p, const char* end) {
#if defined(__SSE2__)
  const __m128i k1f = _mm_set1_epi8(0x1f);
  const __m128i k7f = _mm_set1_epi8(0x7f);
  while (end - p >= 16) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i low = _mm_cmpeq_epi8(_mm_min_epu8(x, k1f), x);  // x <= 0x1f, unsigned
    const int mask = _mm_movemask_epi8(_mm_or_si128(low, _mm_cmpeq_epi8(x, k7f)));
    if (mask != 0) return p + __builtin_ctz(static_cast<unsigned>(mask));
    p += 16;
  }
#endif
  for (; p < end; ++p) {
    const unsigned char c = static_cast<unsigned char>(*p);
    if (c < 0x20 || c == 0x7f) return p;
  }
  return end;
}

// The end of the text line starting at `p` (at its CR, which an LF follows), or nullptr
// when the line has a byte outside kText or does not end with CRLF before `end`.
const char* text_line_end(const char* p, const char* end) {
  while (true) {
    p = find_control(p, end);
    if (p == end) return nullptr;
    if (*p != '\t') return *p == '\r' && end - p >= 2 && p[1] == '\n' ? p : nullptr;
    ++p;
  }
}

// Reads bytes of `table` from `p`, returns where they stop.
const char* span(const char* p, const char* end, const std::array<bool, 256>& table) {
  while (p < end && table[static_cast<unsigned char>(*p)]) ++p;
  return p;
}

// Where the field name starting at `p` stops (kToken bytes): 16 bytes a step while they
// are letters, digits and '-', as nearly all names are; other bytes go through `span`.
const char* name_end(const char* p, const char* end) {
#if defined(__SSE2__)
  const __m128i kA = _mm_set1_epi8('a'), k25 = _mm_set1_epi8(25);
  const __m128i k0 = _mm_set1_epi8('0'), k9 = _mm_set1_epi8(9);
  const __m128i kDash = _mm_set1_epi8('-'), kCase = _mm_set1_epi8(0x20);
  while (end - p >= 16) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    // Unsigned x - lo <= n as min(x - lo, n) == x - lo.
    const __m128i letter = _mm_sub_epi8(_mm_or_si128(x, kCase), kA);
    const __m128i digit = _mm_sub_epi8(x, k0);
    const __m128i good =
        _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(_mm_min_epu8(letter, k25), letter),
                                  _mm_cmpeq_epi8(_mm_min_epu8(digit, k9), digit)),
                     _mm_cmpeq_epi8(x, kDash));
    const unsigned bad = ~static_cast<unsigned>(_mm_movemask_epi8(good)) & 0xffffu;
    if (bad != 0) return span(p + __builtin_ctz(bad), end, kToken);
    p += 16;
  }
#endif
  return span(p, end, kToken);
}

// "HTTP/1.0" or "HTTP/1.1" at p: the version (10, 11), else 0.
unsigned version_at(const char* p, const char* end) {
  if (end - p < 8 || std::memcmp(p, "HTTP/1.", 7) != 0) return 0;
  if (p[7] == '1') return 11;
  if (p[7] == '0') return 10;
  return 0;
}

// Where the head ends (past its blank line), or 0 when there is none yet. Then `unsure`
// when the limit passed, or a byte no plain head has came first (bad input is not waited
// on); the structure of a found head is checked by the parse that follows.
size_t head_end(std::string_view in, size_t max_bytes, bool& unsure) {
  const std::string_view window = in.substr(0, max_bytes);
  const size_t blank = window.find("\r\n\r\n");
  unsure = false;
  if (blank != std::string_view::npos) return blank + 4;
  unsure = window.size() == max_bytes;
  for (size_t i = 0; i < window.size() && !unsure; ++i) {
    const unsigned char c = static_cast<unsigned char>(window[i]);
    unsure = c == '\n' ? i == 0 || window[i - 1] != '\r' : c != '\r' && !kText[c];
  }
  return 0;
}

// Clears `out` for a new head (the field array is overwritten as it fills, not cleared).
void reset(ParsedHead& out) {
  out.method = {};
  out.target = {};
  out.status = 0;
  out.version = 11;
  out.field_count = 0;
  out.content_length = 0;
  out.keep_alive = true;
  out.size = 0;
}

// The fields from `p` through the blank line, which must come before `end`; the head's size
// counted from `begin`. False when outside the subset or not whole before `end`.
bool parse_fields(const char* begin, const char* p, const char* end, bool response,
                  ParsedHead& out) {
  bool close = false, keep = false, length_seen = false;
  while (true) {
    if (end - p < 2) return false;
    if (p[0] == '\r' && p[1] == '\n') {
      p += 2;
      break;
    }
    const char* n_end = name_end(p, end);
    if (n_end == p || n_end >= end || *n_end != ':') return false;
    const std::string_view name(p, static_cast<size_t>(n_end - p));
    const char* v = n_end + 1;
    while (v < end && (*v == ' ' || *v == '\t')) ++v;
    const char* v_end = text_line_end(v, end);
    if (!v_end) return false;
    const char* trimmed = v_end;
    while (trimmed > v && (trimmed[-1] == ' ' || trimmed[-1] == '\t')) --trimmed;
    const std::string_view value(v, static_cast<size_t>(trimmed - v));
    p = v_end + 2;
    if (out.field_count == ParsedHead::kMaxFields) return false;
    out.fields[out.field_count++] = HeadField{name, value};
    switch (name.size()) {
      case 7:  // Upgrade
        if (lower_equals(name, "upgrade")) return false;
        break;
      case 10:  // Connection
        if (lower_equals(name, "connection")) {
          if (lower_equals(value, "close")) {
            close = true;
          } else if (lower_equals(value, "keep-alive")) {
            keep = true;
          } else {
            return false;
          }
        }
        break;
      case 14:  // Content-Length
        if (lower_equals(name, "content-length")) {
          if (length_seen || value.empty() || value.size() > 18) return false;
          uint64_t n = 0;
          for (char c : value) {
            if (c < '0' || c > '9') return false;
            n = n * 10 + static_cast<uint64_t>(c - '0');
          }
          out.content_length = n;
          length_seen = true;
        }
        break;
      case 17:  // Transfer-Encoding
        if (lower_equals(name, "transfer-encoding")) return false;
        break;
      default:
        break;
    }
  }
  if (close && keep) return false;
  if (response && !length_seen) return false;  // chunked or delimited by the close
  out.keep_alive = out.version == 11 ? !close : keep;
  out.size = static_cast<size_t>(p - begin);
  return true;
}

// What a head the one-pass parse did not take is: kNeedMore while no blank line came and
// nothing outside the subset did either, else kUnsure (a whole head it did not take is
// outside the subset, as the parse and this agree on where a head ends).
HeadParse verdict_without_head(std::string_view in, size_t max_bytes) {
  bool unsure = false;
  const size_t size = head_end(in, max_bytes, unsure);
  return size == 0 && !unsure ? HeadParse::kNeedMore : HeadParse::kUnsure;
}

}  // namespace

// Both parse in one pass over at most `max_bytes` of `in`, the head's end found as the
// fields are; anything but a whole plain head is then sorted out by verdict_without_head.
HeadParse parse_request_head(std::string_view in, size_t max_bytes, ParsedHead& out) {
  reset(out);
  const char* p = in.data();
  const char* end = p + std::min(in.size(), max_bytes);
  const char* m_end = span(p, end, kToken);
  if (m_end == p || m_end >= end || *m_end != ' ') return verdict_without_head(in, max_bytes);
  const char* t = m_end + 1;
  const char* t_end = span(t, end, kTarget);
  if (t_end == t || t_end >= end || *t_end != ' ') return verdict_without_head(in, max_bytes);
  const char* v = t_end + 1;
  out.version = version_at(v, end);
  if (out.version == 0 || end - v < 10 || v[8] != '\r' || v[9] != '\n' ||
      !parse_fields(p, v + 10, end, false, out)) {
    return verdict_without_head(in, max_bytes);
  }
  out.method = std::string_view(p, static_cast<size_t>(m_end - p));
  out.target = std::string_view(t, static_cast<size_t>(t_end - t));
  return HeadParse::kDone;
}

HeadParse parse_response_head(std::string_view in, size_t max_bytes, ParsedHead& out) {
  reset(out);
  const char* p = in.data();
  const char* end = p + std::min(in.size(), max_bytes);
  out.version = version_at(p, end);
  if (out.version == 0 || end - p < 13 || p[8] != ' ') return verdict_without_head(in, max_bytes);
  int status = 0;
  for (int i = 9; i < 12; ++i) {
    if (p[i] < '0' || p[i] > '9') return verdict_without_head(in, max_bytes);
    status = status * 10 + (p[i] - '0');
  }
  // 1xx, 204 and 304 have no body whatever their fields say: Beast's rules.
  if (status < 200 || status == 204 || status == 304 || p[12] != ' ') {
    return verdict_without_head(in, max_bytes);
  }
  out.status = status;
  const char* r_end = text_line_end(p + 13, end);
  if (!r_end || !parse_fields(p, r_end + 2, end, true, out)) {
    return verdict_without_head(in, max_bytes);
  }
  return HeadParse::kDone;
}

}  // namespace kvgate::io
