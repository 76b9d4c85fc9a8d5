// BlockPool: reference counts, commit by content, LRU eviction of free cached blocks.
#include "core/engine/block_pool.h"

#include <gtest/gtest.h>

namespace kvgate::engine {
namespace {

TEST(BlockPoolTest, AllocatesFreesAndCountsUsage) {
  BlockPool pool(4, true);
  std::vector<EngineBlockHash> evicted;
  EXPECT_EQ(pool.num_free(), 4u);
  const BlockId a = pool.allocate(evicted);
  const BlockId b = pool.allocate(evicted);
  EXPECT_NE(a, b);
  EXPECT_EQ(pool.num_free(), 2u);
  EXPECT_DOUBLE_EQ(pool.usage(), 0.5);
  pool.release(a);
  pool.release(b);
  EXPECT_EQ(pool.num_free(), 4u);
  EXPECT_TRUE(evicted.empty());
}

TEST(BlockPoolTest, CachedBlocksSurviveReleaseAndAreSharedByReference) {
  BlockPool pool(4, true);
  std::vector<EngineBlockHash> evicted;
  const BlockId a = pool.allocate(evicted);
  ASSERT_TRUE(pool.commit(a, 111));
  EXPECT_EQ(pool.lookup(111), a);
  pool.acquire(a);  // a second request shares it
  EXPECT_EQ(pool.ref_count(a), 2u);
  pool.release(a);
  pool.release(a);
  EXPECT_EQ(pool.num_free(), 4u);
  EXPECT_EQ(pool.lookup(111), a);  // still cached while free
  pool.acquire(a);                 // a hit takes it out of the free list
  EXPECT_EQ(pool.num_free(), 3u);
  pool.release(a);
}

TEST(BlockPoolTest, DuplicateContentIsNotCachedTwice) {
  BlockPool pool(4, true);
  std::vector<EngineBlockHash> evicted;
  const BlockId a = pool.allocate(evicted);
  const BlockId b = pool.allocate(evicted);
  EXPECT_TRUE(pool.commit(a, 7));
  EXPECT_FALSE(pool.commit(b, 7));
  EXPECT_FALSE(pool.commit(a, 8));  // already committed
  EXPECT_FALSE(pool.is_cached(b));
}

TEST(BlockPoolTest, EvictsLeastRecentlyFreedAfterUncachedBlocks) {
  BlockPool pool(4, true);
  std::vector<EngineBlockHash> evicted;
  BlockId ids[4];
  for (BlockId& id : ids) id = pool.allocate(evicted);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(pool.commit(ids[i], 100 + i));
  // Free in the order 2, 0, 3 (uncached), 1.
  pool.release(ids[2]);
  pool.release(ids[0]);
  pool.release(ids[3]);
  pool.release(ids[1]);
  // The uncached block goes first and evicts nothing, then 102, 100, 101.
  EXPECT_EQ(pool.allocate(evicted), ids[3]);
  EXPECT_TRUE(evicted.empty());
  pool.allocate(evicted);
  pool.allocate(evicted);
  pool.allocate(evicted);
  EXPECT_EQ(evicted, (std::vector<EngineBlockHash>{102, 100, 101}));
  EXPECT_EQ(pool.num_cached(), 0u);
  EXPECT_EQ(pool.lookup(100), kNoBlock);
}

TEST(BlockPoolTest, ResetOnlyWhenNothingIsReferenced) {
  BlockPool pool(2, true);
  std::vector<EngineBlockHash> evicted;
  const BlockId a = pool.allocate(evicted);
  ASSERT_TRUE(pool.commit(a, 5));
  EXPECT_FALSE(pool.reset());
  pool.release(a);
  EXPECT_TRUE(pool.reset());
  EXPECT_EQ(pool.lookup(5), kNoBlock);
}

TEST(BlockPoolTest, CachingOff) {
  BlockPool pool(2, false);
  std::vector<EngineBlockHash> evicted;
  EXPECT_FALSE(pool.commit(pool.allocate(evicted), 1));
  EXPECT_EQ(pool.num_cached(), 0u);
}

}  // namespace
}  // namespace kvgate::engine
