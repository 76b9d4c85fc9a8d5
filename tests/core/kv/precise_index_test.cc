#include "core/kv/precise_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>

#include "core/common/rng.h"
#include "core/kv/event_apply.h"

namespace kvgate::kv {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace precise_index_test {

constexpr uint32_t kBs = 4;

std::vector<TokenId> tokens(size_t blocks, TokenId start) {
  std::vector<TokenId> t(blocks * kBs);
  std::iota(t.begin(), t.end(), start);
  return t;
}

std::vector<BlockKey> block_keys(std::span<const TokenId> tokens) {
  std::vector<BlockKey> k;
  hash_blocks(tokens, kBs, block_seed("m", "", ""), k);
  return k;
}

std::vector<EndpointMatch> sorted_by_endpoint(std::vector<EndpointMatch> v) {
  std::sort(v.begin(), v.end(),
            [](const EndpointMatch& a, const EndpointMatch& b) { return a.endpoint < b.endpoint; });
  return v;
}

std::vector<EndpointMatch> sorted_matches(PrefixIndex& index, std::span<const BlockKey> keys) {
  std::vector<EndpointMatch> out;
  index.match(keys, 0, out);
  return sorted_by_endpoint(out);
}

class PreciseIndexTest : public ::testing::Test {
 protected:
  PreciseIndex index_{{.model = "m", .block_size = kBs}};
  std::vector<TokenId> prompt_ = tokens(6, 100);
  std::vector<BlockKey> keys_ = block_keys(prompt_);
  std::vector<uint64_t> engine_hashes_ = {11, 12, 13, 14, 15, 16};

