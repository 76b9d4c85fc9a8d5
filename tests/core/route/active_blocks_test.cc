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

// The reference: a count per (endpoint, key), and the requests in flight. Each call does
// the same to an ActiveBlocks and checks its answer against the model's.
struct Model {
  struct Live {
    kv::EndpointId ep;
    std::vector<kv::BlockKey> keys;
  };
  std::map<std::pair<kv::EndpointId, kv::BlockKey>, int> ref;
  std::vector<Live> live;

  void add(ActiveBlocks& a, kv::EndpointId ep, std::vector<kv::BlockKey> keys) {
    uint32_t fresh = 0;
    for (auto k : keys) fresh += ref[{ep, k}]++ == 0;
    ASSERT_EQ(a.add(ep, keys), fresh);
    live.push_back({ep, std::move(keys)});
  }
  void release(ActiveBlocks& a, size_t i) {
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
  void remove_endpoint(ActiveBlocks& a, kv::EndpointId ep) {
    a.remove_endpoint(ep);
    std::erase_if(ref, [&](const auto& kv) { return kv.first.first == ep; });
    std::erase_if(live, [&](const Live& l) { return l.ep == ep; });
  }
  // Distinct keys in all and per endpoint (0 .. endpoints - 1).
  void check_counts(const ActiveBlocks& a, kv::EndpointId endpoints) const {
    std::set<kv::BlockKey> distinct;
    for (auto& [k, n] : ref) distinct.insert(k.second);
    ASSERT_EQ(a.size(), distinct.size());
    for (kv::EndpointId ep = 0; ep < endpoints; ++ep) {
      uint64_t n = 0;
      for (auto& [k, c] : ref) n += k.first == ep;
      ASSERT_EQ(a.blocks(ep), n) << "endpoint " << ep;
    }
  }
  // Each endpoint's held prefix of `p`, once per endpoint.
  void check_prefix(const ActiveBlocks& a, kv::EndpointId endpoints,
                    const std::vector<kv::BlockKey>& p) const {
    std::vector<ActiveBlocks::Prefix> out;
    a.prefix(p, out);
    std::map<kv::EndpointId, uint32_t> got, want;
    for (auto x : out) ASSERT_TRUE(got.emplace(x.endpoint, x.blocks).second);
    for (kv::EndpointId ep = 0; ep < endpoints; ++ep) {
      uint32_t n = 0;
      while (n < p.size() && ref.contains({ep, p[n]})) ++n;
      if (n > 0) want[ep] = n;
    }
    ASSERT_EQ(got, want);
  }
};

// Randomized against the reference model: chained prompts drawn from a small tree of
// prefixes, added and released in random order over several endpoints.
TEST(ActiveBlocks, MatchesReferenceModel) {
  Rng rng(7);
  ActiveBlocks a;
  Model m;
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
    if (m.live.empty() || rng.below(3) != 0) {
      const auto ep = static_cast<kv::EndpointId>(rng.below(6));
      ASSERT_NO_FATAL_FAILURE(m.add(a, ep, prompt()));
    } else if (rng.below(50) == 0) {
      m.remove_endpoint(a, static_cast<kv::EndpointId>(rng.below(6)));
    } else {
      m.release(a, rng.below(m.live.size()));
    }
    if (step % 97 == 0) {
      ASSERT_NO_FATAL_FAILURE(m.check_counts(a, 6));
      ASSERT_NO_FATAL_FAILURE(m.check_prefix(a, 6, prompt()));
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
  Model m;
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
  for (int step = 0; step < 6000; ++step) {
    if (m.live.size() < 40 && (m.live.empty() || rng.below(2) == 0)) {
      const auto ep = static_cast<kv::EndpointId>(rng.below(5));
      ASSERT_NO_FATAL_FAILURE(m.add(a, ep, prompt()));
    } else if (rng.below(100) == 0) {
      m.remove_endpoint(a, static_cast<kv::EndpointId>(rng.below(5)));
    } else {
      m.release(a, rng.below(m.live.size()));
    }
    if (step % 13 == 0) {
      ASSERT_NO_FATAL_FAILURE(m.check_counts(a, 5));
      for (int q = 0; q < 3; ++q) ASSERT_NO_FATAL_FAILURE(m.check_prefix(a, 5, prompt()));
    }
  }
  while (!m.live.empty()) m.release(a, rng.below(m.live.size()));
  EXPECT_EQ(a.size(), 0u);
  for (kv::EndpointId ep = 0; ep < 5; ++ep) EXPECT_EQ(a.blocks(ep), 0u);
  std::vector<ActiveBlocks::Prefix> out;
  a.prefix(prompt(), out);
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace kvgate::route
