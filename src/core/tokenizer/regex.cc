#include "core/tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <bitset>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>

#include "core/common/unicode.h"

namespace kvgate::tokenizer {

using unicode::append_utf8;
using unicode::CodePoint;
using unicode::decode_utf8;

namespace {

// Code points a newer Unicode assigned that PCRE2's tables (Debian's 10.42: Unicode 14)
// still call unassigned, by general category ("Lo", and "L" for the group): the
// Hugging Face library's Oniguruma knows them (Unicode 15), and so does utf8proc.
// \p{...} of a general category is widened by these code points. Computed once.
class NewerAssignments {
 public:
  static const NewerAssignments& get() {
    static const NewerAssignments n;
    return n;
  }
  // Class body ("\x{..}-\x{..}...") of the extra code points of a category, or "".
  const std::string& extra(const std::string& category) const {
    static const std::string kNone;
    auto it = extra_.find(category);
    return it == extra_.end() ? kNone : it->second;
  }

 private:
  NewerAssignments() {
    std::string all;
    for (char32_t cp = 0x80; cp <= 0x10FFFF; ++cp) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      if (utf8proc_category(static_cast<utf8proc_int32_t>(cp)) != UTF8PROC_CATEGORY_CN)
        append_utf8(all, cp);
    }
    int err = 0;
    PCRE2_SIZE at = 0;
    pcre2_code* code =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(R"(\p{Cn})"), PCRE2_ZERO_TERMINATED,
                      PCRE2_UTF | PCRE2_UCP, &err, &at, nullptr);
    if (!code) return;
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
    std::map<std::string, std::vector<char32_t>> cps;
    size_t from = 0;
    while (from < all.size() &&
           pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(all.data()), all.size(), from,
                       PCRE2_NO_UTF_CHECK, md, nullptr) > 0) {
      const size_t s = pcre2_get_ovector_pointer(md)[0];
      const CodePoint c = decode_utf8(all, s);
      const char* name =
          utf8proc_category_string(static_cast<utf8proc_int32_t>(c.cp));  // e.g. "Lo"
      cps[name].push_back(c.cp);
      cps[std::string(1, name[0])].push_back(c.cp);
      from = s + c.len;
    }
    pcre2_match_data_free(md);
    pcre2_code_free(code);
    char buf[48];
    for (auto& [cat, list] : cps) {
      std::string& body = extra_[cat];
      for (size_t i = 0; i < list.size();) {
        size_t j = i;
        while (j + 1 < list.size() && list[j + 1] == list[j] + 1) ++j;
        if (j == i) {
          std::snprintf(buf, sizeof buf, "\\x{%X}", static_cast<unsigned>(list[i]));
        } else {
          std::snprintf(buf, sizeof buf, "\\x{%X}-\\x{%X}", static_cast<unsigned>(list[i]),
                        static_cast<unsigned>(list[j]));
        }
        body += buf;
        i = j + 1;
      }
    }
  }
  std::map<std::string, std::string> extra_;
};

bool is_general_category(std::string_view n) {
  static constexpr std::string_view kNames[] = {
      "L",  "Lu", "Ll", "Lt", "Lm", "Lo", "M", "Mn", "Mc", "Me", "N",  "Nd", "Nl", "No", "P", "Pc",
      "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "S", "Sm", "Sc", "Sk", "So", "Z",  "Zs", "Zl", "Zp"};
  for (std::string_view k : kNames)
    if (n == k) return true;
  return false;
}

// The PCRE2 class body for \p{name} (widened by the newer assignments).
std::string property_body(const std::string& name) {
  return "\\p{" + name + "}" + NewerAssignments::get().extra(name);
}

// Unicode Word (UTS #18, what Oniguruma's \w is): Alphabetic, marks, Nd, Pc, Join_Control.
// Alphabetic is L, Nl and Other_Alphabetic; the Other_Alphabetic characters outside the
// marks are the circled and squared Latin letters listed here.
std::string word_class() {
  return property_body("L") + property_body("M") + property_body("Nd") + property_body("Nl") +
         property_body("Pc") +
         R"(\x{200C}\x{200D}\x{24B6}-\x{24E9}\x{1F130}-\x{1F149}\x{1F150}-\x{1F169})"
         R"(\x{1F170}-\x{1F189})";
}

// Oniguruma's \s: the White_Space property. PCRE2's \s differs (it lacks U+0085 and has
// U+180E, a space before Unicode 6.3).
constexpr std::string_view kWhiteSpace =
    R"(\t\n\x{0B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F})"
    R"(\x{3000})";

bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

}  // namespace

