#include "core/kv/approx_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <span>
#include <vector>

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

namespace approx_index_test {

// Prompts sharing prefixes, as the randomized tests walk them.
std::vector<std::vector<BlockKey>> random_prompts(Rng& rng) {
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
  return prompts;
}

// The reference model's matches for `keys` at `now`: each endpoint of [0, endpoints) with
// the leading keys it recorded within `ttl`.
using Reference = std::map<std::pair<EndpointId, BlockKey>, Nanos>;
std::vector<EndpointMatch> reference_matches(const Reference& ref, std::span<const BlockKey> keys,
                                             EndpointId endpoints, Nanos now, Nanos ttl) {
  std::vector<EndpointMatch> want;
  for (EndpointId e = 0; e < endpoints; ++e) {
    uint32_t n = 0;
    for (BlockKey k : keys) {
      auto it = ref.find({e, k});
      if (it == ref.end() || it->second < now - ttl) break;
      ++n;
    }
    if (n > 0) want.push_back({e, n, n});
  }
  return want;
}

}  // namespace approx_index_test

TEST(ApproxIndexRandomized, AgreesWithReferenceModel) {
  Rng rng(7);
  const Nanos ttl = 50 * kSecond;
  ApproxIndex index({.ttl = ttl, .capacity_pairs = 0});
  std::map<std::pair<EndpointId, BlockKey>, Nanos> ref;
  const std::vector<std::vector<BlockKey>> prompts = approx_index_test::random_prompts(rng);
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
      const std::vector<EndpointMatch> want =
          approx_index_test::reference_matches(ref, keys, 5, now, ttl);
      ASSERT_EQ(sorted_matches(index, keys, now), want) << "step " << step;
      nonempty += !want.empty();
    }
    if (rng.below(100) == 0) index.expire(now);
  }
  EXPECT_GT(nonempty, 100u);
}

// --- The host tier (Options::host_ttl > 0).

TEST(ApproxIndexHostTier, AgesIntoHostThenExpires) {
  ApproxIndex index({.ttl = 10 * kSecond, .host_ttl = 20 * kSecond});
  index.record(0, chain({1, 2, 3}), 0);
  EXPECT_EQ(sorted_matches(index, chain({1, 2, 3}), 10 * kSecond),
            (std::vector<EndpointMatch>{{0, 3, 3}}));
  // Past the GPU TTL: on the host tier, in the any-tier run only.
  EXPECT_EQ(sorted_matches(index, chain({1, 2, 3}), 15 * kSecond),
            (std::vector<EndpointMatch>{{0, 0, 3}}));
  EXPECT_EQ(sorted_matches(index, chain({1, 2, 3}), 30 * kSecond),
            (std::vector<EndpointMatch>{{0, 0, 3}}));
  std::vector<size_t> held;
  index.blocks_held(30 * kSecond, held);
  EXPECT_EQ(held, (std::vector<size_t>{3}));
  EXPECT_EQ(index.host_pairs(), 0u);  // flagged only when pruned or expired
  index.expire(15 * kSecond);
  EXPECT_EQ(index.host_pairs(), 3u);
  EXPECT_EQ(index.held_pairs(), 3u);
  EXPECT_EQ(sorted_matches(index, chain({1, 2, 3}), 15 * kSecond),
            (std::vector<EndpointMatch>{{0, 0, 3}}));
  // Past both tiers: gone.
  EXPECT_TRUE(sorted_matches(index, chain({1, 2, 3}), 31 * kSecond).empty());
  index.expire(31 * kSecond);
  EXPECT_EQ(index.held_pairs(), 0u);
  EXPECT_EQ(index.host_pairs(), 0u);
  EXPECT_EQ(index.distinct_blocks(), 0u);
}

