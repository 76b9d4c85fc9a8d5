#include "io/http_head.h"

#include <cstring>

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

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

// True when [p, end) is field-value text (kText): written as a reduction the compiler
// vectorizes, as values are most of a head's bytes.
bool is_text(const char* p, const char* end) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  const size_t n = static_cast<size_t>(end - p);
  unsigned char bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = u[i];
    bad |= static_cast<unsigned char>((c < 0x20) & (c != '\t')) |
           static_cast<unsigned char>(c == 0x7f);
  }
  return bad == 0;
}

// The end of the text line starting at `p` (at its CR, which an LF follows), or nullptr
// when the line has a byte outside kText or does not end with CRLF.
const char* text_line_end(const char* p, const char* end) {
  const void* cr = std::memchr(p, '\r', static_cast<size_t>(end - p));
  if (!cr) return nullptr;
  const char* r = static_cast<const char*>(cr);
  if (end - r < 2 || r[1] != '\n' || !is_text(p, r)) return nullptr;
  return r;
}

// Reads bytes of `table` from `p`, returns where they stop.
const char* span(const char* p, const char* end, const std::array<bool, 256>& table) {
  while (p < end && table[static_cast<unsigned char>(*p)]) ++p;
  return p;
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

// The fields from `p` to the blank line; false when outside the subset.
bool parse_fields(const char* p, const char* end, bool response, ParsedHead& out) {
  bool close = false, keep = false, length_seen = false;
  while (true) {
    if (end - p < 2) return false;
    if (p[0] == '\r' && p[1] == '\n') {
      p += 2;
      break;
    }
    const char* name_end = span(p, end, kToken);
    if (name_end == p || name_end >= end || *name_end != ':') return false;
    const std::string_view name(p, static_cast<size_t>(name_end - p));
    const char* v = name_end + 1;
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
        if (iequals(name, "upgrade")) return false;
        break;
      case 10:  // Connection
        if (iequals(name, "connection")) {
          if (iequals(value, "close")) {
            close = true;
          } else if (iequals(value, "keep-alive")) {
            keep = true;
          } else {
            return false;
          }
        }
        break;
      case 14:  // Content-Length
        if (iequals(name, "content-length")) {
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
        if (iequals(name, "transfer-encoding")) return false;
        break;
      default:
        break;
    }
  }
  if (close && keep) return false;
  if (response && !length_seen) return false;  // chunked or delimited by the close
  out.keep_alive = out.version == 11 ? !close : keep;
  return p == end;
}

// The head's bytes when `in` starts with a whole one within `max_bytes` (then `out` is
// reset for it, its size set); else empty, with `verdict` kNeedMore or kUnsure.
std::string_view whole_head(std::string_view in, size_t max_bytes, ParsedHead& out,
                            HeadParse& verdict) {
  bool unsure = false;
  const size_t size = head_end(in, max_bytes, unsure);
  if (size == 0) {
    verdict = unsure ? HeadParse::kUnsure : HeadParse::kNeedMore;
    return {};
  }
  reset(out);
  out.size = size;
  return in.substr(0, size);
}

}  // namespace

HeadParse parse_request_head(std::string_view in, size_t max_bytes, ParsedHead& out) {
  HeadParse verdict = HeadParse::kDone;
  const std::string_view head = whole_head(in, max_bytes, out, verdict);
  if (head.empty()) return verdict;
  const char* p = head.data();
  const char* end = p + head.size();
  const char* m_end = span(p, end, kToken);
  if (m_end == p || m_end >= end || *m_end != ' ') return HeadParse::kUnsure;
  out.method = std::string_view(p, static_cast<size_t>(m_end - p));
  const char* t = m_end + 1;
  const char* t_end = span(t, end, kTarget);
  if (t_end == t || t_end >= end || *t_end != ' ') return HeadParse::kUnsure;
  out.target = std::string_view(t, static_cast<size_t>(t_end - t));
  const char* v = t_end + 1;
  out.version = version_at(v, end);
  if (out.version == 0 || end - v < 10 || v[8] != '\r' || v[9] != '\n') return HeadParse::kUnsure;
  if (!parse_fields(v + 10, end, false, out)) return HeadParse::kUnsure;
  return HeadParse::kDone;
}

HeadParse parse_response_head(std::string_view in, size_t max_bytes, ParsedHead& out) {
  HeadParse verdict = HeadParse::kDone;
  const std::string_view head = whole_head(in, max_bytes, out, verdict);
  if (head.empty()) return verdict;
  const char* p = head.data();
  const char* end = p + head.size();
  out.version = version_at(p, end);
  if (out.version == 0 || end - p < 13 || p[8] != ' ') return HeadParse::kUnsure;
  int status = 0;
  for (int i = 9; i < 12; ++i) {
    if (p[i] < '0' || p[i] > '9') return HeadParse::kUnsure;
    status = status * 10 + (p[i] - '0');
  }
  // 1xx, 204 and 304 have no body whatever their fields say: Beast's rules.
  if (status < 200 || status == 204 || status == 304 || p[12] != ' ') return HeadParse::kUnsure;
  out.status = status;
  const char* r_end = text_line_end(p + 13, end);
  if (!r_end) return HeadParse::kUnsure;
  if (!parse_fields(r_end + 2, end, true, out)) return HeadParse::kUnsure;
  return HeadParse::kDone;
}

}  // namespace kvgate::io
