// BlockPool: reference counts, commit by content, LRU eviction of free cached blocks.
#include "core/engine/block_pool.h"

#include <gtest/gtest.h>

#include <map>

#include "core/common/rng.h"

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

// Random commits, hits, releases and evictions against a reference map, with hashes
// that collide in their low bits so that probe chains are long and deletions shift.
TEST(BlockPoolTest, MatchesAReferenceUnderRandomOperations) {
  constexpr uint32_t kBlocks = 64;
  BlockPool pool(kBlocks, true);
  Rng rng(5);
  std::map<EngineBlockHash, BlockId> cached;  // reference
  std::vector<BlockId> held;
  std::vector<EngineBlockHash> evicted;
  for (int op = 0; op < 20000; ++op) {
    const uint64_t kind = rng.below(4);
    const EngineBlockHash hash = (rng.below(200) << 32) | (rng.below(4) * 128);
    if (kind == 0 && pool.num_free() > 0) {
      evicted.clear();
      const BlockId b = pool.allocate(evicted);
      for (EngineBlockHash h : evicted) ASSERT_EQ(cached.erase(h), 1u);
      held.push_back(b);
      if (rng.below(2) == 0) {
        const bool fresh = !cached.count(hash);
        ASSERT_EQ(pool.commit(b, hash), fresh);
        if (fresh) cached[hash] = b;
      }
    } else if (kind == 1 && !held.empty()) {
      const size_t i = rng.below(held.size());
      pool.release(held[i]);
      held.erase(held.begin() + static_cast<long>(i));
    } else {
      auto it = cached.find(hash);
      const BlockId found = pool.lookup(hash);
      ASSERT_EQ(found, it == cached.end() ? kNoBlock : it->second);
      if (found != kNoBlock && kind == 2) {
        pool.acquire(found);
        held.push_back(found);
      }
    }
    ASSERT_EQ(pool.num_cached(), cached.size());
    ASSERT_EQ(pool.num_free() + held.size() >= kBlocks, true);
  }
  for (const auto& [h, b] : cached) EXPECT_EQ(pool.lookup(h), b);
}

}  // namespace
}  // namespace kvgate::engine