  // Blocks [from, to) of prompt_ as one event, chained to block from-1.
  BlockStoredEvent event(size_t from, size_t to) const {
    BlockStoredEvent ev;
    ev.block_hashes = std::span(engine_hashes_).subspan(from, to - from);
    if (from > 0) ev.parent_block_hash = engine_hashes_[from - 1];
    ev.token_ids = std::span(prompt_).subspan(from * kBs, (to - from) * kBs);
    ev.block_size = kBs;
    return ev;
  }
  // Stores blocks [from, to) of prompt_ on `ep` as one event, chained to block from-1.
  void store(EndpointId ep, size_t from, size_t to, Medium medium = Medium::kGpu) {
    BlockStoredEvent ev = event(from, to);
    ev.medium = medium;
    index_.apply_stored(ep, ev);
  }
};

TEST_F(PreciseIndexTest, EmptyIndexMatchesNothing) {
  EXPECT_TRUE(sorted_matches(index_, keys_).empty());
  EXPECT_EQ(index_.distinct_blocks(), 0u);
}

TEST_F(PreciseIndexTest, StoredChainMatchesLeadingBlocks) {
  store(0, 0, 6);
  store(1, 0, 2);
  store(1, 2, 4);  // chained through the parent hash
  EXPECT_EQ(sorted_matches(index_, keys_), (std::vector<EndpointMatch>{{0, 6, 6}, {1, 4, 4}}));
  EXPECT_EQ(index_.distinct_blocks(), 6u);
  EXPECT_EQ(index_.held_pairs(), 10u);
  EXPECT_EQ(index_.blocks_held(1), 4u);
  EXPECT_EQ(index_.stats(1).stored_blocks, 4u);
}

TEST_F(PreciseIndexTest, RequestLongerThanHeldPrefixStopsAtFirstMiss) {
  store(0, 0, 3);
  auto longer = tokens(8, 100);
  EXPECT_EQ(sorted_matches(index_, block_keys(longer)), (std::vector<EndpointMatch>{{0, 3, 3}}));
  auto other = tokens(3, 5000);
  EXPECT_TRUE(sorted_matches(index_, block_keys(other)).empty());
}

TEST_F(PreciseIndexTest, RemovalInTheMiddleCutsTheMatch) {
  store(0, 0, 6);
  uint64_t h = engine_hashes_[3];
  index_.apply_removed(0, {.block_hashes = std::span(&h, 1)});
  EXPECT_EQ(sorted_matches(index_, keys_), (std::vector<EndpointMatch>{{0, 3, 3}}));
  EXPECT_EQ(index_.blocks_held(0), 5u);
  EXPECT_EQ(index_.stats(0).removed_blocks, 1u);
}

TEST_F(PreciseIndexTest, TiersAreTrackedSeparately) {
  store(0, 0, 6, Medium::kGpu);
  store(0, 0, 6, Medium::kCpu);  // offloaded copies
  uint64_t h = engine_hashes_[2];
  index_.apply_removed(0, {.block_hashes = std::span(&h, 1), .medium = Medium::kGpu});
  // GPU run stops at block 2, but the CPU copy keeps the prefix whole.
  EXPECT_EQ(sorted_matches(index_, keys_), (std::vector<EndpointMatch>{{0, 2, 6}}));
  index_.apply_removed(0, {.block_hashes = std::span(&h, 1), .medium = Medium::kCpu});
  EXPECT_EQ(sorted_matches(index_, keys_), (std::vector<EndpointMatch>{{0, 2, 2}}));
}

TEST_F(PreciseIndexTest, TokenlessStoredAddsAMediumToKnownBlocks) {
  // vLLM's CPU offloading connector: BlockStored(medium CPU) without tokens or parent
  // names blocks the endpoint stored before.
  store(0, 0, 6);
  BlockStoredEvent copy;
  copy.block_hashes = std::span(engine_hashes_).subspan(0, 4);
  copy.block_size = kBs;
  copy.medium = Medium::kCpu;
  index_.apply_stored(0, copy);
  uint64_t h = engine_hashes_[1];
  index_.apply_removed(0, {.block_hashes = std::span(&h, 1), .medium = Medium::kGpu});
  // GPU up to block 1; blocks 0-3 also in CPU memory, 4-5 in GPU memory: all six held.
  EXPECT_EQ(sorted_matches(index_, keys_), (std::vector<EndpointMatch>{{0, 1, 6}}));
  index_.apply_removed(0, {.block_hashes = std::span(engine_hashes_), .medium = Medium::kGpu});
  EXPECT_EQ(sorted_matches(index_, keys_), (std::vector<EndpointMatch>{{0, 0, 4}}));
  EXPECT_EQ(index_.blocks_held(0), 4u);
  EXPECT_EQ(index_.stats(0).stored_blocks, 10u);
  EXPECT_EQ(index_.stats(0).anomalies(), 0u);

  // A copy of a block endpoint 1 never stored is counted, not guessed at.
  uint64_t unknown = 99;
  copy.block_hashes = std::span(&unknown, 1);
  index_.apply_stored(1, copy);
  EXPECT_EQ(index_.stats(1).unknown_copied, 1u);
  EXPECT_EQ(index_.stats(1).anomalies(), 1u);
  EXPECT_EQ(index_.blocks_held(1), 0u);
}

TEST_F(PreciseIndexTest, EventsWithoutAMediumAreGpuAndCpuCopiesApplyThroughEventApply) {
  BlockStored stored;  // as older vLLM sends it: no medium
  stored.block_hashes = engine_hashes_;
  stored.token_ids = prompt_;
  stored.block_size = kBs;
  BlockStored copied;  // as the offloading connector sends it
  copied.block_hashes = {engine_hashes_[0], engine_hashes_[1]};
  copied.block_size = kBs;
  copied.medium = "CPU";
  BlockRemoved evicted{{engine_hashes_[0], engine_hashes_[1]}, std::string("GPU")};
  const std::vector<KvEvent> events = {stored, copied, evicted};
  apply_events(index_, 0, events);
  EXPECT_EQ(sorted_matches(index_, keys_), (std::vector<EndpointMatch>{{0, 0, 6}}));
  EXPECT_EQ(index_.stats(0).anomalies(), 0u);
}

// Copies in `medium` of blocks the endpoint stored (a tokenless BlockStored).
void copy_to(PreciseIndex& index, EndpointId ep, std::span<const uint64_t> hashes, Medium medium) {
  BlockStoredEvent copy;
  copy.block_hashes = hashes;
  copy.block_size = kBs;
  copy.medium = medium;
  index.apply_stored(ep, copy);
}

TEST_F(PreciseIndexTest, DiskOnlyBlocksPastTheGpuRunAreCountedApart) {
  const std::span<const uint64_t> h(engine_hashes_);
  store(0, 0, 6);
  store(1, 0, 6);                                     // endpoint 1: GPU only throughout
  copy_to(index_, 0, h.subspan(0, 3), Medium::kCpu);  // blocks 0-2 in host memory
  copy_to(index_, 0, h, Medium::kDisk);               // every block on disk
  index_.apply_removed(0, {.block_hashes = h.subspan(1, 5), .medium = Medium::kGpu});
  // Endpoint 0: block 0 in all three tiers, 1-2 in host memory and on disk, 3-5 on disk
  // only (one run of equal holder sets: counted lazily).
  EXPECT_EQ(sorted_matches(index_, keys_),
            (std::vector<EndpointMatch>{{0, 1, 6, 3}, {1, 6, 6, 0}}));
  index_.apply_removed(0, {.block_hashes = h.subspan(1, 1), .medium = Medium::kCpu});
  EXPECT_EQ(sorted_matches(index_, keys_),
            (std::vector<EndpointMatch>{{0, 1, 6, 4}, {1, 6, 6, 0}}));
  index_.apply_removed(0, {.block_hashes = h.subspan(4, 1), .medium = Medium::kDisk});
  EXPECT_EQ(sorted_matches(index_, keys_),
            (std::vector<EndpointMatch>{{0, 1, 4, 2}, {1, 6, 6, 0}}));
  EXPECT_EQ(index_.blocks_held(0), 5u);
  EXPECT_EQ(index_.stats(0).anomalies(), 0u);
}

TEST_F(PreciseIndexTest, DiskTiersOfManyHoldersSurviveTheOverflowList) {
  // Five holders: more than fit inline, so the tiers live in the overflow list.
  for (EndpointId e = 0; e < 5; ++e) store(e, 0, 6);
  copy_to(index_, 2, engine_hashes_, Medium::kDisk);
  index_.apply_removed(2, {.block_hashes = engine_hashes_, .medium = Medium::kGpu});
  EXPECT_EQ(sorted_matches(index_, keys_),
            (std::vector<EndpointMatch>{
                {0, 6, 6, 0}, {1, 6, 6, 0}, {2, 0, 6, 6}, {3, 6, 6, 0}, {4, 6, 6, 0}}));
  // Back to three holders: inline again, tiers kept.
  index_.apply_all_cleared(3);
  index_.apply_all_cleared(4);
  EXPECT_EQ(sorted_matches(index_, keys_),
            (std::vector<EndpointMatch>{{0, 6, 6, 0}, {1, 6, 6, 0}, {2, 0, 6, 6}}));
  index_.apply_removed(2, {.block_hashes = engine_hashes_, .medium = Medium::kDisk});
  EXPECT_EQ(sorted_matches(index_, keys_),
            (std::vector<EndpointMatch>{{0, 6, 6, 0}, {1, 6, 6, 0}}));
  EXPECT_EQ(index_.blocks_held(2), 0u);
}

TEST_F(PreciseIndexTest, MediaAreReadWithoutCaseInTheSpellingsInUse) {
  BlockStored stored;
  stored.block_hashes = engine_hashes_;
  stored.token_ids = prompt_;
  stored.block_size = kBs;
  stored.medium = "GPU";
  auto copied = [&](std::vector<uint64_t> hashes, const char* medium) {
    BlockStored c;
    c.block_hashes = std::move(hashes);
    c.block_size = kBs;
    c.medium = medium;
    return c;
  };
  const std::vector<KvEvent> events = {
      stored,
      copied({11, 12}, "cpu"),         // LMCache's CPU backend
      copied({13}, "DISK"),            // SGLang's HiCache storage, the engine model
      copied({14}, "SHARED_STORAGE"),  // llm-d's file-system offloading backend
      copied({15}, "disk"),
      BlockRemoved{engine_hashes_, std::string("GPU")},
  };
  apply_events(index_, 0, events);
  // Blocks 0-1 in host memory, 2-4 on disk, 5 gone.
  EXPECT_EQ(sorted_matches(index_, keys_), (std::vector<EndpointMatch>{{0, 0, 5, 3}}));
  const std::vector<KvEvent> drop = {BlockRemoved{{15}, std::string("Disk")},
                                     BlockRemoved{{11}, std::string("CXL")}};
  apply_events(index_, 0, drop);
  EXPECT_EQ(sorted_matches(index_, keys_), (std::vector<EndpointMatch>{}));
  EXPECT_EQ(index_.stats(0).anomalies(), 0u);
}

TEST(MergeMatchesTest, DiskBlocksFollowTheLargerTotal) {
  std::vector<EndpointMatch> a{{0, 2, 4, 2}, {1, 1, 5, 3}, {2, 0, 3, 3}};
  const std::vector<EndpointMatch> b{{0, 3, 6, 1}, {1, 2, 5, 1}, {2, 1, 2, 0}, {3, 4, 4, 0}};
  merge_matches(a, b);
  EXPECT_EQ(a,
            (std::vector<EndpointMatch>{{0, 3, 6, 1}, {1, 2, 5, 1}, {2, 1, 3, 3}, {3, 4, 4, 0}}));
}

TEST_F(PreciseIndexTest, AllBlocksClearedForgetsOneEndpoint) {
  store(0, 0, 6);
  store(1, 0, 6);
  index_.apply_all_cleared(0);
  EXPECT_EQ(sorted_matches(index_, keys_), (std::vector<EndpointMatch>{{1, 6, 6}}));
  EXPECT_EQ(index_.stats(0).cleared, 1u);
  EXPECT_EQ(index_.blocks_held(0), 0u);
  index_.remove_endpoint(1);
  EXPECT_TRUE(sorted_matches(index_, keys_).empty());
  EXPECT_EQ(index_.distinct_blocks(), 0u);
  EXPECT_EQ(index_.held_pairs(), 0u);
}

TEST_F(PreciseIndexTest, UnknownParentIsCountedAndIgnored) {
  store(0, 2, 4);  // parent hash 12 was never stored on endpoint 0
  EXPECT_EQ(index_.stats(0).unknown_parent, 1u);
  EXPECT_EQ(index_.stats(0).anomalies(), 1u);
  EXPECT_EQ(index_.distinct_blocks(), 0u);
}

TEST_F(PreciseIndexTest, UnknownRemovalIsCountedAndIgnored) {
  store(0, 0, 2);
  uint64_t h = 999;
  index_.apply_removed(0, {.block_hashes = std::span(&h, 1)});
  EXPECT_EQ(index_.stats(0).unknown_removed, 1u);
  EXPECT_EQ(index_.blocks_held(0), 2u);
}

TEST_F(PreciseIndexTest, BlockSizeMismatchIsCountedAndIgnored) {
  BlockStoredEvent ev = event(0, 2);
  ev.block_size = 16;  // pool uses 4
  index_.apply_stored(0, ev);
  ev.block_size = kBs;
  ev.token_ids = std::span(prompt_).first(2 * kBs - 1);  // short
  index_.apply_stored(0, ev);
  EXPECT_EQ(index_.stats(0).block_size_mismatch, 2u);
  EXPECT_EQ(index_.distinct_blocks(), 0u);
}

TEST_F(PreciseIndexTest, ManyHoldersSpillAndReturnInline) {
  for (EndpointId e = 0; e < 10; ++e) store(e, 0, 6);
  auto m = sorted_matches(index_, keys_);
  ASSERT_EQ(m.size(), 10u);
  for (const auto& x : m) EXPECT_EQ(x.total_blocks, 6u);
  for (EndpointId e = 0; e < 9; ++e) index_.apply_all_cleared(e);
  EXPECT_EQ(sorted_matches(index_, keys_), (std::vector<EndpointMatch>{{9, 6, 6}}));
  EXPECT_EQ(index_.held_pairs(), 6u);
}

TEST_F(PreciseIndexTest, LoraAdapterSeparatesKeys) {
  BlockStoredEvent ev = event(0, 2);
  ev.lora_name = "sql-adapter";
  index_.apply_stored(0, ev);
  EXPECT_TRUE(sorted_matches(index_, keys_).empty());
  std::vector<BlockKey> lora_keys;
  hash_blocks(prompt_, kBs, block_seed("m", "sql-adapter", ""), lora_keys);
  EXPECT_EQ(sorted_matches(index_, lora_keys), (std::vector<EndpointMatch>{{0, 2, 2}}));
}

TEST_F(PreciseIndexTest, CacheSaltSeedsTheRootAndItsChildren) {
  BlockStoredEvent root = event(0, 2);
  root.lora_name = "sql-adapter";
  root.cache_salt = "tenant-a";
  index_.apply_stored(0, root);
  BlockStoredEvent child = event(2, 3);  // the salt is the root's only: the child inherits it
  child.lora_name = "sql-adapter";
  child.cache_salt = "ignored-on-a-child";
  index_.apply_stored(0, child);
  std::vector<BlockKey> salted, other_salt, unsalted;
  hash_blocks(prompt_, kBs, block_seed("m", "sql-adapter", "tenant-a"), salted);
  hash_blocks(prompt_, kBs, block_seed("m", "sql-adapter", "tenant-b"), other_salt);
  hash_blocks(prompt_, kBs, block_seed("m", "sql-adapter", ""), unsalted);
  EXPECT_EQ(sorted_matches(index_, salted), (std::vector<EndpointMatch>{{0, 3, 3}}));
  EXPECT_TRUE(sorted_matches(index_, other_salt).empty());
  EXPECT_TRUE(sorted_matches(index_, unsalted).empty());
  EXPECT_TRUE(sorted_matches(index_, keys_).empty());
}

TEST(PreciseIndexCapacity, EvictsLeastRecentlyUsed) {
  PreciseIndex index({.model = "m", .block_size = kBs, .capacity_blocks = 32});
  std::vector<std::vector<BlockKey>> prompts;
  uint64_t next_hash = 1;
  for (int p = 0; p < 4; ++p) {
    auto t = tokens(8, 1000 * (p + 1));
    std::vector<uint64_t> h(8);
    for (auto& x : h) x = next_hash++;
    index.apply_stored(0, {.block_hashes = h, .token_ids = t, .block_size = kBs});
    prompts.push_back(block_keys(t));
  }
  EXPECT_EQ(index.distinct_blocks(), 32u);
  std::vector<EndpointMatch> out;
  index.match(prompts[0], 0, out);  // prompt 0 becomes the most recent
  auto t = tokens(8, 90000);
  std::vector<uint64_t> h(8);
  for (auto& x : h) x = next_hash++;
  index.apply_stored(0, {.block_hashes = h, .token_ids = t, .block_size = kBs});
  EXPECT_LE(index.distinct_blocks(), 32u);
  // Prompt 1 was the least recently used: it went first; prompt 0 survived.
  EXPECT_EQ(sorted_matches(index, prompts[0]), (std::vector<EndpointMatch>{{0, 8, 8}}));
  EXPECT_TRUE(sorted_matches(index, prompts[1]).empty());
  EXPECT_EQ(index.held_pairs(), index.blocks_held(0));
}

// --- randomized comparison with a brute-force reference model ---

struct Reference {
  struct Held {
    BlockKey own;
    uint8_t tiers;
  };
  std::map<EndpointId, std::map<uint64_t, Held>> endpoints;  // engine hash -> held

