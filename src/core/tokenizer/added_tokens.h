// Added tokens (special tokens such as <|im_end|> and extra ones such as <think>): found in
// the text before pre-tokenization, leftmost-longest, like the Hugging Face library does
// with its Aho-Corasick automaton. A token with lstrip/rstrip also takes the whitespace
// on its left/right. Immutable after construction; thread-safe.
//
//   AddedTokenMatcher m(tokens);  // only the tokens of one pass (normalized or not)
//   for (size_t at = 0; auto hit = m.find(text, at); at = hit->end) { ... }
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvgate::tokenizer {

struct AddedToken {
  std::string content;
  uint32_t id = 0;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool single_word = false;
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(const std::vector<AddedToken>& tokens);

  struct Match {
    size_t start;  // after lstrip: may be before the token's own text
    size_t end;    // after rstrip
    uint32_t id;
  };
  // The first match starting at or after `from` (lstrip never reaches before `from`).
  std::optional<Match> find(std::string_view text, size_t from) const;
  bool empty() const { return nodes_.size() <= 1; }

 private:
  struct Node {
    std::vector<std::pair<uint8_t, uint32_t>> children;  // sorted by byte
    int32_t token = -1;                                  // index into tokens_
  };
  std::vector<Node> nodes_{1};
  std::vector<AddedToken> tokens_;
  bool first_byte_[256] = {};
};

}  // namespace kvgate::tokenizer