Result<std::string> oniguruma_to_pcre2(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 16);
  bool in_class = false;
  size_t class_start = 0;
  auto refuse = [&](size_t at, const std::string& what) {
    return Error("regex " + std::string(p) + ": " + what + " at offset " + std::to_string(at) +
                 " (PCRE2 cannot run it with Oniguruma's meaning)");
  };
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\') {
      if (i + 1 >= p.size()) return Error("regex " + std::string(p) + ": trailing backslash");
      const char n = p[i + 1];
      ++i;
      switch (n) {
        case 's':
          out += in_class ? std::string(kWhiteSpace) : "[" + std::string(kWhiteSpace) + "]";
          continue;
        case 'w':
          out += in_class ? word_class() : "[" + word_class() + "]";
          continue;
        case 'p':
        case 'P': {
          // \pL, \p{Lu}, \p{^L}, \P{L}: general categories get the newer assignments.
          std::string name;
          size_t end = i;
          if (i + 1 < p.size() && p[i + 1] == '{') {
            const size_t close = p.find('}', i + 2);
            if (close == std::string_view::npos) return refuse(i - 1, "unterminated \\p{");
            name = std::string(p.substr(i + 2, close - i - 2));
            end = close;
          } else if (i + 1 < p.size()) {
            name = std::string(1, p[i + 1]);
            end = i + 1;
          }
          bool negated = n == 'P';
          if (!name.empty() && name[0] == '^') {
            negated = !negated;
            name.erase(0, 1);
          }
          if (!is_general_category(name) || NewerAssignments::get().extra(name).empty()) {
            out.append(p.substr(i - 1, end - i + 2));
            i = end;
            continue;
          }
          if (negated && in_class)
            return refuse(i - 1, "a negated Unicode category inside a character class");
          out += (negated    ? "[^"
                  : in_class ? ""
                             : "[") +
                 property_body(name) + (in_class ? "" : "]");
          i = end;
          continue;
        }
        case 'h':
          out += in_class ? "0-9A-Fa-f" : "[0-9A-Fa-f]";
          continue;
        case 'S':
        case 'W':
        case 'H':
          if (in_class) return refuse(i - 1, std::string("\\") + n + " inside a character class");
          out += n == 'S'   ? "[^" + std::string(kWhiteSpace) + "]"
                 : n == 'W' ? "[^" + word_class() + "]"
                            : "[^0-9A-Fa-f]";
          continue;
        case 'u':
          if (i + 4 < p.size() && is_hex(p[i + 1]) && is_hex(p[i + 2]) && is_hex(p[i + 3]) &&
              is_hex(p[i + 4])) {
            out += "\\x{" + std::string(p.substr(i + 1, 4)) + "}";
            i += 4;
            continue;
          }
          return refuse(i - 1, "\\u without four hex digits");
        default:
          out += '\\';
          out += n;
          continue;
      }
    }
    if (in_class) {
      if (c == '[') {
        if (i + 1 < p.size() && p[i + 1] == ':') {
          const size_t close = p.find(":]", i + 2);
          if (close == std::string_view::npos) return refuse(i, "unterminated [: class");
          out.append(p.substr(i, close + 2 - i));
          i = close + 1;
          continue;
        }
        return refuse(i, "a nested character class");
      }
      if (c == '&' && i + 1 < p.size() && p[i + 1] == '&')
        return refuse(i, "a class intersection (&&)");
      if (c == ']' && i != class_start) in_class = false;
      out += c;
      continue;
    }
    if (c == '[') {
      in_class = true;
      out += c;
      size_t j = i + 1;
      if (j < p.size() && p[j] == '^') {
        out += '^';
        ++j;
      }
      class_start = j;
      i = j - 1;
      continue;
    }
    if (c == '(' && i + 1 < p.size() && p[i + 1] == '?') {
      size_t j = i + 2;
      std::string opts;
      while (j < p.size() && p[j] != '\0' && std::strchr("imx-", p[j]) != nullptr) {
        opts += p[j] == 'm' ? 's' : p[j];
        ++j;
      }
      if (!opts.empty() && j < p.size() && (p[j] == ')' || p[j] == ':')) {
        out += "(?" + opts;
        i = j - 1;
        continue;
      }
    }
    out += c;
  }
  if (in_class) return Error("regex " + std::string(p) + ": unterminated character class");
  return out;
}

