// Greedy decoding: a function of the context alone, so a continuation from any point of
// an answer reproduces the rest of it.
#include "core/engine/greedy_decode.h"

#include <gtest/gtest.h>

namespace kvgate::engine {
namespace {

TEST(GreedyDecode, ContinuingFromAnyPrefixOfTheAnswerReproducesTheRest) {
  const std::vector<kv::TokenId> prompt = {151644, 872, 198, 9707, 11, 1246, 525, 498};
  const std::vector<kv::TokenId> whole = greedy_continuation(prompt, 40, 151643);
  ASSERT_EQ(whole.size(), 40u);
  for (uint32_t k : {1u, 7u, 20u, 39u}) {
    std::vector<kv::TokenId> context = prompt;
    context.insert(context.end(), whole.begin(), whole.begin() + k);
    const std::vector<kv::TokenId> rest = greedy_continuation(context, 40 - k, 151643);
    EXPECT_EQ(rest, std::vector<kv::TokenId>(whole.begin() + k, whole.end())) << "k=" << k;
  }
}

TEST(GreedyDecode, DependsOnEveryContextTokenAndStaysInTheVocabulary) {
  const std::vector<kv::TokenId> a = {1, 2, 3, 4};
  const std::vector<kv::TokenId> b = {1, 2, 3, 5};
  const std::vector<kv::TokenId> c = {0, 2, 3, 4};
  const auto out_a = greedy_continuation(a, 16, 1000);
  EXPECT_NE(out_a, greedy_continuation(b, 16, 1000));
  EXPECT_NE(out_a, greedy_continuation(c, 16, 1000));
  EXPECT_EQ(out_a, greedy_continuation(a, 16, 1000));  // deterministic
  for (kv::TokenId t : greedy_continuation(a, 500, 7)) EXPECT_LT(t, 7u);
  EXPECT_TRUE(greedy_continuation(a, 0, 7).empty());
}

}  // namespace
}  // namespace kvgate::engine
