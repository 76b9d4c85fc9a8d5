#include "core/tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "core/tokenizer/unicode.h"

namespace kvgate::tokenizer {

void normalize_form(NormalForm form, std::string_view s, std::string& out) {
  bool ascii = true;
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) {
      ascii = false;
      break;
    }
  }
  if (ascii) {  // every normal form of ASCII is itself
    out.append(s);
    return;
  }
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
    }
  }
  return d;
}

}  // namespace kvgate::tokenizer