struct Regex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  // The same expression restricted to ASCII subjects (ascii_variant), compiled without UTF
  // and Unicode properties and JIT-compiled; null when it could not be derived.
  pcre2_code* ascii = nullptr;
  // `code` and `ascii` wrapped as (?:(?>P)(?C1))++ (batch_pattern), or null: one call
  // finds a run of adjacent matches, reported one by one through the callout.
  pcre2_code* batch = nullptr;
  pcre2_code* ascii_batch = nullptr;
  ~Code() {
    for (pcre2_code* c : {code, ascii, batch, ascii_batch}) pcre2_code_free(c);
  }
};

namespace {

constexpr uint32_t kFlags = PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE;

// The ASCII characters a single-character item (a class "[...]" or an escape such as
// "\p{L}"), as PCRE2 compiles it with kFlags, matches: asked of PCRE2 itself, one
// character at a time. Nullopt when the item does not compile alone.
std::optional<std::bitset<128>> ascii_members(std::string_view item) {
  int err = 0;
  PCRE2_SIZE at = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(item.data()), item.size(),
                                   kFlags | PCRE2_ANCHORED, &err, &at, nullptr);
  if (!code) return std::nullopt;
  pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
  std::bitset<128> members;
  bool single = true;
  for (unsigned c = 0; c < 128; ++c) {
    const char ch = static_cast<char>(c);
    const int rc =
        pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(&ch), 1, 0, PCRE2_ANCHORED, md, nullptr);
    if (rc > 0) {
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      single = single && ov[0] == 0 && ov[1] == 1;
      members.set(c);
    }
  }
  pcre2_match_data_free(md);
  pcre2_code_free(code);
  if (!single) return std::nullopt;
  return members;
}

// An explicit class of `members` for a pattern compiled without UTF; a class of the bytes
// 0x80-0xFF (which an ASCII subject never has) when empty, so that quantifiers after it
// keep their meaning.
std::string explicit_class(const std::bitset<128>& members) {
  if (members.none()) return R"([^\x00-\x7F])";
  std::string out = "[";
  char buf[16];
  for (unsigned c = 0; c < 128; ++c) {
    if (!members.test(c)) continue;
    unsigned e = c;
    while (e + 1 < 128 && members.test(e + 1)) ++e;
    std::snprintf(buf, sizeof buf, "\\x%02X", c);
    out += buf;
    if (e > c) {
      std::snprintf(buf, sizeof buf, "-\\x%02X", e);
      out += buf;
    }
    c = e;
  }
  return out + "]";
}

bool is_ascii(std::string_view s) {
  uint64_t seen = 0;
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    seen |= w;
  }
  for (; i < s.size(); ++i) seen |= static_cast<unsigned char>(s[i]);
  return (seen & 0x8080808080808080ULL) == 0;
}

