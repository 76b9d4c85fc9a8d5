#include "core/tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "core/common/unicode.h"

namespace kvgate::tokenizer {

using unicode::append_utf8;
using unicode::CodePoint;
using unicode::decode_utf8;
using unicode::is_white_space;

namespace {

// utf8proc_map of valid UTF-8 `s` in `form`, appended to `out`.
void map_form(NormalForm form, std::string_view s, std::string& out) {
  int opts = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::kNfc:
      opts |= UTF8PROC_COMPOSE;
      break;
    case NormalForm::kNfd:
      opts |= UTF8PROC_DECOMPOSE;
      break;
    case NormalForm::kNfkc:
      opts |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
      break;
    case NormalForm::kNfkd:
      opts |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
      break;
  }
  utf8proc_uint8_t* mapped = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                          static_cast<utf8proc_ssize_t>(s.size()), &mapped,
                                          static_cast<utf8proc_option_t>(opts));
  if (n < 0) {  // cannot happen on valid UTF-8; keep the text unchanged
    out.append(s);
    return;
  }
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> guard(mapped, &std::free);
  out.append(reinterpret_cast<const char*>(mapped), static_cast<size_t>(n));
}

}  // namespace

// Every normal form of a text is the concatenation of the normal forms of its pieces when
// each cut is right before an ASCII character: ASCII is its own normal form, has
// combining class 0 (canonical reordering stops at it) and is never the second character
// of a composition (nothing before it composes with it, and as a starter it blocks
// composition across it). So only the runs of non-ASCII characters, each with the ASCII
// character before it (which may compose with what follows), go through utf8proc.
void normalize_form(NormalForm form, std::string_view s, std::string& out) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t at = 0;  // s[0, at) is done
  while (at < n) {
    size_t j = at;
    while (j + 8 <= n) {  // to the next non-ASCII byte, 8 bytes at a time
      uint64_t w;
      __builtin_memcpy(&w, p + j, 8);
      if (w & 0x8080808080808080ULL) break;
      j += 8;
    }
    while (j < n && p[j] < 0x80) ++j;
    if (j == n) break;
    const size_t start = j > at ? j - 1 : j;
    size_t k = j;
    while (k < n && p[k] >= 0x80) ++k;
    out.append(s.substr(at, start - at));
    map_form(form, s.substr(start, k - start), out);
    at = k;
  }
  out.append(s.substr(at));
}

void lowercase(std::string_view s, std::string& out) {
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      out.push_back(b >= 'A' && b <= 'Z' ? static_cast<char>(b + 32) : static_cast<char>(b));
      ++i;
      continue;
    }
    const CodePoint c = decode_utf8(s, i);
    i += c.len;
    if (c.cp == 0x130) {  // the one unconditional multi-character lowercase mapping
      out += "i\xCC\x87";
      continue;
    }
    append_utf8(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c.cp))));
  }
}

namespace {

void strip(std::string_view s, bool left, bool right, std::string& out) {
  size_t b = 0, e = s.size();
  if (left) {
    while (b < e) {
      const CodePoint c = decode_utf8(s, b);
      if (!is_white_space(c.cp)) break;
      b += c.len;
    }
  }
  if (right) {
    while (e > b) {
      size_t k = e - 1;
      while (k > b && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
      if (!is_white_space(decode_utf8(s, k).cp)) break;
      e = k;
    }
  }
  out.append(s.substr(b, e - b));
}

}  // namespace

Status Normalizer::normalize(std::string_view in, std::string& out, Regex::Scratch& scratch) const {
  out.clear();
  if (steps_.empty()) {
    out.append(in);
    return {};
  }
  std::string tmp;
  std::vector<Regex::Span> spans;
  for (size_t k = 0; k < steps_.size(); ++k) {
    const Step& s = steps_[k];
    // The input of step k is `in` for the first step, else the previous output (moved
    // to tmp).
    if (k > 0) {
      tmp.swap(out);
      in = tmp;
    }
    out.clear();
    switch (s.kind) {
      case kNfc:
        normalize_form(NormalForm::kNfc, in, out);
        break;
      case kNfd:
        normalize_form(NormalForm::kNfd, in, out);
        break;
      case kNfkc:
        normalize_form(NormalForm::kNfkc, in, out);
        break;
      case kNfkd:
        normalize_form(NormalForm::kNfkd, in, out);
        break;
      case kLowercase:
        lowercase(in, out);
        break;
      case kStrip:
        strip(in, s.strip_left, s.strip_right, out);
        break;
      case kPrepend:
        if (!in.empty()) out += s.content;
        out.append(in);
        break;
      case kPrecompiled:
        s.charsmap->normalize(in, out);
        break;
      case kReplace: {
        spans.clear();
        if (Status st = s.pattern->find_all(in, scratch, spans); !st) return st;
        size_t at = 0;
        for (const Regex::Span& m : spans) {
          out.append(in.substr(at, m.start - at));
          out += s.content;
          at = m.end;
        }
        out.append(in.substr(at));
        break;
      }
    }
  }
  return {};
}

size_t Normalizer::memory_bytes() const {
  size_t n = steps_.capacity() * sizeof(Step);
  for (const Step& s : steps_)
    n += s.content.capacity() + (s.pattern ? s.pattern->memory_bytes() : 0) +
         (s.charsmap ? s.charsmap->memory_bytes() : 0);
  return n;
}

std::string Normalizer::describe() const {
  if (steps_.empty()) return "none";
  std::string d;
  for (const Step& s : steps_) {
    if (!d.empty()) d += " + ";
    switch (s.kind) {
      case kNfc:
        d += "NFC";
        break;
      case kNfd:
        d += "NFD";
        break;
      case kNfkc:
        d += "NFKC";
        break;
      case kNfkd:
        d += "NFKD";
        break;
      case kLowercase:
        d += "Lowercase";
        break;
      case kStrip:
        d += "Strip";
        break;
      case kPrepend:
        d += "Prepend";
        break;
      case kReplace:
        d += "Replace";
        break;
      case kPrecompiled:
        d += "Precompiled";
        break;
    }
  }
  return d;
}

}  // namespace kvgate::tokenizer
