#include "core/tokenizer/added_tokens.h"

#include <algorithm>

#include "core/tokenizer/unicode.h"

namespace kvgate::tokenizer {

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens) : tokens_(tokens) {
  for (size_t t = 0; t < tokens_.size(); ++t) {
    const std::string& s = tokens_[t].content;
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
}

std::optional<AddedTokenMatcher::Match> AddedTokenMatcher::find(std::string_view text,
                                                                size_t from) const {
  if (empty()) return std::nullopt;
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  for (size_t start = from; start < text.size(); ++start) {
    if (!first_byte_[p[start]]) continue;
    uint32_t node = 0;
    int32_t best = -1;
    size_t best_end = 0;
    for (size_t i = start; i < text.size(); ++i) {
      const auto& kids = nodes_[node].children;
      auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(p[i], 0U),
                                 [](const auto& x, const auto& y) { return x.first < y.first; });
      if (it == kids.end() || it->first != p[i]) break;
      node = it->second;
      if (nodes_[node].token >= 0) {
        best = nodes_[node].token;
        best_end = i + 1;
      }
    }
    if (best < 0) continue;
    const AddedToken& tok = tokens_[static_cast<size_t>(best)];
    Match m{start, best_end, tok.id};
    if (tok.lstrip) {
      // Walk back over whitespace code points (UTF-8: skip continuation bytes).
      size_t s = start;
      while (s > from) {
        size_t b = s - 1;
        while (b > from && (p[b] & 0xC0) == 0x80) --b;
        if (!is_white_space(decode_utf8(text, b).cp)) break;
        s = b;
      }
      m.start = s;
    }
    if (tok.rstrip) {
      size_t e = best_end;
      while (e < text.size()) {
        const CodePoint c = decode_utf8(text, e);
        if (!is_white_space(c.cp)) break;
        e += c.len;
      }
      m.end = e;
    }
    return m;
  }
  return std::nullopt;
}

}  // namespace kvgate::tokenizer