TEST(ApproxIndexHostTier, ReRecordPromotesBackToGpu) {
  ApproxIndex index({.ttl = 10 * kSecond, .host_ttl = 20 * kSecond});
  index.record(0, chain({1, 2, 3}), 0);
  index.expire(15 * kSecond);
  ASSERT_EQ(index.host_pairs(), 3u);
  index.record(0, chain({1, 2}), 16 * kSecond);
  EXPECT_EQ(index.host_pairs(), 1u);
  EXPECT_EQ(index.held_pairs(), 3u);
  EXPECT_EQ(sorted_matches(index, chain({1, 2, 3}), 16 * kSecond),
            (std::vector<EndpointMatch>{{0, 2, 3}}));
  index.record(0, chain({1, 2, 3}), 17 * kSecond);
  EXPECT_EQ(index.host_pairs(), 0u);
  EXPECT_EQ(sorted_matches(index, chain({1, 2, 3}), 17 * kSecond),
            (std::vector<EndpointMatch>{{0, 3, 3}}));
  // Refreshed: on the GPU tier until 27 s, held until 47 s.
  EXPECT_EQ(sorted_matches(index, chain({1, 2, 3}), 47 * kSecond),
            (std::vector<EndpointMatch>{{0, 0, 3}}));
  EXPECT_TRUE(sorted_matches(index, chain({1, 2, 3}), 48 * kSecond).empty());
}

TEST(ApproxIndexHostTier, MatchRunsPerTier) {
  ApproxIndex index({.ttl = 10 * kSecond, .host_ttl = 20 * kSecond});
  index.record(0, chain({1, 2, 3, 4}), 0);
  index.record(0, chain({1, 3}), 12 * kSecond);  // blocks 1 and 3 back on the GPU tier
  index.record(1, chain({1, 2}), 0);
  index.record(1, chain({1, 2}), 12 * kSecond);
  index.record(2, chain({1, 2, 3}), 0);
  // Endpoint 0: block 2 is on the host tier, so its GPU run stops at 1 although block 3
  // is on the GPU tier again; its any-tier run covers all four.
  EXPECT_EQ(sorted_matches(index, chain({1, 2, 3, 4, 5}), 15 * kSecond),
            (std::vector<EndpointMatch>{{0, 1, 4}, {1, 2, 2}, {2, 0, 3}}));
  // Merged with another index's matches, per endpoint the larger of each run.
  std::vector<EndpointMatch> a{{0, 3, 3}};
  const std::vector<EndpointMatch> b = sorted_matches(index, chain({1, 2, 3, 4}), 15 * kSecond);
  merge_matches(a, b);
  std::sort(a.begin(), a.end(),
            [](const EndpointMatch& x, const EndpointMatch& y) { return x.endpoint < y.endpoint; });
  EXPECT_EQ(a, (std::vector<EndpointMatch>{{0, 3, 4}, {1, 2, 2}, {2, 0, 3}}));
}

TEST(ApproxIndexHostTier, CapacityMovesDeepestBlocksToHost) {
  ApproxIndex index({.ttl = 100 * kSecond,
                     .capacity_pairs = 10,
                     .host_ttl = 50 * kSecond,
                     .host_capacity_pairs = 100});
  index.record(0, chain({1, 2, 3, 4, 5, 6}), 0);
  index.record(1, chain({1, 2, 7, 8, 9}), 1);  // 11 GPU pairs > 10: down to 8
  // Moved, deepest first: blocks 6 (depth 5), then 5 and 9 (depth 4; 5 older).
  EXPECT_EQ(index.held_pairs(), 11u);
  EXPECT_EQ(index.host_pairs(), 3u);
  EXPECT_EQ(sorted_matches(index, chain({1, 2, 3, 4, 5, 6}), 2),
            (std::vector<EndpointMatch>{{0, 4, 6}, {1, 2, 2}}));
  EXPECT_EQ(sorted_matches(index, chain({1, 2, 7, 8, 9}), 2),
            (std::vector<EndpointMatch>{{0, 2, 2}, {1, 4, 5}}));
  // The moved pairs stay host_ttl from when they moved (at 1 ns), the rest their TTL.
  EXPECT_EQ(sorted_matches(index, chain({1, 2, 3, 4, 5, 6}), 50 * kSecond),
            (std::vector<EndpointMatch>{{0, 4, 6}, {1, 2, 2}}));
  EXPECT_EQ(sorted_matches(index, chain({1, 2, 3, 4, 5, 6}), 51 * kSecond),
            (std::vector<EndpointMatch>{{0, 4, 4}, {1, 2, 2}}));
}

