#include "core/kv/block_hash.h"

#include <gtest/gtest.h>

#include <numeric>

namespace kvgate::kv {
namespace {

std::vector<TokenId> iota_tokens(size_t n, TokenId start = 0) {
  std::vector<TokenId> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST(BlockHash, OnlyFullBlocksAreHashed) {
  std::vector<BlockKey> keys;
  EXPECT_EQ(hash_blocks(iota_tokens(47), 16, 1, keys), 2u);
  EXPECT_EQ(keys.size(), 2u);
  keys.clear();
  EXPECT_EQ(hash_blocks(iota_tokens(15), 16, 1, keys), 0u);
  EXPECT_TRUE(keys.empty());
}

TEST(BlockHash, KeyNamesTheWholePrefix) {
  auto a = iota_tokens(64);
  auto b = a;
  b[20] = 999;  // differs in block 1
  std::vector<BlockKey> ka, kb;
  hash_blocks(a, 16, 7, ka);
  hash_blocks(b, 16, 7, kb);
  ASSERT_EQ(ka.size(), 4u);
  EXPECT_EQ(ka[0], kb[0]);
  for (size_t i = 1; i < 4; ++i) EXPECT_NE(ka[i], kb[i]) << i;  // chain: all later differ
}

TEST(BlockHash, ChainMatchesHashBlock) {
  auto t = iota_tokens(32);
  std::vector<BlockKey> keys;
  hash_blocks(t, 16, 42, keys);
  BlockKey k0 = hash_block(42, std::span(t).first(16));
  EXPECT_EQ(keys[0], k0);
  EXPECT_EQ(keys[1], hash_block(k0, std::span(t).subspan(16, 16)));
}

TEST(BlockHash, SeedSeparatesModelAdapterAndSalt) {
  uint64_t base = block_seed("m", "", "");
  EXPECT_EQ(base, block_seed("m", "", ""));
  EXPECT_NE(base, block_seed("m2", "", ""));
  EXPECT_NE(base, block_seed("m", "lora", ""));
  EXPECT_NE(base, block_seed("m", "", "salt"));
  EXPECT_NE(block_seed("ab", "c", ""), block_seed("a", "bc", ""));
  std::vector<BlockKey> k1, k2;
  hash_blocks(iota_tokens(16), 16, base, k1);
  hash_blocks(iota_tokens(16), 16, block_seed("m", "", "salt"), k2);
  EXPECT_NE(k1[0], k2[0]);
}

TEST(BlockHash, BlockSize64) {
  std::vector<BlockKey> keys;
  EXPECT_EQ(hash_blocks(iota_tokens(200), 64, 3, keys), 3u);
}

}  // namespace
}  // namespace kvgate::kv
