#include "core/route/active_blocks.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "core/common/rng.h"

namespace kvgate::route {
namespace {

TEST(ActiveBlocks, SharedPrefixCountsOncePerEndpoint) {
  ActiveBlocks a;
  std::vector<kv::BlockKey> r1 = {1, 2, 3, 4};
  std::vector<kv::BlockKey> r2 = {1, 2, 7};
  EXPECT_EQ(a.add(0, r1), 4u);
  EXPECT_EQ(a.add(0, r2), 1u);  // 1, 2 already held
  EXPECT_EQ(a.add(1, r2), 3u);  // another endpoint counts its own
  EXPECT_EQ(a.blocks(0), 5u);
  EXPECT_EQ(a.blocks(1), 3u);
  EXPECT_EQ(a.release(0, r1), 2u);  // 3, 4 freed; 1, 2 still used by r2
  EXPECT_EQ(a.blocks(0), 3u);
  EXPECT_EQ(a.release(0, r2), 3u);
  EXPECT_EQ(a.blocks(0), 0u);
  EXPECT_EQ(a.size(), 3u);  // endpoint 1 still holds 1, 2, 7
}

TEST(ActiveBlocks, PrefixPerEndpointStopsAtFirstUnheldBlock) {
  ActiveBlocks a;
  std::vector<kv::BlockKey> prompt = {10, 11, 12, 13, 14};
  a.add(2, std::span(prompt).first(3));
  a.add(5, std::span(prompt).first(1));
  a.add(7, std::vector<kv::BlockKey>{99, 100});
  std::vector<ActiveBlocks::Prefix> out;
  a.prefix(prompt, out);
  std::map<kv::EndpointId, uint32_t> got;
  for (auto p : out) got[p.endpoint] = p.blocks;
  EXPECT_EQ(got, (std::map<kv::EndpointId, uint32_t>{{2, 3}, {5, 1}}));
}

TEST(ActiveBlocks, RemoveEndpointForgetsOnlyIt) {
  ActiveBlocks a;
  std::vector<kv::BlockKey> k = {1, 2, 3};
  a.add(0, k);
  a.add(1, k);
  a.remove_endpoint(0);
  EXPECT_EQ(a.blocks(0), 0u);
  EXPECT_EQ(a.blocks(1), 3u);
  std::vector<ActiveBlocks::Prefix> out;
  a.prefix(k, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].endpoint, 1u);
  EXPECT_EQ(out[0].blocks, 3u);
}

// Randomized against a reference model: chained prompts drawn from a small tree of
// prefixes, added and released in random order over several endpoints, with the
// table growing and shrinking through many probe-chain deletions.
TEST(ActiveBlocks, MatchesReferenceModel) {
  Rng rng(7);
  ActiveBlocks a;
  std::map<std::pair<kv::EndpointId, kv::BlockKey>, int> ref;
  struct Live {
    kv::EndpointId ep;
    std::vector<kv::BlockKey> keys;
  };
  std::vector<Live> live;
  auto prompt = [&] {
    // Chained like real keys: a prompt is (branch, split); its blocks before `split`
    // are shared by every prompt (key i), the rest are its own. Equal keys at a
    // position then imply equal prefixes, as with block_hash.h.
    std::vector<kv::BlockKey> k;
    uint64_t branch = rng.below(20);
    size_t split = rng.below(5);
    size_t len = 1 + rng.below(30);
    for (size_t i = 0; i < len; ++i) k.push_back(i < split ? i : (branch * 10 + split) * 1000 + i);
    return k;
  };
  for (int step = 0; step < 4000; ++step) {
    if (live.empty() || rng.below(3) != 0) {
      Live l{static_cast<kv::EndpointId>(rng.below(6)), prompt()};
      uint32_t fresh = 0;
      for (auto k : l.keys) fresh += ref[{l.ep, k}]++ == 0;
      EXPECT_EQ(a.add(l.ep, l.keys), fresh);
      live.push_back(std::move(l));
    } else if (rng.below(50) == 0) {
      kv::EndpointId ep = static_cast<kv::EndpointId>(rng.below(6));
      a.remove_endpoint(ep);
      std::erase_if(ref, [&](const auto& kv) { return kv.first.first == ep; });
      std::erase_if(live, [&](const Live& l) { return l.ep == ep; });
    } else {
      size_t i = rng.below(live.size());
      uint32_t freed = 0;
      for (auto k : live[i].keys) {
        if (--ref[{live[i].ep, k}] == 0) {
          ref.erase({live[i].ep, k});
          ++freed;
        }
      }
      EXPECT_EQ(a.release(live[i].ep, live[i].keys), freed);
      live[i] = std::move(live.back());
      live.pop_back();
    }
    if (step % 97 == 0) {
      std::set<kv::BlockKey> distinct;
      for (auto& [k, n] : ref) distinct.insert(k.second);
      ASSERT_EQ(a.size(), distinct.size());
      for (kv::EndpointId ep = 0; ep < 6; ++ep) {
        uint64_t n = 0;
        for (auto& [k, c] : ref) n += k.first == ep;
        ASSERT_EQ(a.blocks(ep), n) << "endpoint " << ep;
      }
      auto p = prompt();
      std::vector<ActiveBlocks::Prefix> out;
      a.prefix(p, out);
      std::map<kv::EndpointId, uint32_t> got, want;
      for (auto x : out) got[x.endpoint] = x.blocks;
      for (kv::EndpointId ep = 0; ep < 6; ++ep) {
        uint32_t n = 0;
        while (n < p.size() && ref.contains({ep, p[n]})) ++n;
        if (n > 0) want[ep] = n;
      }
      ASSERT_EQ(got, want);
    }
  }
}

// Requests ending inside one another's prefixes, diverging at every depth and coming
// back: the trie splits edges, removes the nodes nobody passes through and merges the
// ones left with one child. Against the same reference model, with prompts cut at any
// length from a three-level tree of chained segments, and everything released at the
// end (nothing may be left over).
TEST(ActiveBlocks, MatchesReferenceModelOnNestedPrefixes) {
  Rng rng(11);
  ActiveBlocks a;
  std::map<std::pair<kv::EndpointId, kv::BlockKey>, int> ref;
  struct Live {
    kv::EndpointId ep;
    std::vector<kv::BlockKey> keys;
  };
  std::vector<Live> live;
  // Segment s of a path (a, b, c): its length and keys depend on the path up to it, so
  // equal keys imply equal prefixes.
  auto prompt = [&] {
    std::vector<kv::BlockKey> k;
    uint64_t id = 1;
    for (int s = 0; s < 3; ++s) {
      id = id * 8 + 1 + rng.below(3);
      const size_t len = 1 + (id * 2654435761u) % 9;
      for (size_t i = 0; i < len; ++i) k.push_back((id << 16) | k.size());
    }
    k.resize(1 + rng.below(k.size()));  // may end inside any segment
    return k;
  };
  auto check = [&] {
    std::set<kv::BlockKey> distinct;
    for (auto& [k, n] : ref) distinct.insert(k.second);
    ASSERT_EQ(a.size(), distinct.size());
    for (kv::EndpointId ep = 0; ep < 5; ++ep) {
      uint64_t n = 0;
      for (auto& [k, c] : ref) n += k.first == ep;
      ASSERT_EQ(a.blocks(ep), n) << "endpoint " << ep;
    }
    for (int q = 0; q < 3; ++q) {
      auto p = prompt();
      std::vector<ActiveBlocks::Prefix> out;
      a.prefix(p, out);
      std::map<kv::EndpointId, uint32_t> got, want;
      for (auto x : out) ASSERT_TRUE(got.emplace(x.endpoint, x.blocks).second);
      for (kv::EndpointId ep = 0; ep < 5; ++ep) {
        uint32_t n = 0;
        while (n < p.size() && ref.contains({ep, p[n]})) ++n;
        if (n > 0) want[ep] = n;
      }
      ASSERT_EQ(got, want);
    }
  };
  auto release = [&](size_t i) {
    uint32_t freed = 0;
    for (auto k : live[i].keys) {
      if (--ref[{live[i].ep, k}] == 0) {
        ref.erase({live[i].ep, k});
        ++freed;
      }
    }
    EXPECT_EQ(a.release(live[i].ep, live[i].keys), freed);
    live[i] = std::move(live.back());
    live.pop_back();
  };
  for (int step = 0; step < 6000; ++step) {
    if (live.size() < 40 && (live.empty() || rng.below(2) == 0)) {
      Live l{static_cast<kv::EndpointId>(rng.below(5)), prompt()};
      uint32_t fresh = 0;
      for (auto k : l.keys) fresh += ref[{l.ep, k}]++ == 0;
      ASSERT_EQ(a.add(l.ep, l.keys), fresh);
      live.push_back(std::move(l));
    } else if (rng.below(100) == 0) {
      kv::EndpointId ep = static_cast<kv::EndpointId>(rng.below(5));
      a.remove_endpoint(ep);
      std::erase_if(ref, [&](const auto& kv) { return kv.first.first == ep; });
      std::erase_if(live, [&](const Live& l) { return l.ep == ep; });
    } else {
      release(rng.below(live.size()));
    }
    if (step % 13 == 0) check();
  }
  while (!live.empty()) release(rng.below(live.size()));
  EXPECT_EQ(a.size(), 0u);
  for (kv::EndpointId ep = 0; ep < 5; ++ep) EXPECT_EQ(a.blocks(ep), 0u);
  std::vector<ActiveBlocks::Prefix> out;
  a.prefix(prompt(), out);
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace kvgate::route