// Matches P runs through PCRE2 one call per match, and a call costs about as much as the
// matching itself on short words. (?:(?>P)(?C1))++ at a position where P matches takes P's
// first match there (the atomic group commits to it, as a search for P would), then P's
// match at the end of that one, and so on while P matches right there; the callout reports
// each end. That is exactly the sequence of matches find_all's search for P would find
// until the first gap, provided P cannot match the empty string (then the search skips a
// character; the callout aborts the call on an empty match), and has no construct whose meaning
// depends on where the search started (\G), on a reported start (\K), callouts or verbs of its own.
std::optional<std::string> batch_pattern(std::string_view p, const pcre2_code* compiled) {
  uint32_t min_length = 0;
  pcre2_pattern_info(compiled, PCRE2_INFO_MINLENGTH, &min_length);
  if (min_length == 0) return std::nullopt;
  for (std::string_view bad : {"\\G", "\\K", "(?C", "(*"})
    if (p.find(bad) != std::string_view::npos) return std::nullopt;
  return "(?:(?>" + std::string(p) + ")(?C1))++";
}

pcre2_code* compile_jit(std::string_view pattern, uint32_t flags) {
  int err = 0;
  PCRE2_SIZE at = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   flags, &err, &at, nullptr);
  if (code && pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) != 0) {
    pcre2_code_free(code);
    return nullptr;
  }
  return code;
}

pcre2_code* compile_batch(std::string_view pattern, const pcre2_code* compiled, uint32_t flags) {
  if (!compiled) return nullptr;
  auto b = batch_pattern(pattern, compiled);
  return b ? compile_jit(*b, flags) : nullptr;
}

// The state of one batched call: where the next reported match starts.
struct Batch {
  std::vector<Regex::Span>* out;
  size_t prev_end;
  bool first;
};

int on_match(pcre2_callout_block* cb, void* data) {
  auto* b = static_cast<Batch*>(data);
  const size_t start = b->first ? cb->start_match : b->prev_end;
  // An empty match: PCRE2's minimum length is only a bound (lookarounds alone have one of
  // 1), so the guarantee is checked here. Abort; find_all continues one match per call.
  if (cb->current_position == start) return PCRE2_ERROR_CALLOUT;
  b->out->push_back({start, cb->current_position});
  b->prev_end = cb->current_position;
  b->first = false;
  return 0;
}

// The end of the class that opens at p[i] == '[' (one past its ']'), or npos.
size_t class_end(std::string_view p, size_t i) {
  size_t j = i + 1;
  if (j < p.size() && p[j] == '^') ++j;
  if (j < p.size() && p[j] == ']') ++j;  // a leading ']' is a member
  while (j < p.size()) {
    if (p[j] == '\\') {
      j += 2;
    } else if (p[j] == '[' && j + 1 < p.size() && p[j + 1] == ':') {
      const size_t close = p.find(":]", j + 2);
      if (close == std::string_view::npos) return std::string_view::npos;
      j = close + 2;
    } else if (p[j] == ']') {
      return j + 1;
    } else {
      ++j;
    }
  }
  return std::string_view::npos;
}

}  // namespace

