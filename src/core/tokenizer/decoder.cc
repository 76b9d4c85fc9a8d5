#include "core/tokenizer/decoder.h"

#include "core/common/unicode.h"
#include "core/tokenizer/byte_level.h"

namespace kvgate::tokenizer {

using unicode::CodePoint;
using unicode::decode_utf8;
using unicode::find_invalid_utf8;
using unicode::utf8_lossy;

namespace {

void byte_level(std::vector<std::string>& tokens) {
  std::string bytes;
  for (const std::string& t : tokens) {
    auto raw = byte_level_decode(t);
    bytes += raw ? *raw : t;  // a token outside the alphabet contributes its own bytes
  }
  tokens.assign(1, utf8_lossy(bytes));
}

void metaspace(std::vector<std::string>& tokens, const Decoder::Step& s) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::string& t = tokens[i];
    if (t.find(s.text) == std::string::npos) continue;
    std::string r;
    for (size_t at = 0; at < t.size();) {
      if (t.compare(at, s.text.size(), s.text) == 0) {
        if (!(i == 0 && s.drop_first)) r += ' ';
        at += s.text.size();
      } else {
        r += t[at++];
      }
    }
    t = std::move(r);
  }
}

// "<0xNN>" -> NN, or -1.
int byte_token(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  const int h = hex(t[3]), l = hex(t[4]);
  return h < 0 || l < 0 ? -1 : h * 16 + l;
}

void byte_fallback(std::vector<std::string>& tokens) {
  std::vector<std::string> out;
  std::string pending;
  auto flush = [&] {
    if (pending.empty()) return;
    if (find_invalid_utf8(pending) == std::string::npos) {
      out.push_back(pending);
    } else {
      for (size_t k = 0; k < pending.size(); ++k) out.emplace_back("\xEF\xBF\xBD");
    }
    pending.clear();
  };
  for (std::string& t : tokens) {
    const int b = byte_token(t);
    if (b >= 0) {
      pending.push_back(static_cast<char>(b));
      continue;
    }
    flush();
    out.push_back(std::move(t));
  }
  flush();
  tokens.swap(out);
}

void strip(std::vector<std::string>& tokens, const Decoder::Step& s) {
  const char32_t content = decode_utf8(s.text, 0).cp;
  for (std::string& t : tokens) {
    std::vector<std::pair<size_t, char32_t>> chars;  // byte offset, code point
    for (size_t i = 0; i < t.size();) {
      const CodePoint c = decode_utf8(t, i);
      chars.push_back({i, c.cp});
      i += c.len;
    }
    size_t start_cut = 0;
    for (size_t i = 0; i < s.start && i < chars.size() && chars[i].second == content; ++i)
      start_cut = i + 1;
    size_t stop_cut = chars.size();
    for (size_t i = 0; i < s.stop && i < chars.size(); ++i) {
      const size_t index = chars.size() - i - 1;
      if (chars[index].second != content) break;
      stop_cut = index;
    }
    if (stop_cut < start_cut) stop_cut = start_cut;
    const size_t b = start_cut < chars.size() ? chars[start_cut].first : t.size();
    const size_t e = stop_cut < chars.size() ? chars[stop_cut].first : t.size();
    t = t.substr(b, e - b);
  }
}

}  // namespace

Result<std::string> Decoder::decode(std::vector<std::string> tokens,
                                    Regex::Scratch& scratch) const {
  if (!present_) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i) out += ' ';
      out += tokens[i];
    }
    return out;
  }
  std::vector<Regex::Span> spans;
  for (const Step& s : steps_) {
    switch (s.kind) {
      case kByteLevel:
        byte_level(tokens);
        break;
      case kMetaspace:
        metaspace(tokens, s);
        break;
      case kByteFallback:
        byte_fallback(tokens);
        break;
      case kFuse: {
        std::string all;
        for (const std::string& t : tokens) all += t;
        tokens.assign(1, std::move(all));
        break;
      }
      case kStrip:
        strip(tokens, s);
        break;
      case kBpeSuffix:
        for (size_t i = 0; i < tokens.size(); ++i) {
          std::string& t = tokens[i];
          const std::string with = i + 1 == tokens.size() ? "" : " ";
          std::string r;
          for (size_t at = 0; at < t.size();) {
            if (!s.text.empty() && t.compare(at, s.text.size(), s.text) == 0) {
              r += with;
              at += s.text.size();
            } else {
              r += t[at++];
            }
          }
          t = std::move(r);
        }
        break;
      case kReplace:
        for (std::string& t : tokens) {
          spans.clear();
          if (Status st = s.pattern->find_all(t, scratch, spans); !st) return Error(st.error());
          if (spans.empty()) continue;
          std::string r;
          size_t at = 0;
          for (const Regex::Span& m : spans) {
            r.append(t, at, m.start - at);
            r += s.text;
            at = m.end;
          }
          r.append(t, at, std::string::npos);
          t = std::move(r);
        }
        break;
    }
  }
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

size_t Decoder::memory_bytes() const {
  size_t n = steps_.capacity() * sizeof(Step);
  for (const Step& s : steps_) n += s.text.capacity() + (s.pattern ? s.pattern->memory_bytes() : 0);
  return n;
}

std::string Decoder::describe() const {
  if (!present_) return "none (tokens joined with spaces)";
  if (steps_.empty()) return "empty Sequence";
  static constexpr const char* kNames[] = {"ByteLevel", "Metaspace", "ByteFallback", "Fuse",
                                           "Strip",     "Replace",   "BPEDecoder"};
  std::string d;
  for (const Step& s : steps_) {
    if (!d.empty()) d += " + ";
    d += kNames[s.kind];
  }
  return d;
}

}  // namespace kvgate::tokenizer
