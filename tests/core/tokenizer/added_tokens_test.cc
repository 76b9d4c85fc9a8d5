#include "core/tokenizer/added_tokens.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kvgate::tokenizer {
namespace {

std::vector<std::pair<size_t, uint32_t>> matches(const AddedTokenMatcher& m, std::string_view s) {
  std::vector<AddedTokenMatcher::Match> hits;
  m.find_all(s, hits);
  std::vector<std::pair<size_t, uint32_t>> out;
  for (const auto& h : hits) out.emplace_back(h.start, h.id);
  return out;
}

// Leftmost-longest matches, whether all tokens share their first byte (the scan jumps from
// one '<' to the next) or not (a byte table).
TEST(AddedTokenMatcher, LeftmostLongestWithOneOrSeveralFirstBytes) {
  const std::vector<AddedToken> angle = {
      {.content = "<s>", .id = 1}, {.content = "</s>", .id = 2}, {.content = "<s>x", .id = 3}};
  const AddedTokenMatcher one(angle);
  EXPECT_EQ(matches(one, "a<s>b</s"), (std::vector<std::pair<size_t, uint32_t>>{{1, 1}}));
  EXPECT_EQ(matches(one, "<<s>x</s><"), (std::vector<std::pair<size_t, uint32_t>>{{1, 3}, {5, 2}}));
  EXPECT_TRUE(matches(one, "no tokens at all < here").empty());
  std::vector<AddedToken> mixed = angle;
  mixed.push_back({.content = "\n\n", .id = 4});
  const AddedTokenMatcher several(mixed);
  EXPECT_EQ(matches(several, "a\n\n<s>\n"),
            (std::vector<std::pair<size_t, uint32_t>>{{1, 4}, {3, 1}}));
}

}  // namespace
}  // namespace kvgate::tokenizer