TEST(ApproxIndexHostTier, HostCapacityDropsDeepestHostPairs) {
  ApproxIndex index({.ttl = 100 * kSecond,
                     .capacity_pairs = 10,
                     .host_ttl = 50 * kSecond,
                     .host_capacity_pairs = 2});
  index.record(0, chain({1, 2, 3, 4, 5, 6}), 0);
  index.record(1, chain({1, 2, 7, 8, 9}), 1);
  // Blocks 6, 5, 9 moved to the host tier: 3 > 2, so block 6, the deepest, is dropped.
  EXPECT_EQ(index.host_pairs(), 2u);
  EXPECT_EQ(index.held_pairs(), 10u);
  EXPECT_EQ(index.distinct_blocks(), 8u);
  EXPECT_EQ(sorted_matches(index, chain({1, 2, 3, 4, 5, 6}), 2),
            (std::vector<EndpointMatch>{{0, 4, 5}, {1, 2, 2}}));
}

TEST(ApproxIndexHostTier, ExportAndRestoreKeepTheTier) {
  const ApproxIndex::Options tiered{.ttl = 10 * kSecond, .host_ttl = 20 * kSecond};
  ApproxIndex from(tiered);
  from.record(0, chain({1, 2}), 0);
  from.record(1, chain({1, 2}), 12 * kSecond);
  std::vector<ApproxIndex::Held> held;
  from.export_pairs(15 * kSecond, held);
  ASSERT_EQ(held.size(), 4u);
  ApproxIndex to(tiered);
  for (const ApproxIndex::Held& h : held) {
    EXPECT_TRUE(to.restore(h, 15 * kSecond));
  }
  EXPECT_EQ(to.host_pairs(), 2u);
  EXPECT_EQ(sorted_matches(to, chain({1, 2}), 15 * kSecond),
            (std::vector<EndpointMatch>{{0, 0, 2}, {1, 2, 2}}));
  // Without a host tier, the pairs past the TTL are not restored.
  ApproxIndex flat({.ttl = 10 * kSecond});
  size_t restored = 0;
  for (const ApproxIndex::Held& h : held) restored += flat.restore(h, 15 * kSecond) ? 1 : 0;
  EXPECT_EQ(restored, 2u);
  EXPECT_EQ(flat.host_pairs(), 0u);
}

// host_ttl 0 (the default): the host options change nothing, nothing is flagged, and
// every match has gpu_blocks == total_blocks.
TEST(ApproxIndexHostTier, HostTtlZeroIsTheFlatIndex) {
  Rng rng(11);
  const auto prompts = approx_index_test::random_prompts(rng);
  ApproxIndex flat({.ttl = 20 * kSecond, .capacity_pairs = 60});
  ApproxIndex zero(
      {.ttl = 20 * kSecond, .capacity_pairs = 60, .host_ttl = 0, .host_capacity_pairs = 3});
  Nanos now = 0;
  size_t nonempty = 0;
  for (int step = 0; step < 3000; ++step) {
    now += static_cast<Nanos>(rng.below(2 * kSecond));
    const auto& keys = prompts[rng.below(prompts.size())];
    if (rng.below(2) == 0) {
      const EndpointId e = static_cast<EndpointId>(rng.below(5));
      flat.record(e, keys, now);
      zero.record(e, keys, now);
    } else {
      const auto want = sorted_matches(flat, keys, now);
      ASSERT_EQ(sorted_matches(zero, keys, now), want) << "step " << step;
      for (const EndpointMatch& m : want) {
        ASSERT_EQ(m.gpu_blocks, m.total_blocks);
      }
      nonempty += !want.empty();
    }
    if (rng.below(100) == 0) {
      flat.expire(now);
      zero.expire(now);
    }
    ASSERT_EQ(zero.held_pairs(), flat.held_pairs());
    ASSERT_EQ(zero.host_pairs(), 0u);
  }
  EXPECT_GT(nonempty, 100u);
}

