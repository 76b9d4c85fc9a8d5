#include "core/tokenizer/added_tokens.h"

#include <algorithm>
#include <cstring>

#include "core/common/unicode.h"

namespace kvgate::tokenizer {

using unicode::CodePoint;
using unicode::decode_utf8;
using unicode::is_white_space;
using unicode::is_word_char;

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens)
    : AddedTokenMatcher(tokens, [&] {
        std::vector<std::string> p;
        for (const AddedToken& t : tokens) p.push_back(t.content);
        return p;
      }()) {}

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens,
                                     const std::vector<std::string>& patterns)
    : tokens_(tokens) {
  for (size_t t = 0; t < tokens_.size(); ++t) {
    const std::string& s = patterns[t];
    if (s.empty()) continue;
    uint32_t node = 0;
    for (char ch : s) {
      const auto b = static_cast<uint8_t>(ch);
      auto& kids = nodes_[node].children;
      auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(b, 0U),
                                 [](const auto& x, const auto& y) { return x.first < y.first; });
      if (it != kids.end() && it->first == b) {
        node = it->second;
      } else {
        const auto fresh = static_cast<uint32_t>(nodes_.size());
        kids.insert(it, {b, fresh});
        nodes_.emplace_back();
        node = fresh;
      }
    }
    if (nodes_[node].token < 0) nodes_[node].token = static_cast<int32_t>(t);
    first_byte_[static_cast<uint8_t>(s[0])] = true;
  }
  const auto& roots = nodes_[0].children;
  if (roots.size() == 1) only_first_byte_ = roots[0].first;
}

size_t AddedTokenMatcher::memory_bytes() const {
  size_t n = nodes_.capacity() * sizeof(Node) + tokens_.capacity() * sizeof(AddedToken);
  for (const Node& node : nodes_) n += node.children.capacity() * sizeof(node.children[0]);
  for (const AddedToken& t : tokens_) n += t.content.capacity();
  return n;
}

int32_t AddedTokenMatcher::next_raw(std::string_view text, size_t from, size_t& start,
                                    size_t& end) const {
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  for (size_t s = from; s < text.size(); ++s) {
    if (only_first_byte_ >= 0) {  // most tokenizers: every added token starts with '<'
      const void* q = std::memchr(p + s, only_first_byte_, text.size() - s);
      if (!q) return -1;
      s = static_cast<size_t>(static_cast<const uint8_t*>(q) - p);
    } else if (!first_byte_[p[s]]) {
      continue;
    }
    uint32_t node = 0;
    int32_t best = -1;
    for (size_t i = s; i < text.size(); ++i) {
      const auto& kids = nodes_[node].children;
      auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(p[i], 0U),
                                 [](const auto& x, const auto& y) { return x.first < y.first; });
      if (it == kids.end() || it->first != p[i]) break;
      node = it->second;
      if (nodes_[node].token >= 0) {
        best = nodes_[node].token;
        end = i + 1;
      }
    }
    if (best >= 0) {
      start = s;
      return best;
    }
  }
  return -1;
}

namespace {

// The code point that ends at byte `end` (exclusive). REQUIRES: end > 0, valid UTF-8.
char32_t last_char(std::string_view s, size_t end, size_t& start) {
  start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  return decode_utf8(s, start).cp;
}

}  // namespace

void AddedTokenMatcher::find_all(std::string_view sentence, std::vector<Match>& out) const {
  if (empty()) return;
  size_t start_offset = 0;  // end of the previous kept match
  size_t from = 0;          // where the automaton resumes: after the previous raw match
  size_t start = 0, stop = 0;
  while (from < sentence.size()) {
    const int32_t t = next_raw(sentence, from, start, stop);
    if (t < 0) break;
    from = stop;
    const AddedToken& tok = tokens_[static_cast<size_t>(t)];
    if (tok.single_word) {
      size_t b;
      const bool start_space = start == 0 || !is_word_char(last_char(sentence, start, b));
      const bool stop_space =
          stop == sentence.size() || !is_word_char(decode_utf8(sentence, stop).cp);
      if (!start_space || !stop_space) continue;
    }
    size_t s = start, e = stop;
    if (tok.lstrip) {
      while (s > 0) {
        size_t b;
        if (!is_white_space(last_char(sentence, s, b))) break;
        s = b;
      }
      s = std::max(s, start_offset);
    }
    if (tok.rstrip) {
      while (e < sentence.size()) {
        const CodePoint c = decode_utf8(sentence, e);
        if (!is_white_space(c.cp)) break;
        e += c.len;
      }
    }
    out.push_back({s, e, tok.id});
    start_offset = e;
  }
}

}  // namespace kvgate::tokenizer
