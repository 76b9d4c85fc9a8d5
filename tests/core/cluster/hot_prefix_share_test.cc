// Hot prefixes shared between gateway replicas: the wire form round-trips and rejects bad
// input; merging a replica's list with its peers' ranks the fleet's prefixes, sums the
// hits of one prefix seen by several, and never keeps a prefix with one it begins.
#include "core/cluster/hot_prefix_share.h"

#include <gtest/gtest.h>

namespace kvgate::cluster {
namespace {

kv::HotPrefix hot_prefix(kv::BlockKey key, std::vector<kv::TokenId> tokens, double hits) {
  return {.key = key,
          .blocks = static_cast<uint32_t>(tokens.size() / 2),
          .hits = hits,
          .token_ids = std::move(tokens)};
}

TEST(HotPrefixShare, RoundTripsThroughItsWireForm) {
  std::vector<kv::HotPrefix> list = {hot_prefix(7, {1, 2, 3, 4}, 3.5),
                                     hot_prefix(9, {70000, 5, 6, 7, 8, 9}, 1)};
  list.push_back({.key = 11, .blocks = 1, .hits = 2, .text = "You are a helpful assistant."});
  Result<SharedHotPrefixes> back =
      decode_hot_prefixes(encode_hot_prefixes("gw-2", 1700000000123, list));
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->replica, "gw-2");
  EXPECT_EQ(back->written_ms, 1700000000123);
  ASSERT_EQ(back->prefixes.size(), 3u);
  for (size_t i = 0; i < list.size(); ++i) {
    EXPECT_EQ(back->prefixes[i].key, list[i].key);
    EXPECT_EQ(back->prefixes[i].blocks, list[i].blocks);
    EXPECT_DOUBLE_EQ(back->prefixes[i].hits, list[i].hits);
    EXPECT_EQ(back->prefixes[i].token_ids, list[i].token_ids);
    EXPECT_EQ(back->prefixes[i].text, list[i].text);
  }
}

TEST(HotPrefixShare, BadInputIsAnErrorNeverACrash) {
  const std::string wire =
      encode_hot_prefixes("gw", 5, std::vector<kv::HotPrefix>{hot_prefix(7, {1, 2, 3, 4}, 2)});
  for (size_t n = 0; n < wire.size(); ++n) {
    EXPECT_FALSE(decode_hot_prefixes(wire.substr(0, n))) << "truncated at " << n;
  }
  EXPECT_FALSE(decode_hot_prefixes(wire + "x"));
  for (size_t i = 0; i < wire.size(); ++i) {
    std::string flip = wire;
    flip[i] = static_cast<char>(flip[i] ^ 0x5A);
    (void)decode_hot_prefixes(flip);
  }
}

TEST(MergeHotPrefixes, RanksTheFleetsPrefixesAndSumsSharedOnes) {
  // This replica saw A a little; its peers saw B a lot and A too.
  const std::vector<std::vector<kv::HotPrefix>> lists = {
      {hot_prefix(1, {1, 1, 1, 1}, 2)},
      {hot_prefix(2, {2, 2, 2, 2}, 5), hot_prefix(1, {1, 1, 1, 1}, 1)},
      {hot_prefix(2, {2, 2, 2, 2}, 4)},
  };
  const auto top = kv::merge_hot_prefixes(lists, 8);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].key, 2u);
  EXPECT_DOUBLE_EQ(top[0].hits, 9);
  EXPECT_EQ(top[1].key, 1u);
  EXPECT_DOUBLE_EQ(top[1].hits, 3);
  EXPECT_EQ(kv::merge_hot_prefixes(lists, 1).size(), 1u);
}

TEST(MergeHotPrefixes, KeepsTheDeeperOfAPrefixAndItsExtension) {
  // A system prompt (2 blocks) in one list, the same with a first turn (3 blocks) in
  // another: warming the deeper one caches both.
  const std::vector<std::vector<kv::HotPrefix>> lists = {
      {hot_prefix(1, {4, 4, 5, 5}, 10)},
      {hot_prefix(2, {4, 4, 5, 5, 6, 6}, 4)},
      {{.key = 3, .blocks = 1, .hits = 1, .text = "Hello"},
       {.key = 4, .blocks = 2, .hits = 1, .text = "Hello there"}},
  };
  const auto top = kv::merge_hot_prefixes(lists, 8);
  std::vector<kv::BlockKey> keys;
  for (const auto& p : top) keys.push_back(p.key);
  EXPECT_EQ(keys, (std::vector<kv::BlockKey>{2, 4}));
}

}  // namespace
}  // namespace kvgate::cluster