// Against a reference model of the two tiers (no capacity pruning): the any-tier run is
// the run of pairs recorded within ttl + host_ttl, the GPU run that of pairs recorded
// within ttl; and the memory bounds hold with pruning on.
TEST(ApproxIndexHostTier, AgreesWithReferenceModel) {
  Rng rng(23);
  const Nanos ttl = 20 * kSecond;
  const Nanos host_ttl = 30 * kSecond;
  const auto prompts = approx_index_test::random_prompts(rng);
  ApproxIndex index(
      {.ttl = ttl, .capacity_pairs = 0, .host_ttl = host_ttl, .host_capacity_pairs = 0});
  ApproxIndex bounded(
      {.ttl = ttl, .capacity_pairs = 40, .host_ttl = host_ttl, .host_capacity_pairs = 20});
  std::map<std::pair<EndpointId, BlockKey>, Nanos> ref;
  Nanos now = 0;
  size_t split = 0;  // matches whose GPU run is shorter than their any-tier run
  for (int step = 0; step < 5000; ++step) {
    now += static_cast<Nanos>(rng.below(2 * kSecond));
    const auto& keys = prompts[rng.below(prompts.size())];
    if (rng.below(2) == 0) {
      const EndpointId e = static_cast<EndpointId>(rng.below(5));
      index.record(e, keys, now);
      bounded.record(e, keys, now);
      for (BlockKey k : keys) ref[{e, k}] = now;
      ASSERT_LE(bounded.held_pairs() - bounded.host_pairs(), 40u);
      ASSERT_LE(bounded.host_pairs(), 20u);
    } else {
      std::vector<EndpointMatch> want;
      for (EndpointId e = 0; e < 5; ++e) {
        uint32_t gpu = 0;
        uint32_t total = 0;
        bool gpu_run = true;
        for (BlockKey k : keys) {
          auto it = ref.find({e, k});
          if (it == ref.end() || it->second < now - ttl - host_ttl) break;
          ++total;
          gpu_run = gpu_run && it->second >= now - ttl;
          gpu += gpu_run ? 1 : 0;
        }
        if (total > 0) want.push_back({e, gpu, total});
      }
      ASSERT_EQ(sorted_matches(index, keys, now), want) << "step " << step;
      for (const EndpointMatch& m : want) split += m.gpu_blocks < m.total_blocks ? 1 : 0;
      for (const EndpointMatch& m : sorted_matches(bounded, keys, now)) {
        ASSERT_LE(m.gpu_blocks, m.total_blocks);
      }
    }
    if (rng.below(100) == 0) index.expire(now);
  }
  EXPECT_GT(split, 50u);
}

// --- The layout: holders kept in the entry until a second one comes, and record()'s
// walk along consecutive arena slots before the hash map.

TEST(ApproxIndexLayout, BlocksHeldByManyEndpoints) {
  ApproxIndex index({.ttl = 100 * kSecond, .capacity_pairs = 0});
  for (EndpointId e = 0; e < 20; ++e) {
    index.record(e, chain({1, 2, 3}), static_cast<Nanos>(e) * kSecond);
  }
  EXPECT_EQ(index.held_pairs(), 60u);
  EXPECT_EQ(index.distinct_blocks(), 3u);
  std::vector<EndpointMatch> want;
  for (EndpointId e = 0; e < 20; ++e) want.push_back({e, 3, 3});
  EXPECT_EQ(sorted_matches(index, chain({1, 2, 3}), 50 * kSecond), want);
  for (EndpointId e = 0; e < 20; e += 2) index.remove_endpoint(e);
  EXPECT_EQ(index.held_pairs(), 30u);
  want.clear();
  for (EndpointId e = 1; e < 20; e += 2) want.push_back({e, 3, 3});
  EXPECT_EQ(sorted_matches(index, chain({1, 2, 3}), 50 * kSecond), want);
  // Endpoints 1, 3, ..., 9 recorded before 10 s: gone at 110 s, the others stay.
  index.expire(110 * kSecond);
  EXPECT_EQ(index.held_pairs(), 15u);
  want.clear();
  for (EndpointId e = 11; e < 20; e += 2) want.push_back({e, 3, 3});
  EXPECT_EQ(sorted_matches(index, chain({1, 2, 3}), 110 * kSecond), want);
  // Down to one holder, then none: the block is freed, and held again from scratch.
  for (EndpointId e = 11; e < 19; e += 2) index.remove_endpoint(e);
  EXPECT_EQ(sorted_matches(index, chain({1, 2, 3}), 110 * kSecond),
            (std::vector<EndpointMatch>{{19, 3, 3}}));
  index.remove_endpoint(19);
  EXPECT_EQ(index.held_pairs(), 0u);
  EXPECT_EQ(index.distinct_blocks(), 0u);
  index.record(4, chain({1, 2}), 120 * kSecond);
  EXPECT_EQ(sorted_matches(index, chain({1, 2, 3}), 120 * kSecond),
            (std::vector<EndpointMatch>{{4, 2, 2}}));
}

