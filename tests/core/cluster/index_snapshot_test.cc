// Index snapshots between gateway replicas: a snapshot restores the same matches into
// another replica's index (whose endpoint ids differ), ages carry over, expired and
// unknown endpoints' pairs are left out, and bad input is an error, never a crash.
#include "core/cluster/index_snapshot.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>

#include "keys.h"

namespace kvgate::cluster {
namespace {

route::EndpointId add_endpoint(route::EndpointPool& pool, const std::string& url) {
  auto id = pool.add({.url = url}, 0);
  EXPECT_TRUE(id) << id.error();
  return *id;
}

// The endpoints a match finds, by URL, with their matched blocks.
std::map<std::string, uint32_t> matches_by_url(kv::ApproxIndex& index,
                                               const route::EndpointPool& pool,
                                               std::span<const kv::BlockKey> keys, Nanos now) {
  std::vector<kv::EndpointMatch> out;
  index.match(keys, now, out);
  std::map<std::string, uint32_t> m;
  for (const kv::EndpointMatch& x : out) m[pool.get(x.endpoint)->spec.url] = x.total_blocks;
  return m;
}

TEST(IndexSnapshot, RestoresTheSameMatchesUnderOtherEndpointIds) {
  route::EndpointPool a_pool{kBs}, b_pool{kBs};
  const auto a1 = add_endpoint(a_pool, "http://e1:8000");
  const auto a2 = add_endpoint(a_pool, "http://e2:8000");
  // The other replica added them in the other order, and one more.
  add_endpoint(b_pool, "http://e3:8000");
  add_endpoint(b_pool, "http://e2:8000");
  add_endpoint(b_pool, "http://e1:8000");
  kv::ApproxIndex a({.ttl = 120 * kSecond}), b({.ttl = 120 * kSecond});
  const auto system = block_keys(8, 1);
  auto turn = system;
  const auto tail = block_keys(3, 2);
  turn.insert(turn.end(), tail.begin(), tail.end());
  a.record(a1, turn, 10 * kSecond);
  a.record(a2, system, 20 * kSecond);

  const Nanos now = 30 * kSecond;
  const IndexSnapshot s = take_snapshot(a, a_pool, now, "gw-a", "1700000000000-5");
  EXPECT_EQ(s.pairs.size(), 11u + 8u);
  Result<IndexSnapshot> back = decode_snapshot(encode(s));
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->replica, "gw-a");
  EXPECT_EQ(back->stream_id, "1700000000000-5");
  ASSERT_EQ(back->pairs.size(), s.pairs.size());

  // Read 5 s later in the other replica's clock (its own time base: 1000 s).
  const RestoreStats r = restore_snapshot(*back, b, b_pool, 1000 * kSecond, 5 * kSecond);
  EXPECT_EQ(r.restored, 19u);
  EXPECT_EQ(r.unknown_endpoint, 0u);
  EXPECT_EQ(matches_by_url(b, b_pool, turn, 1000 * kSecond),
            matches_by_url(a, a_pool, turn, now + 5 * kSecond));
  EXPECT_EQ(matches_by_url(b, b_pool, turn, 1000 * kSecond),
            (std::map<std::string, uint32_t>{{"http://e1:8000", 11}, {"http://e2:8000", 8}}));
  // Ages carried over: e1's entries were 20 s old at the snapshot, 25 s at the restore;
  // they expire 95 s later in b's clock, e2's (15 s old) 10 s after that.
  EXPECT_EQ(matches_by_url(b, b_pool, turn, 1000 * kSecond + 96 * kSecond),
            (std::map<std::string, uint32_t>{{"http://e2:8000", 8}}));
  EXPECT_TRUE(matches_by_url(b, b_pool, turn, 1000 * kSecond + 106 * kSecond).empty());
}

TEST(IndexSnapshot, LeavesOutUnknownEndpointsAndExpiredPairs) {
  route::EndpointPool a_pool{kBs}, b_pool{kBs};
  const auto a1 = add_endpoint(a_pool, "http://e1:8000");
  const auto a2 = add_endpoint(a_pool, "http://e2:8000");
  add_endpoint(b_pool, "http://e2:8000");
  kv::ApproxIndex a({.ttl = 60 * kSecond}), b({.ttl = 60 * kSecond});
  a.record(a1, block_keys(4, 1), 10 * kSecond);
  a.record(a2, block_keys(4, 2), 50 * kSecond);
  a.record(a2, block_keys(2, 3), 0);  // expired by the time of the snapshot: not in it
  const IndexSnapshot s = take_snapshot(a, a_pool, 65 * kSecond, "gw-a", "");
  EXPECT_EQ(s.pairs.size(), 8u);
  const RestoreStats r = restore_snapshot(s, b, b_pool, 0, 5 * kSecond);
  EXPECT_EQ(r.unknown_endpoint, 4u);  // e1 is not in b's pool
  EXPECT_EQ(r.restored, 4u);
  EXPECT_EQ(r.expired, 0u);
  // 15 s old at the snapshot, TTL 60 s: read 55 s later they are gone.
  kv::ApproxIndex c({.ttl = 60 * kSecond});
  const RestoreStats late = restore_snapshot(s, c, b_pool, 0, 55 * kSecond);
  EXPECT_EQ(late.restored, 0u);
  EXPECT_EQ(late.expired, 4u);
}

TEST(IndexSnapshot, BadInputIsAnErrorNeverACrash) {
  route::EndpointPool pool{kBs};
  const auto e = add_endpoint(pool, "http://e1:8000");
  kv::ApproxIndex index({});
  index.record(e, block_keys(6, 1), 0);
  const std::string wire = encode(take_snapshot(index, pool, kSecond, "gw", "1-0"));
  for (size_t n = 0; n < wire.size(); ++n) {
    EXPECT_FALSE(decode_snapshot(wire.substr(0, n))) << "truncated at " << n;
  }
  EXPECT_FALSE(decode_snapshot(wire + "x"));
  std::string bad = wire;
  bad[0] = 9;
  EXPECT_FALSE(decode_snapshot(bad));
  // Any byte flipped: an error or a snapshot, never a crash (ASan/UBSan watch).
  for (size_t i = 0; i < wire.size(); ++i) {
    std::string flip = wire;
    flip[i] = static_cast<char>(flip[i] ^ 0xA5);
    (void)decode_snapshot(flip);
  }
}

}  // namespace
}  // namespace kvgate::cluster
