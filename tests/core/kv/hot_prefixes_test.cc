#include "core/kv/hot_prefixes.h"

#include <gtest/gtest.h>

#include <numeric>

namespace kvgate::kv {
namespace {

constexpr uint32_t kBlock = 4;

std::vector<TokenId> tokens(TokenId start, size_t n) {
  std::vector<TokenId> t(n);
  std::iota(t.begin(), t.end(), start);
  return t;
}

std::vector<TokenId> concat(std::vector<TokenId> a, const std::vector<TokenId>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<BlockKey> keys_of(const std::vector<TokenId>& t) {
  std::vector<BlockKey> k;
  hash_blocks(t, kBlock, block_seed("m", "", ""), k);
  return k;
}

void observe(HotPrefixes& hot, const std::vector<TokenId>& t, Nanos now) {
  hot.observe(keys_of(t), {.token_ids = t}, now);
}

TEST(HotPrefixesTest, DepthsAreFourPerPowerOfTwoPlusTheLastBlock) {
  using D = std::vector<uint32_t>;
  EXPECT_EQ(HotPrefixes::depths(0, 100), D{});
  EXPECT_EQ(HotPrefixes::depths(1, 100), D{1});
  EXPECT_EQ(HotPrefixes::depths(13, 100), (D{1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 13}));
  EXPECT_EQ(HotPrefixes::depths(40, 100),
            (D{1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40}));
  EXPECT_EQ(HotPrefixes::depths(100, 9), (D{1, 2, 3, 4, 5, 6, 7, 8, 9}));
  // Never a gap of more than 25%: a shared prefix is warmed to at least 80% of its length.
  const D d = HotPrefixes::depths(100000, 100000);
  for (size_t i = 1; i < d.size(); ++i) EXPECT_LE(d[i], d[i - 1] * 5 / 4 + 1) << d[i];
}

TEST(HotPrefixesTest, APromptSeenOnceIsNeverWarmed) {
  HotPrefixes hot(kBlock);
  observe(hot, tokens(0, 64), 0);
  EXPECT_TRUE(hot.top(8, 0).empty());
  EXPECT_EQ(hot.stored_tokens(), 0u);  // nothing copied for a first sighting
}

TEST(HotPrefixesTest, ASharedSystemPromptIsWarmedAtItsDeepestSharedDepth) {
  HotPrefixes hot(kBlock);
  const auto system = tokens(1000, 8 * kBlock);  // 8 blocks shared
  for (TokenId q = 0; q < 5; ++q) observe(hot, concat(system, tokens(q * 100, 10 * kBlock)), q);
  auto top = hot.top(4, 5);
  ASSERT_EQ(top.size(), 1u);  // the shorter shared depths are its ancestors
  EXPECT_EQ(top[0].blocks, 8u);
  EXPECT_EQ(top[0].token_ids, system);
  EXPECT_NEAR(top[0].hits, 5, 0.01);
  EXPECT_EQ(top[0].key, keys_of(system).back());
}

TEST(HotPrefixesTest, RanksByHitsTimesLengthAndReturnsAtMostK) {
  HotPrefixes hot(kBlock);
  const auto a = tokens(1000, 8 * kBlock);  // 8 blocks, 3 hits: 24
  const auto b = tokens(2000, 4 * kBlock);  // 4 blocks, 10 hits: 40
  const auto c = tokens(3000, 2 * kBlock);  // 2 blocks, 2 hits: 4
  for (int i = 0; i < 3; ++i) observe(hot, concat(a, tokens(10 * i, kBlock)), 0);
  for (int i = 0; i < 10; ++i) observe(hot, concat(b, tokens(10 * i, kBlock)), 0);
  for (int i = 0; i < 2; ++i) observe(hot, concat(c, tokens(10 * i, kBlock)), 0);
  auto top = hot.top(3, 0);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].token_ids, b);
  EXPECT_EQ(top[1].token_ids, a);
  EXPECT_EQ(top[2].token_ids, c);
  EXPECT_EQ(hot.top(2, 0).size(), 2u);
}

TEST(HotPrefixesTest, HitsDecayWithTheHalfLife) {
  HotPrefixes hot(kBlock, {.half_life = 10 * kSecond});
  const auto old_prompt = tokens(1000, 4 * kBlock);
  const auto new_prompt = tokens(2000, 4 * kBlock);
  for (int i = 0; i < 8; ++i) observe(hot, old_prompt, 0);
  for (int i = 0; i < 3; ++i) observe(hot, new_prompt, 40 * kSecond);
  auto top = hot.top(2, 40 * kSecond);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].token_ids, new_prompt);  // 3 recent hits beat 8 four half-lives ago
  EXPECT_NEAR(top[1].hits, 8.0 / 16, 1e-9);
}

TEST(HotPrefixesTest, TextPromptsStoreTheirTextUpToTheBlockBoundary) {
  HotPrefixes hot(kBlock);
  // The gateway's fallback: 4 bytes of text per pseudo-token.
  const std::string system(4 * kBlock * 3, 's');  // 3 blocks
  for (char q : std::string("abc")) {
    std::string text = system + std::string(4 * kBlock * 2, q);
    std::vector<TokenId> pseudo(text.size() / 4);
    for (size_t i = 0; i < pseudo.size(); ++i) pseudo[i] = static_cast<uint8_t>(text[i * 4]);
    hot.observe(keys_of(pseudo), {.text = text, .bytes_per_token = 4}, 0);
  }
  auto top = hot.top(4, 0);
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top[0].blocks, 3u);
  EXPECT_TRUE(top[0].token_ids.empty());
  EXPECT_EQ(top[0].text, system);
}

TEST(HotPrefixesTest, StaysWithinItsCapacityAndTokenBudget) {
  HotPrefixes hot(kBlock, {.capacity = 64, .max_stored_tokens = 200});
  const auto hot_prompt = tokens(500000, 4 * kBlock);
  for (TokenId i = 0; i < 2000; ++i) {
    observe(hot, hot_prompt, i);
    observe(hot, tokens(i * 1000, 6 * kBlock), i);  // unique: evicted first
    observe(hot, tokens(i * 1000, 6 * kBlock), i);  // seen twice: stores 24 tokens each
    EXPECT_LE(hot.size(), 64u);
    EXPECT_LE(hot.stored_tokens(), 200u);
  }
  auto top = hot.top(1, 2000);
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top[0].token_ids, hot_prompt);
}

TEST(HotPrefixesTest, EmptyKeysAreIgnored) {
  HotPrefixes hot(kBlock);
  hot.observe({}, {}, 0);
  EXPECT_EQ(hot.size(), 0u);
}

}  // namespace
}  // namespace kvgate::kv
