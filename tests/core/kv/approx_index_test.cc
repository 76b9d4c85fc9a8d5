#include "core/kv/approx_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "core/common/rng.h"

namespace kvgate::kv {
namespace {

std::vector<BlockKey> chain(std::initializer_list<BlockKey> k) { return k; }

std::vector<EndpointMatch> sorted_matches(ApproxIndex& index, std::span<const BlockKey> keys,
                                          Nanos now) {
  std::vector<EndpointMatch> out;
  index.match(keys, now, out);
  std::sort(out.begin(), out.end(),
            [](const EndpointMatch& a, const EndpointMatch& b) { return a.endpoint < b.endpoint; });
  return out;
}

TEST(ApproxIndex, RecordedPrefixMatches) {
  ApproxIndex index({});
  index.record(0, chain({1, 2, 3, 4}), 0);
  index.record(1, chain({1, 2, 9}), 0);
  EXPECT_EQ(sorted_matches(index, chain({1, 2, 3, 7}), kSecond),
            (std::vector<EndpointMatch>{{0, 3, 3}, {1, 2, 2}}));
  EXPECT_TRUE(sorted_matches(index, chain({5}), kSecond).empty());
  EXPECT_EQ(index.held_pairs(), 7u);
  EXPECT_EQ(index.distinct_blocks(), 5u);
}

TEST(ApproxIndex, EntriesExpireAfterTtlUnlessReused) {
  ApproxIndex index({.ttl = 120 * kSecond});
  index.record(0, chain({1, 2, 3}), 0);
  index.record(1, chain({1, 2, 3}), 0);
  index.record(1, chain({1, 2}), 100 * kSecond);  // reuse refreshes blocks 1, 2
  EXPECT_EQ(sorted_matches(index, chain({1, 2, 3}), 119 * kSecond),
            (std::vector<EndpointMatch>{{0, 3, 3}, {1, 3, 3}}));
  EXPECT_EQ(sorted_matches(index, chain({1, 2, 3}), 121 * kSecond),
            (std::vector<EndpointMatch>{{1, 2, 2}}));
  index.expire(121 * kSecond);
  EXPECT_EQ(index.held_pairs(), 2u);
  index.expire(300 * kSecond);
  EXPECT_EQ(index.held_pairs(), 0u);
  EXPECT_EQ(index.distinct_blocks(), 0u);
}

TEST(ApproxIndex, PrunesDeepestBlocksFirstTo80Percent) {
  ApproxIndex index({.capacity_pairs = 10});
  index.record(0, chain({1, 2, 3, 4, 5, 6}), 0);
  index.record(1, chain({1, 2, 7, 8, 9}), 1);  // 11 pairs > 10: prune to 8
  EXPECT_LE(index.held_pairs(), 8u);
  // The shared root blocks survive; the deep tails went first.
  auto m = sorted_matches(index, chain({1, 2}), 2);
  EXPECT_EQ(m, (std::vector<EndpointMatch>{{0, 2, 2}, {1, 2, 2}}));
  EXPECT_LT(sorted_matches(index, chain({1, 2, 3, 4, 5, 6}), 2)[0].total_blocks, 6u);
}

TEST(ApproxIndex, RemoveEndpoint) {
  ApproxIndex index({});
  index.record(0, chain({1, 2}), 0);
  index.record(1, chain({1, 2}), 0);
  index.remove_endpoint(0);
  EXPECT_EQ(sorted_matches(index, chain({1, 2}), 0), (std::vector<EndpointMatch>{{1, 2, 2}}));
  EXPECT_EQ(index.held_pairs(), 2u);
}

TEST(ApproxIndex, BlocksHeldPerEndpointSkipsExpired) {
  ApproxIndex index({.ttl = 10 * kSecond});
  index.record(0, chain({1, 2, 3}), 0);
  index.record(1, chain({1, 2}), 5 * kSecond);
  std::vector<size_t> held;
  index.blocks_held(5 * kSecond, held);
  EXPECT_EQ(held, (std::vector<size_t>{3, 2}));
  // At 12 s endpoint 0's entries (recorded at 0) have expired, endpoint 1's have not.
  index.blocks_held(12 * kSecond, held);
  EXPECT_EQ(held, (std::vector<size_t>{0, 2}));
  index.remove_endpoint(1);
  index.blocks_held(12 * kSecond, held);
  EXPECT_TRUE(held.empty());
}

TEST(ApproxIndexRandomized, AgreesWithReferenceModel) {
  Rng rng(7);
  const Nanos ttl = 50 * kSecond;
  ApproxIndex index({.ttl = ttl, .capacity_pairs = 0});
  std::map<std::pair<EndpointId, BlockKey>, Nanos> ref;
  std::vector<std::vector<BlockKey>> prompts;
  for (int p = 0; p < 30; ++p) {
    std::vector<BlockKey> k;
    if (p > 0 && rng.below(3) != 0) {
      const auto& base = prompts[rng.below(prompts.size())];
      k.assign(base.begin(), base.begin() + static_cast<ptrdiff_t>(rng.below(base.size() + 1)));
    }
    BlockKey parent = k.empty() ? 77 : k.back();
    for (size_t i = 0, n = 1 + rng.below(8); i < n; ++i) {
      parent = parent * 6364136223846793005ULL + 1442695040888963407ULL + rng.below(3);
      k.push_back(parent);
    }
    prompts.push_back(k);
  }
  Nanos now = 0;
  size_t nonempty = 0;
  for (int step = 0; step < 5000; ++step) {
    now += static_cast<Nanos>(rng.below(2 * kSecond));
    const auto& keys = prompts[rng.below(prompts.size())];
    if (rng.below(2) == 0) {
      EndpointId e = static_cast<EndpointId>(rng.below(5));
      index.record(e, keys, now);
      for (BlockKey k : keys) ref[{e, k}] = now;
    } else {
      std::vector<EndpointMatch> want;
      for (EndpointId e = 0; e < 5; ++e) {
        uint32_t n = 0;
        for (BlockKey k : keys) {
          auto it = ref.find({e, k});
          if (it == ref.end() || it->second < now - ttl) break;
          ++n;
        }
        if (n > 0) want.push_back({e, n, n});
      }
      ASSERT_EQ(sorted_matches(index, keys, now), want) << "step " << step;
      nonempty += !want.empty();
    }
    if (rng.below(100) == 0) index.expire(now);
  }
  EXPECT_GT(nonempty, 100u);
}

}  // namespace
}  // namespace kvgate::kv
