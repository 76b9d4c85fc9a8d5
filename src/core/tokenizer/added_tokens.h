// Added tokens (special tokens such as <|im_end|> and extra ones such as <think>): found in
// the text before pre-tokenization, leftmost-longest, like the Hugging Face library does
// with its Aho-Corasick automaton, then filtered and widened by their flags:
//   single_word  the match is dropped when a word character touches it on either side
//   lstrip       it also takes the whitespace on its left (not before the previous match)
//   rstrip       it also takes the whitespace on its right
// The library runs two passes: tokens with normalized == false on the raw text, then the
// others (their content normalized) on each normalized piece in between; the tokenizer
// builds one matcher per pass. Immutable after construction; thread-safe.
//
//   AddedTokenMatcher m(tokens);  // only the tokens of one pass
//   std::vector<AddedTokenMatcher::Match> hits;
//   m.find_all(text, hits);
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvgate::tokenizer {

struct AddedToken {
  std::string content;  // as in tokenizer.json
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
  // `patterns[i]` is the text matched for tokens[i] (its content, normalized for the
  // normalized pass); an empty pattern never matches.
  AddedTokenMatcher(const std::vector<AddedToken>& tokens,
                    const std::vector<std::string>& patterns);
  explicit AddedTokenMatcher(const std::vector<AddedToken>& tokens);

  struct Match {
    size_t start;  // after lstrip: may be before the token's own text
    size_t end;    // after rstrip
    uint32_t id;
  };
  // Appends the matches in `sentence`, in order and non-overlapping.
  void find_all(std::string_view sentence, std::vector<Match>& out) const;
  bool empty() const { return nodes_.size() <= 1; }
  // Heap bytes held: the trie and the matcher's copy of the tokens.
  size_t memory_bytes() const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, uint32_t>> children;  // sorted by byte
    int32_t token = -1;                                  // index into tokens_
  };
  // The leftmost-longest raw match at or after `from`: start, end, token index (or -1).
  int32_t next_raw(std::string_view text, size_t from, size_t& start, size_t& end) const;

  std::vector<Node> nodes_{1};
  std::vector<AddedToken> tokens_;
  bool first_byte_[256] = {};
  int only_first_byte_ = -1;  // the one first byte of all patterns, or -1
};

}  // namespace kvgate::tokenizer
