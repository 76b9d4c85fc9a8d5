#include "core/kv/block_hash.h"

#include <gtest/gtest.h>

#include <numeric>

namespace kvgate::kv {
namespace {

std::vector<TokenId> Iota(size_t n, TokenId start = 0) {
  std::vector<TokenId> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST(BlockHash, OnlyFullBlocksAreHashed) {
  std::vector<BlockKey> keys;
  EXPECT_EQ(HashBlocks(Iota(47), 16, 1, keys), 2u);
  EXPECT_EQ(keys.size(), 2u);
  keys.clear();
  EXPECT_EQ(HashBlocks(Iota(15), 16, 1, keys), 0u);
  EXPECT_TRUE(keys.empty());
}

TEST(BlockHash, KeyNamesTheWholePrefix) {
  auto a = Iota(64);
  auto b = a;
  b[20] = 999;  // differs in block 1
  std::vector<BlockKey> ka, kb;
  HashBlocks(a, 16, 7, ka);
  HashBlocks(b, 16, 7, kb);
  ASSERT_EQ(ka.size(), 4u);
  EXPECT_EQ(ka[0], kb[0]);
  for (size_t i = 1; i < 4; ++i) EXPECT_NE(ka[i], kb[i]) << i;  // chain: all later differ
}

TEST(BlockHash, ChainMatchesHashBlock) {
  auto t = Iota(32);
  std::vector<BlockKey> keys;
  HashBlocks(t, 16, 42, keys);
  BlockKey k0 = HashBlock(42, std::span(t).first(16));
  EXPECT_EQ(keys[0], k0);
  EXPECT_EQ(keys[1], HashBlock(k0, std::span(t).subspan(16, 16)));
}

TEST(BlockHash, SeedSeparatesModelAdapterAndSalt) {
  uint64_t base = BlockSeed("m", "", "");
  EXPECT_EQ(base, BlockSeed("m", "", ""));
  EXPECT_NE(base, BlockSeed("m2", "", ""));
  EXPECT_NE(base, BlockSeed("m", "lora", ""));
  EXPECT_NE(base, BlockSeed("m", "", "salt"));
  EXPECT_NE(BlockSeed("ab", "c", ""), BlockSeed("a", "bc", ""));
  std::vector<BlockKey> k1, k2;
  HashBlocks(Iota(16), 16, base, k1);
  HashBlocks(Iota(16), 16, BlockSeed("m", "", "salt"), k2);
  EXPECT_NE(k1[0], k2[0]);
}

TEST(BlockHash, BlockSize64) {
  std::vector<BlockKey> keys;
  EXPECT_EQ(HashBlocks(Iota(200), 64, 3, keys), 3u);
}

}  // namespace
}  // namespace kvgate::kv
