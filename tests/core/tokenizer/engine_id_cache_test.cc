#include "core/tokenizer/engine_id_cache.h"

#include <gtest/gtest.h>

#include <numeric>

namespace kvgate::tokenizer {
namespace {

PrefixKey key(uint64_t n) { return PrefixKey{n, n * 7 + 1}; }

// The chain of keys key(n) for each n given.
std::vector<PrefixKey> keys(std::initializer_list<uint64_t> ns) {
  std::vector<PrefixKey> c;
  for (uint64_t n : ns) c.push_back(key(n));
  return c;
}

// A chain of `n` keys (one per message), the same for every conversation here.
std::vector<PrefixKey> chain(size_t n) {
  std::vector<PrefixKey> c;
  for (size_t i = 1; i <= n; ++i) c.push_back(key(i));
  return c;
}

std::vector<uint32_t> iota(uint32_t from, size_t n) {
  std::vector<uint32_t> v(n);
  std::iota(v.begin(), v.end(), from);
  return v;
}

TEST(EngineIdCache, ExactHitPrefixHitAndMiss) {
  EngineIdCache cache(1 << 20);
  std::vector<uint32_t> out{99};
  EXPECT_EQ(cache.lookup(chain(2), out), 0u);
  EXPECT_TRUE(out.empty());
  cache.insert(chain(2), iota(0, 10));
  EXPECT_EQ(cache.lookup(chain(2), out), 2u);  // the whole request
  EXPECT_EQ(out, iota(0, 10));
  EXPECT_EQ(cache.lookup(chain(4), out), 2u);  // a follow-up: the conversation so far
  EXPECT_EQ(out, iota(0, 10));
  EXPECT_EQ(cache.lookup(chain(1), out), 0u);  // an earlier prefix nobody asked for
  std::vector<PrefixKey> other = {key(1), key(50)};
  EXPECT_EQ(cache.lookup(other, out), 0u);
}

TEST(EngineIdCache, AFollowUpStoresOnlyItsNewIdsAndKeepsWhatDiffers) {
  EngineIdCache cache(1 << 20);
  const std::vector<uint32_t> turn1 = iota(0, 1000);
  cache.insert(chain(2), turn1);
  const size_t one = cache.bytes();
  // Turn 2 starts with turn 1's ids but its last 3 (a generation prompt rendered
  // otherwise), then 500 new ones.
  std::vector<uint32_t> turn2(turn1.begin(), turn1.end() - 3);
  for (uint32_t i = 0; i < 500; ++i) turn2.push_back(5000 + i);
  cache.insert(chain(4), turn2);
  EXPECT_LT(cache.bytes() - one, 600 * sizeof(uint32_t));  // not the 1497 ids again
  std::vector<uint32_t> out;
  EXPECT_EQ(cache.lookup(chain(4), out), 4u);
  EXPECT_EQ(out, turn2);
  EXPECT_EQ(cache.lookup(chain(2), out), 2u);
  EXPECT_EQ(out, turn1);
  // A third turn on the second.
  std::vector<uint32_t> turn3 = turn2;
  turn3.push_back(7);
  cache.insert(chain(6), turn3);
  EXPECT_EQ(cache.lookup(chain(6), out), 6u);
  EXPECT_EQ(out, turn3);
  EXPECT_EQ(cache.entries(), 3u);
}

TEST(EngineIdCache, UnrelatedIdsAreStoredWhole) {
  EngineIdCache cache(1 << 20);
  cache.insert(chain(1), iota(0, 10));
  cache.insert(chain(3), iota(100, 10));  // shares nothing with turn 1
  std::vector<uint32_t> out;
  EXPECT_EQ(cache.lookup(chain(3), out), 3u);
  EXPECT_EQ(out, iota(100, 10));
}

TEST(EngineIdCache, InsertingTheSameIdsAgainKeepsLaterTurnsAndOtherIdsReplace) {
  EngineIdCache cache(1 << 20);
  cache.insert(chain(2), iota(0, 10));
  cache.insert(chain(4), iota(0, 20));
  cache.insert(chain(2), iota(0, 10));  // two requests asked at once
  std::vector<uint32_t> out;
  EXPECT_EQ(cache.lookup(chain(4), out), 4u);
  EXPECT_EQ(out, iota(0, 20));
  cache.insert(chain(2), iota(50, 10));  // the engine changed its mind (a new model)
  EXPECT_EQ(cache.lookup(chain(2), out), 2u);
  EXPECT_EQ(out, iota(50, 10));
  EXPECT_EQ(cache.lookup(chain(4), out), 2u);  // turn 2 was built on the old ids: gone
  EXPECT_EQ(cache.entries(), 1u);
}

TEST(EngineIdCache, BoundedLeastRecentlyUsedFirstAndAncestorsStayWithTheirTurns) {
  const size_t entry = 100 * sizeof(uint32_t) + 112;
  EngineIdCache cache(3 * entry);
  std::vector<uint32_t> out;
  // Conversation A: two turns; conversation B: one.
  const std::vector<PrefixKey> a1 = keys({1}), a2 = {key(1), key(2), key(3)};
  const std::vector<PrefixKey> b1 = {key(10)}, c1 = {key(20)};
  cache.insert(a1, iota(0, 100));
  std::vector<uint32_t> a2_ids = iota(0, 200);
  cache.insert(a2, a2_ids);  // stores 100 more
  cache.insert(b1, iota(1000, 100));
  EXPECT_EQ(cache.entries(), 3u);
  EXPECT_LE(cache.bytes(), 3 * entry);
  // Using A's second turn uses its first: B is the least recently used.
  EXPECT_EQ(cache.lookup(a2, out), 3u);
  cache.insert(c1, iota(2000, 100));
  EXPECT_EQ(cache.lookup(b1, out), 0u);
  EXPECT_EQ(cache.lookup(a2, out), 3u);
  EXPECT_EQ(out, a2_ids);
  EXPECT_EQ(cache.lookup(c1, out), 1u);
  // Too big for the bound: not stored at all.
  cache.insert(keys({30}), iota(0, 10000));
  EXPECT_EQ(cache.lookup(keys({30}), out), 0u);
  EXPECT_LE(cache.bytes(), 3 * entry);
}

TEST(EngineIdCache, AnEvictedAncestorTakesItsTurnsWithIt) {
  const size_t entry = 100 * sizeof(uint32_t) + 112;
  EngineIdCache cache(2 * entry + 10);
  std::vector<uint32_t> out;
  cache.insert(keys({1}), iota(0, 100));
  cache.insert(keys({1, 2}), iota(0, 200));
  // Storing the second turn used the first before it: the first is the least recently
  // used, and goes when an unrelated entry comes.
  cache.insert(keys({9}), iota(500, 100));
  EXPECT_EQ(cache.lookup(keys({1, 2}), out), 0u);  // its ancestor is gone
  EXPECT_EQ(cache.entries(), 1u);                  // and so is it, once looked up
}

TEST(EngineIdCache, ClearEmptiesIt) {
  EngineIdCache cache(1 << 20);
  cache.insert(chain(1), iota(0, 4));
  cache.clear();
  EXPECT_EQ(cache.entries(), 0u);
  EXPECT_EQ(cache.bytes(), 0u);
  std::vector<uint32_t> out;
  EXPECT_EQ(cache.lookup(chain(1), out), 0u);
}

}  // namespace
}  // namespace kvgate::tokenizer