  std::vector<EndpointMatch> match(std::span<const BlockKey> keys) const {
    std::vector<EndpointMatch> out;
    for (const auto& [e, m] : endpoints) {
      std::map<BlockKey, uint8_t> tiers;
      for (const auto& [h, held] : m) tiers[held.own] |= held.tiers;
      uint32_t total = 0, gpu = 0;
      bool gpu_alive = true;
      for (BlockKey k : keys) {
        auto it = tiers.find(k);
        if (it == tiers.end() || it->second == 0) break;
        ++total;
        if (gpu_alive && (it->second & 1)) {
          ++gpu;
        } else {
          gpu_alive = false;
        }
      }
      if (total > 0) out.push_back({e, gpu, total});
    }
    return out;
  }
  size_t pairs() const {
    size_t n = 0;
    for (const auto& [e, m] : endpoints) n += m.size();
    return n;
  }
};

uint64_t engine_hash(EndpointId e, BlockKey own) { return (own ^ (0x5bd1e995ULL * (e + 1))) | 1; }

TEST(PreciseIndexRandomized, AgreesWithReferenceModel) {
  Rng rng(20261130);
  constexpr int kEndpoints = 6;
  // A prefix tree of prompts: each new prompt copies a prefix of an earlier one.
  std::vector<std::vector<TokenId>> prompts;
  std::vector<std::vector<BlockKey>> keys;
  for (int p = 0; p < 40; ++p) {
    std::vector<TokenId> t;
    if (p > 0 && rng.below(4) != 0) {
      const auto& base = prompts[rng.below(prompts.size())];
      size_t cut = rng.below(base.size() / kBs + 1) * kBs;
      t.assign(base.begin(), base.begin() + static_cast<ptrdiff_t>(cut));
    }
    size_t extra = 1 + rng.below(10);
    for (size_t i = 0; i < extra * kBs; ++i) t.push_back(static_cast<TokenId>(rng.below(50)));
    keys.push_back(block_keys(t));
    prompts.push_back(std::move(t));
  }

  PreciseIndex index({.model = "m", .block_size = kBs});
  Reference ref;
  EventStats expected[kEndpoints];
  for (int step = 0; step < 6000; ++step) {
    EndpointId e = static_cast<EndpointId>(rng.below(kEndpoints));
    auto& mine = ref.endpoints[e];
    uint64_t op = rng.below(100);
    if (op < 55) {  // store a run of blocks of a prompt, chained to the block before
      size_t p = rng.below(prompts.size());
      size_t n = keys[p].size();
      size_t from = rng.below(n);
      size_t to = from + 1 + rng.below(n - from);
      std::vector<uint64_t> hashes;
      for (size_t i = from; i < to; ++i) hashes.push_back(engine_hash(e, keys[p][i]));
      BlockStoredEvent ev;
      ev.block_hashes = hashes;
      std::optional<uint64_t> parent;
      if (from > 0) parent = engine_hash(e, keys[p][from - 1]);
      ev.parent_block_hash = parent;
      ev.token_ids = std::span(prompts[p]).subspan(from * kBs, (to - from) * kBs);
      ev.block_size = kBs;
      ev.medium = rng.below(4) == 0 ? Medium::kCpu : Medium::kGpu;
      bool bad_size = rng.below(50) == 0;
      if (bad_size) ev.block_size = kBs * 2;
      index.apply_stored(e, ev);
      if (bad_size) {
        ++expected[e].block_size_mismatch;
      } else if (parent && !mine.count(*parent)) {
        ++expected[e].unknown_parent;
      } else {
        for (size_t i = from; i < to; ++i) {
          auto& held = mine[engine_hash(e, keys[p][i])];
          held.own = keys[p][i];
          held.tiers |= static_cast<uint8_t>(ev.medium);
        }
        expected[e].stored_blocks += to - from;
      }
    } else if (op < 90) {  // remove some held blocks (and now and then an unknown one)
      std::vector<uint64_t> hashes;
      for (const auto& [h, held] : mine) {
        if (rng.below(3) == 0) hashes.push_back(h);
      }
      if (rng.below(10) == 0) hashes.push_back(0xdead0000 + rng.below(100) * 2);
      Medium medium = rng.below(4) == 0 ? Medium::kCpu : Medium::kGpu;
      index.apply_removed(e, {.block_hashes = hashes, .medium = medium});
      for (uint64_t h : hashes) {
        auto it = mine.find(h);
        if (it == mine.end()) {
          ++expected[e].unknown_removed;
          continue;
        }
        ++expected[e].removed_blocks;
        it->second.tiers &= static_cast<uint8_t>(~static_cast<uint8_t>(medium));
        if (it->second.tiers == 0) mine.erase(it);
      }
    } else if (op < 93) {
      index.apply_all_cleared(e);
      mine.clear();
      ++expected[e].cleared;
    } else {  // match a random prompt and compare
      size_t p = rng.below(prompts.size());
      ASSERT_EQ(sorted_matches(index, keys[p]), ref.match(keys[p])) << "step " << step;
    }
    ASSERT_EQ(index.held_pairs(), ref.pairs()) << "step " << step;
  }
  for (EndpointId e = 0; e < kEndpoints; ++e) {
    EventStats s = index.stats(e);
    EXPECT_EQ(s.stored_blocks, expected[e].stored_blocks);
    EXPECT_EQ(s.removed_blocks, expected[e].removed_blocks);
    EXPECT_EQ(s.cleared, expected[e].cleared);
    EXPECT_EQ(s.unknown_parent, expected[e].unknown_parent);
    EXPECT_EQ(s.unknown_removed, expected[e].unknown_removed);
    EXPECT_EQ(s.block_size_mismatch, expected[e].block_size_mismatch);
  }
  size_t matched = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    EXPECT_EQ(sorted_matches(index, keys[p]), ref.match(keys[p])) << p;
    matched += ref.match(keys[p]).size();
  }
  // The sequence must have exercised every path, or the comparison proves little.
  uint64_t parents = 0, removals = 0, mismatches = 0;
  for (const auto& s : expected) {
    parents += s.unknown_parent;
    removals += s.unknown_removed;
    mismatches += s.block_size_mismatch;
  }
  EXPECT_GT(parents, 0u);
  EXPECT_GT(removals, 0u);
  EXPECT_GT(mismatches, 0u);
  EXPECT_GT(matched, 0u);
}

}  // namespace precise_index_test
}  // namespace kvgate::kv