// A pattern that, compiled without UTF and Unicode properties, matches an ASCII subject
// exactly where `translated` (compiled with kFlags) does: every class and class escape is
// replaced by the explicit set of its ASCII members (PCRE2 decides membership, so the
// tables are PCRE2's own), a non-ASCII literal by a class no ASCII character is in; the
// rest (groups, lookarounds, quantifiers, alternation, anchors, ASCII literals) means the
// same on ASCII text in both modes. Nullopt for anything outside that subset: case-
// insensitive patterns with classes (a class's case folding depends on the scope),
// extended syntax, verbs, \Q..\E, \b and other escapes with a mode-dependent meaning.
std::optional<std::string> ascii_variant(std::string_view p) {
  const bool caseless = p.find("(?i") != std::string_view::npos;
  std::string out;
  out.reserve(p.size());
  for (size_t i = 0; i < p.size();) {
    const auto c = static_cast<unsigned char>(p[i]);
    if (c == '[') {
      if (caseless) return std::nullopt;
      const size_t end = class_end(p, i);
      if (end == std::string_view::npos) return std::nullopt;
      auto m = ascii_members(p.substr(i, end - i));
      if (!m) return std::nullopt;
      out += explicit_class(*m);
      i = end;
      continue;
    }
    if (c == '\\') {
      if (i + 1 >= p.size()) return std::nullopt;
      const char n = p[i + 1];
      if (n == 'p' || n == 'P' || n == 'd' || n == 'D' || n == 's' || n == 'S' || n == 'w' ||
          n == 'W') {
        if (caseless) return std::nullopt;
        size_t end = i + 2;
        if (n == 'p' || n == 'P') {
          if (end >= p.size()) return std::nullopt;
          if (p[end] == '{') {
            end = p.find('}', end);
            if (end == std::string_view::npos) return std::nullopt;
          }
          ++end;
        }
        auto m = ascii_members(p.substr(i, end - i));
        if (!m) return std::nullopt;
        out += explicit_class(*m);
        i = end;
        continue;
      }
      if (n == 'x') {  // \xHH or \x{H...}: an ASCII literal or nothing
        size_t end = i + 2;
        std::string hex;
        if (end < p.size() && p[end] == '{') {
          const size_t close = p.find('}', end);
          if (close == std::string_view::npos) return std::nullopt;
          hex = std::string(p.substr(end + 1, close - end - 1));
          end = close + 1;
        } else {
          while (end < p.size() && end < i + 4 && std::isxdigit(static_cast<unsigned char>(p[end])))
            hex += p[end++];
        }
        if (hex.empty() || hex.size() > 6) return std::nullopt;
        const unsigned long v = std::stoul(hex, nullptr, 16);
        if (v < 0x80) {
          char buf[16];
          std::snprintf(buf, sizeof buf, "\\x%02lX", v);
          out += buf;
        } else {
          out += R"([^\x00-\x7F])";
        }
        i = end;
        continue;
      }
      // Escaped punctuation and the control escapes mean the same in both modes.
      if (std::strchr("nrtfae", n) != nullptr || std::ispunct(static_cast<unsigned char>(n))) {
        out += p.substr(i, 2);
        i += 2;
        continue;
      }
      return std::nullopt;
    }
    if (c == '(' && i + 1 < p.size() && p[i + 1] == '*') return std::nullopt;  // verbs
    if (c == '(' && i + 2 < p.size() && p[i + 1] == '?') {
      // Option settings: only i, m, s (PCRE2 letters) keep their meaning here.
      size_t j = i + 2;
      while (j < p.size() && (std::isalpha(static_cast<unsigned char>(p[j])) || p[j] == '-')) ++j;
      const std::string_view opts = p.substr(i + 2, j - i - 2);
      if (!opts.empty() && opts.find_first_not_of("ims-") != std::string_view::npos)
        return std::nullopt;
      if (p[i + 2] == '#') return std::nullopt;  // a comment
    }
    if (c >= 0x80) {  // a non-ASCII literal: its UTF-8 sequence is one character
      const CodePoint cp = decode_utf8(p, i);
      out += R"([^\x00-\x7F])";
      i += cp.len;
      continue;
    }
    out += static_cast<char>(c);
    ++i;
  }
  return out;
}

Regex::Scratch::Scratch() = default;
void* Regex::Scratch::match_context() {
  if (!context_) context_ = pcre2_match_context_create(nullptr);
  return context_;
}
void* Regex::Scratch::match_data() {
  if (!data_) data_ = pcre2_match_data_create(1, nullptr);
  return data_;
}
Regex::Scratch::~Scratch() {
  pcre2_match_data_free(static_cast<pcre2_match_data*>(data_));
  pcre2_match_context_free(static_cast<pcre2_match_context*>(context_));
}

Result<Regex> Regex::compile(std::string_view oniguruma_pattern) {
  auto translated = oniguruma_to_pcre2(oniguruma_pattern);
  if (!translated) return Error(translated.error());
  int err = 0;
  PCRE2_SIZE at = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated->data()),
                                   translated->size(), kFlags, &err, &at, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    return Error("regex " + std::string(oniguruma_pattern) + ": " +
                 reinterpret_cast<const char*>(msg) + " at offset " + std::to_string(at));
  }
  auto c = std::make_shared<Code>();
  c->code = code;
  c->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  if (c->jit) {
    c->batch = compile_batch(*translated, code, kFlags);
    if (auto ascii = ascii_variant(*translated)) {
      c->ascii = compile_jit(*ascii, PCRE2_MULTILINE);
      c->ascii_batch = compile_batch(*ascii, c->ascii, PCRE2_MULTILINE);
    }
  }
  Regex r;
  r.code_ = std::move(c);
  r.translated_ = std::move(*translated);
  return r;
}

