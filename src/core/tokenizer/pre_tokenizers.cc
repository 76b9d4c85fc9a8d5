#include "core/tokenizer/pre_tokenizers.h"

#include <algorithm>

#include "core/common/unicode.h"

namespace kvgate::tokenizer {

using unicode::char_class;
using unicode::CodePoint;
using unicode::decode_utf8;
using unicode::is_white_space;
using unicode::is_word_char;
using unicode::kNumber;
using unicode::kPunctuation;

namespace {

using Mark = PreTokenizer::Scratch::Mark;

// The (range, is_match) cover of `text` by `spans`, as the library's Pattern::find_matches.
void marks_from_spans(std::string_view text, const std::vector<Regex::Span>& spans, bool invert,
                      std::vector<Mark>& marks) {
  marks.clear();
  if (text.empty()) {
    marks.push_back({0, 0, invert});
    return;
  }
  size_t prev = 0;
  for (const Regex::Span& m : spans) {
    if (prev != m.start) marks.push_back({prev, m.start, invert});
    marks.push_back({m.start, m.end, !invert});
    prev = m.end;
  }
  if (prev != text.size()) marks.push_back({prev, text.size(), invert});
}

// Every character for which pred holds is a match of its own.
template <typename Pred>
void marks_from_chars(std::string_view text, Pred pred, std::vector<Mark>& marks) {
  marks.clear();
  if (text.empty()) {
    marks.push_back({0, 0, false});
    return;
  }
  size_t last = 0;
  for (size_t i = 0; i < text.size();) {
    const CodePoint c = decode_utf8(text, i);
    if (pred(c.cp)) {
      if (last < i) marks.push_back({last, i, false});
      marks.push_back({i, i + c.len, true});
      last = i + c.len;
    }
    i += c.len;
  }
  if (text.size() > last) marks.push_back({last, text.size(), false});
}

// Applies `behavior` to the marks of `in` and appends the kept, non-empty pieces. `kept`
// is scratch.
void emit(const Piece& in, std::vector<Mark>& marks, SplitBehavior behavior,
          std::vector<Mark>& kept, std::vector<Piece>& out) {
  // After the fold, Mark::match means "remove".
  kept.clear();
  switch (behavior) {
    case SplitBehavior::kRemoved:
      kept.swap(marks);
      break;
    case SplitBehavior::kIsolated:
      for (Mark& m : marks) m.match = false;
      kept.swap(marks);
      break;
    case SplitBehavior::kContiguous: {
      bool prev = false;
      for (const Mark& m : marks) {
        if (m.match == prev && !kept.empty()) {
          kept.back().end = m.end;
        } else {
          kept.push_back({m.start, m.end, false});
        }
        prev = m.match;
      }
      break;
    }
    case SplitBehavior::kMergedWithPrevious: {
      bool prev = false;
      for (const Mark& m : marks) {
        if (m.match && !prev && !kept.empty()) {
          kept.back().end = m.end;
        } else {
          kept.push_back({m.start, m.end, false});
        }
        prev = m.match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool prev = false;
      for (size_t k = marks.size(); k-- > 0;) {
        const Mark& m = marks[k];
        if (m.match && !prev && !kept.empty()) {
          kept.back().start = m.start;
        } else {
          kept.push_back({m.start, m.end, false});
        }
        prev = m.match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
    }
  }
  for (const Mark& m : kept) {
    if (m.match || m.start == m.end) continue;
    out.push_back({in.text.substr(m.start, m.end - m.start), in.at_start && m.start == 0});
  }
}

bool is_punctuation(char32_t cp) {
  if (cp < 128)
    return cp > 32 && cp < 127 &&
           !((cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z'));
  return (char_class(cp) & kPunctuation) != 0;
}

}  // namespace

bool PreTokenizer::byte_level() const {
  for (const Step& s : steps_)
    if (s.kind == kByteLevel) return true;
  return false;
}

Status PreTokenizer::apply(const Step& step, const Piece& in, Scratch& s,
                           std::vector<Piece>& out) const {
  switch (step.kind) {
    case kSplit: {
      s.spans.clear();
      if (Status st = step.regex->find_all(in.text, s.regex, s.spans); !st) return st;
      if (step.behavior == SplitBehavior::kIsolated) {  // matches and gaps alike, in order
        size_t prev = 0;
        for (const Regex::Span& m : s.spans) {
          if (m.start > prev)
            out.push_back({in.text.substr(prev, m.start - prev), in.at_start && prev == 0});
          if (m.end > m.start)
            out.push_back({in.text.substr(m.start, m.end - m.start), in.at_start && m.start == 0});
          prev = std::max(prev, m.end);
        }
        if (prev < in.text.size()) out.push_back({in.text.substr(prev), in.at_start && prev == 0});
        return {};
      }
      marks_from_spans(in.text, s.spans, step.invert, s.marks);
      emit(in, s.marks, step.behavior, s.kept, out);
      return {};
    }
    case kByteLevel: {
      Piece p = in;
      if (step.add_prefix_space && (p.text.empty() || p.text[0] != ' ')) {
        s.owned.push_back(" " + std::string(p.text));
        p.text = s.owned.back();
      }
      if (!step.regex) {
        out.push_back(p);
        return {};
      }
      s.spans.clear();
      if (Status st = step.regex->find_all(p.text, s.regex, s.spans); !st) return st;
      marks_from_spans(p.text, s.spans, false, s.marks);
      emit(p, s.marks, SplitBehavior::kIsolated, s.kept, out);
      return {};
    }
    case kMetaspace: {
      Piece p = in;
      const std::string& rep = step.replacement;
      if (p.text.find(' ') != std::string_view::npos) {
        std::string r;
        r.reserve(p.text.size() + 8);
        for (char c : p.text) {
          if (c == ' ') {
            r += rep;
          } else {
            r.push_back(c);
          }
        }
        s.owned.push_back(std::move(r));
        p.text = s.owned.back();
      }
      const bool starts = p.text.substr(0, rep.size()) == rep;
      if (!starts &&
          (step.prepend == Prepend::kAlways || (step.prepend == Prepend::kFirst && p.at_start))) {
        s.owned.push_back(rep + std::string(p.text));
        p.text = s.owned.back();
      }
      if (!step.split) {
        out.push_back(p);
        return {};
      }
      const char32_t r = decode_utf8(rep, 0).cp;
      marks_from_chars(
          p.text, [r](char32_t c) { return c == r; }, s.marks);
      emit(p, s.marks, SplitBehavior::kMergedWithNext, s.kept, out);
      return {};
    }
    case kDigits:
      marks_from_chars(
          in.text, [](char32_t c) { return (char_class(c) & kNumber) != 0; }, s.marks);
      emit(in, s.marks,
           step.individual_digits ? SplitBehavior::kIsolated : SplitBehavior::kContiguous, s.kept,
           out);
      return {};
    case kPunctuation:
      marks_from_chars(in.text, is_punctuation, s.marks);
      emit(in, s.marks, step.behavior, s.kept, out);
      return {};
    case kWhitespaceSplit:
      marks_from_chars(in.text, is_white_space, s.marks);
      emit(in, s.marks, SplitBehavior::kRemoved, s.kept, out);
      return {};
    case kCharDelimiter: {
      const char32_t d = decode_utf8(step.replacement, 0).cp;
      marks_from_chars(
          in.text, [d](char32_t c) { return c == d; }, s.marks);
      emit(in, s.marks, SplitBehavior::kRemoved, s.kept, out);
      return {};
    }
    case kWhitespace: {
      // \w+|[^\w\s]+, the matches kept and everything else (whitespace) dropped.
      const std::string_view t = in.text;
      size_t i = 0;
      while (i < t.size()) {
        CodePoint c = decode_utf8(t, i);
        if (is_white_space(c.cp)) {
          i += c.len;
          continue;
        }
        const bool word = is_word_char(c.cp);
        size_t e = i + c.len;
        while (e < t.size()) {
          c = decode_utf8(t, e);
          if (word ? !is_word_char(c.cp) : (is_word_char(c.cp) || is_white_space(c.cp))) break;
          e += c.len;
        }
        out.push_back({t.substr(i, e - i), in.at_start && i == 0});
        i = e;
      }
      return {};
    }
  }
  return {};
}

Status PreTokenizer::run(std::string_view text, bool at_start, Scratch& s,
                         std::vector<Piece>& out) const {
  if (text.empty()) return {};
  if (steps_.empty()) {
    out.push_back({text, at_start});
    return {};
  }
  s.owned.clear();
  s.cur.clear();
  s.cur.push_back({text, at_start});
  for (size_t k = 0; k < steps_.size(); ++k) {
    std::vector<Piece>& dst = k + 1 == steps_.size() ? out : s.next;
    if (&dst == &s.next) s.next.clear();
    for (const Piece& p : s.cur) {
      if (Status st = apply(steps_[k], p, s, dst); !st) return st;
    }
    if (&dst == &s.next) s.cur.swap(s.next);
  }
  return {};
}

size_t PreTokenizer::memory_bytes() const {
  size_t n = steps_.capacity() * sizeof(Step);
  for (const Step& s : steps_)
    n += s.replacement.capacity() + (s.regex ? s.regex->memory_bytes() : 0);
  return n;
}

std::string PreTokenizer::describe() const {
  if (steps_.empty()) return "none";
  std::string d;
  for (const Step& s : steps_) {
    if (!d.empty()) d += " + ";
    switch (s.kind) {
      case kSplit:
        d += s.regex->is_literal() ? "Split(literal)" : "Split(PCRE2)";
        break;
      case kByteLevel:
        d += s.regex ? "ByteLevel(GPT-2 regex, PCRE2)" : "ByteLevel";
        break;
      case kMetaspace:
        d += "Metaspace";
        break;
      case kDigits:
        d += "Digits";
        break;
      case kPunctuation:
        d += "Punctuation";
        break;
      case kWhitespace:
        d += "Whitespace";
        break;
      case kWhitespaceSplit:
        d += "WhitespaceSplit";
        break;
      case kCharDelimiter:
        d += "CharDelimiterSplit";
        break;
    }
  }
  return d;
}

}  // namespace kvgate::tokenizer
