#include "core/tokenizer/precompiled.h"

#include <utf8proc.h>

#include <cstring>

#include "core/common/unicode.h"

namespace kvgate::tokenizer {

using unicode::decode_utf8;
using unicode::find_invalid_utf8;

namespace {

// Standard base64 (RFC 4648 alphabet), with or without '=' padding; nullopt when `s` is
// not base64.
std::optional<std::string> decode_base64(std::string_view s) {
  if (!s.empty() && s.size() % 4 == 0 && s.back() == '=') {  // padded: one or two '='
    s.remove_suffix(1);
    if (s.back() == '=') s.remove_suffix(1);
  }
  if (s.size() % 4 == 1) return std::nullopt;
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  out.reserve(s.size() / 4 * 3 + 2);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    const int v = value(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

uint32_t read_le32(const char* p) {
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  return static_cast<uint32_t>(b[0]) | static_cast<uint32_t>(b[1]) << 8 |
         static_cast<uint32_t>(b[2]) << 16 | static_cast<uint32_t>(b[3]) << 24;
}

// A unit of the double array: bits 0-7 the label of the edge into this node (bit 31 set
// on value units, so no label equals them), bit 8 "has a value child", bits 10-31 the
// offset of the children (shifted 8 more when bit 9 is set); a value unit holds the
// value in bits 0-30.
constexpr uint32_t label_of(uint32_t u) { return u & (0x80000000u | 0xFFu); }
constexpr bool has_value(uint32_t u) { return (u >> 8) & 1; }
constexpr uint32_t children_of(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }
constexpr uint32_t value_of(uint32_t u) { return u & 0x7FFFFFFFu; }

// Bytes of the UTF-8 character whose first byte is `b`.
constexpr size_t utf8_len(unsigned char b) {
  return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
}

// End of the extended grapheme cluster that starts at `i` (a character boundary).
size_t grapheme_end(std::string_view s, size_t i) {
  const auto first = decode_utf8(s, i);
  char32_t prev = first.cp;
  size_t j = i + first.len;
  utf8proc_int32_t state = 0;  // reset at each break, which utf8proc allows
  while (j < s.size()) {
    const auto c = decode_utf8(s, j);
    if (utf8proc_grapheme_break_stateful(static_cast<utf8proc_int32_t>(prev),
                                         static_cast<utf8proc_int32_t>(c.cp), &state))
      break;
    prev = c.cp;
    j += c.len;
  }
  return j;
}

}  // namespace

Result<PrecompiledCharsMap> PrecompiledCharsMap::parse(std::string_view base64) {
  std::optional<std::string> bytes = decode_base64(base64);
  if (!bytes) return Error("not base64");
  return from_bytes(*bytes);
}

Result<PrecompiledCharsMap> PrecompiledCharsMap::from_bytes(std::string_view bytes) {
  if (bytes.size() < 4)
    return Error(std::to_string(bytes.size()) + " bytes, fewer than the trie's 4-byte size");
  const uint32_t trie_bytes = read_le32(bytes.data());
  const size_t units = trie_bytes / 4;
  if (units > (bytes.size() - 4) / 4)
    return Error("a trie of " + std::to_string(trie_bytes) + " bytes in " +
                 std::to_string(bytes.size()) + " bytes");
  if (units == 0) return Error("an empty trie (the Hugging Face library cannot run it)");
  PrecompiledCharsMap m;
  m.units_.resize(units);
  for (size_t k = 0; k < units; ++k) m.units_[k] = read_le32(bytes.data() + 4 + 4 * k);
  // As the library: what follows the whole units (a size not a multiple of 4 leaves bytes
  // of the trie's region there) is the texts.
  m.texts_.assign(bytes.substr(4 + 4 * units));
  if (size_t bad = find_invalid_utf8(m.texts_); bad != std::string::npos)
    return Error("its replacement texts are not UTF-8 (byte " + std::to_string(bad) + ")");
  m.ascii_[0] = kNone;
  for (unsigned b = 1; b < 128; ++b) {
    const auto c = static_cast<unsigned char>(b);
    m.ascii_[b] = m.find(&c, 1);
  }
  return m;
}

uint32_t PrecompiledCharsMap::find(const unsigned char* key, size_t len) const {
  const uint32_t* a = units_.data();
  const size_t n = units_.size();
  size_t pos = children_of(a[0]);
  for (size_t i = 0; i < len && key[i] != 0; ++i) {
    const uint32_t c = key[i];
    pos ^= c;
    if (pos >= n) return kNone;
    const uint32_t u = a[pos];
    if (label_of(u) != c) return kNone;
    pos ^= children_of(u);
    if (has_value(u)) {
      if (pos >= n) return kNone;
      // The first value on the path is the shortest key: the one the library takes.
      const uint32_t v = value_of(a[pos]);
      const bool at_char =
          v == texts_.size() ||
          (v < texts_.size() && (static_cast<unsigned char>(texts_[v]) & 0xC0) != 0x80);
      return at_char ? v : kNone;
    }
  }
  return kNone;
}

std::string_view PrecompiledCharsMap::text_at(uint32_t offset) const {
  const char* p = texts_.data() + offset;
  const size_t rest = texts_.size() - offset;
  const void* nul = std::memchr(p, 0, rest);
  return {p, nul ? static_cast<size_t>(static_cast<const char*>(nul) - p) : rest};
}

std::optional<std::string_view> PrecompiledCharsMap::lookup(std::string_view key) const {
  const uint32_t v = find(reinterpret_cast<const unsigned char*>(key.data()), key.size());
  if (v == kNone) return std::nullopt;
  return text_at(v);
}

void PrecompiledCharsMap::append_grapheme(std::string_view g, std::string& out) const {
  const auto* p = reinterpret_cast<const unsigned char*>(g.data());
  size_t k = 0;
  if (g.size() < 6) {
    if (const uint32_t v = find(p, g.size()); v != kNone) {
      out += text_at(v);
      return;
    }
    // The first character's prefixes are prefixes of g: none is a key either.
    k = utf8_len(p[0]);
    out.append(g.substr(0, k));
  }
  while (k < g.size()) {
    const size_t len = utf8_len(p[k]);
    if (const uint32_t v = find(p + k, len); v != kNone) {
      out += text_at(v);
    } else {
      out.append(g.substr(k, len));
    }
    k += len;
  }
}

// An ASCII character followed by another ASCII character (or the end) is a grapheme of
// its own, except \r before \n: no rule joins two ASCII characters but GB3 (CR x LF), and
// what extends a cluster (Extend, ZWJ, SpacingMark) is never ASCII. So runs of ASCII take
// the table and are copied in bulk; the rest goes grapheme by grapheme.
void PrecompiledCharsMap::normalize(std::string_view in, std::string& out) const {
  const auto* p = reinterpret_cast<const unsigned char*>(in.data());
  const size_t n = in.size();
  out.reserve(out.size() + n);
  size_t i = 0;
  size_t copied = 0;  // in[copied, i) is unchanged text not yet appended
  while (i < n) {
    const unsigned b = p[i];
    if (b < 0x80 && (i + 1 == n || (p[i + 1] < 0x80 && !(b == '\r' && p[i + 1] == '\n')))) {
      if (ascii_[b] != kNone) {
        out.append(in.substr(copied, i - copied));
        out += text_at(ascii_[b]);
        copied = i + 1;
      }
      ++i;
      continue;
    }
    out.append(in.substr(copied, i - copied));
    const size_t end = grapheme_end(in, i);
    append_grapheme(in.substr(i, end - i), out);
    copied = i = end;
  }
  out.append(in.substr(copied));
}

}  // namespace kvgate::tokenizer