Regex Regex::literal(std::string_view text) {
  Regex r;
  r.literal_ = std::string(text);
  r.translated_ = r.literal_;
  return r;
}

size_t Regex::memory_bytes() const {
  size_t n = literal_.capacity() + translated_.capacity();
  if (code_) {
    size_t size = 0, jit = 0;
    pcre2_pattern_info(code_->code, PCRE2_INFO_SIZE, &size);
    if (code_->jit) pcre2_pattern_info(code_->code, PCRE2_INFO_JITSIZE, &jit);
    n += sizeof(Code) + size + jit;
    for (const pcre2_code* v : {code_->ascii, code_->batch, code_->ascii_batch}) {
      if (!v) continue;
      pcre2_pattern_info(v, PCRE2_INFO_SIZE, &size);
      pcre2_pattern_info(v, PCRE2_INFO_JITSIZE, &jit);
      n += size + jit;
    }
  }
  return n;
}

bool Regex::has_ascii_variant() const { return code_ && code_->ascii; }
bool Regex::has_batched_variant() const { return code_ && code_->batch; }

Status Regex::find_all(std::string_view text, Scratch& scratch, std::vector<Span>& out,
                       Variants variants) const {
  if (!code_) {
    if (literal_.empty()) return {};
    for (size_t at = text.find(literal_); at != std::string_view::npos;
         at = text.find(literal_, at + literal_.size()))
      out.push_back({at, at + literal_.size()});
    return {};
  }
  auto* md = static_cast<pcre2_match_data*>(scratch.match_data());
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  // ASCII text (most prompts) takes the variant without UTF decoding and Unicode property
  // lookups. All are JIT-compiled and called without pcre2_match's per-call checks.
  const bool ascii = variants.ascii && code_->ascii && is_ascii(text);
  pcre2_code* code = ascii ? code_->ascii : code_->code;
  pcre2_code* batch = !variants.batched ? nullptr : ascii ? code_->ascii_batch : code_->batch;
  const bool jit = code_->jit;
  size_t last_end = 0;
  bool matched_before = false;
  size_t last_match_end = 0;
  if (batch) {
    auto* context = static_cast<pcre2_match_context*>(scratch.match_context());
    while (last_end < text.size()) {
      Batch b{&out, last_end, true};
      pcre2_set_callout(context, on_match, &b);
      const size_t before = out.size();
      const int rc = pcre2_jit_match(batch, subject, text.size(), last_end, 0, md, context);
      if (rc == PCRE2_ERROR_NOMATCH) return {};
      if (rc < 0) {  // e.g. the JIT stack: from here on, one match per call
        out.resize(before);
        break;
      }
      last_end = last_match_end = b.prev_end;
      matched_before = true;
    }
    if (last_end >= text.size()) return {};  // P matches no empty string
  }
  while (last_end <= text.size()) {
    int rc =
        jit ? pcre2_jit_match(code, subject, text.size(), last_end, 0, md, nullptr)
            : pcre2_match(code, subject, text.size(), last_end, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {  // the interpreter, on the UTF pattern
      code = code_->code;
      rc = pcre2_match(code, subject, text.size(), last_end, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md,
                       nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      return Error(std::string("regex match failed: ") + reinterpret_cast<const char*>(msg));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t s = ov[0], e = ov[1];
    if (s == e && matched_before && last_match_end == e) {
      // Skip one character (UTF-8: the lead byte and its continuation bytes).
      ++last_end;
      while (last_end < text.size() && (static_cast<unsigned char>(text[last_end]) & 0xC0) == 0x80)
        ++last_end;
      continue;
    }
    last_end = e;
    last_match_end = e;
    matched_before = true;
    out.push_back({s, e});
  }
  return {};
}

}  // namespace kvgate::tokenizer