TEST(ApproxIndexLayout, RecordFindsKeysOutOfArenaOrder) {
  ApproxIndex index({.capacity_pairs = 0});
  index.record(0, chain({1, 2, 3}), 0);
  index.record(1, chain({2}), 0);
  index.remove_endpoint(0);           // frees 1 and 3; 2 stays (endpoint 1)
  index.record(2, chain({8, 9}), 0);  // reuses the freed slots
  index.record(3, chain({2, 8, 1, 9}), kSecond);
  index.record(3, chain({9, 8}), kSecond);
  EXPECT_EQ(index.distinct_blocks(), 4u);
  EXPECT_EQ(index.held_pairs(), 1u + 2u + 4u);
  EXPECT_EQ(sorted_matches(index, chain({2, 8, 1, 9}), 2 * kSecond),
            (std::vector<EndpointMatch>{{1, 1, 1}, {3, 4, 4}}));
  EXPECT_EQ(sorted_matches(index, chain({8, 9}), 2 * kSecond),
            (std::vector<EndpointMatch>{{2, 2, 2}, {3, 2, 2}}));
  // The approximate index knows blocks, not their order: endpoint 2 holds 9 and 8 too.
  EXPECT_EQ(sorted_matches(index, chain({9, 8}), 2 * kSecond),
            (std::vector<EndpointMatch>{{2, 2, 2}, {3, 2, 2}}));
  EXPECT_TRUE(sorted_matches(index, chain({3}), 2 * kSecond).empty());
}

// Many endpoints per block (holders past the entry and growing), endpoints removed and
// expiry freeing blocks whose slots new ones take: matches and counts as a reference
// model has them.
TEST(ApproxIndexRandomized, ManyEndpointsAndReusedSlotsAgreeWithReferenceModel) {
  Rng rng(11);
  const Nanos ttl = 30 * kSecond;
  constexpr EndpointId kEndpoints = 12;
  ApproxIndex index({.ttl = ttl, .capacity_pairs = 0});
  std::map<std::pair<EndpointId, BlockKey>, Nanos> ref;
  const std::vector<std::vector<BlockKey>> prompts = approx_index_test::random_prompts(rng);
  Nanos now = 0;
  size_t wide = 0;  // matches naming more than 4 endpoints
  for (int step = 0; step < 8000; ++step) {
    now += static_cast<Nanos>(rng.below(kSecond));
    const auto& keys = prompts[rng.below(prompts.size())];
    const uint64_t what = rng.below(100);
    if (what < 50) {
      const EndpointId e = static_cast<EndpointId>(rng.below(kEndpoints));
      index.record(e, keys, now);
      for (BlockKey k : keys) ref[{e, k}] = now;
    } else if (what < 98) {
      const std::vector<EndpointMatch> want =
          approx_index_test::reference_matches(ref, keys, kEndpoints, now, ttl);
      ASSERT_EQ(sorted_matches(index, keys, now), want) << "step " << step;
      wide += want.size() > 4 ? 1 : 0;
    } else if (what < 99) {
      const EndpointId e = static_cast<EndpointId>(rng.below(kEndpoints));
      index.remove_endpoint(e);
      std::erase_if(ref, [&](const auto& held) { return held.first.first == e; });
    } else {
      index.expire(now);
      std::erase_if(ref, [&](const auto& held) { return held.second < now - ttl; });
    }
    ASSERT_EQ(index.held_pairs(), ref.size()) << "step " << step;
    std::set<BlockKey> distinct;
    for (const auto& held : ref) distinct.insert(held.first.second);
    ASSERT_EQ(index.distinct_blocks(), distinct.size()) << "step " << step;
  }
  EXPECT_GT(wide, 50u);
}

}  // namespace
}  // namespace kvgate::kv
