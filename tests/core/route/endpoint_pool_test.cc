#include "core/route/endpoint_pool.h"

#include <gtest/gtest.h>

namespace kvgate::route {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace endpoint_pool_test {

constexpr uint32_t kBs = 16;

class EndpointPoolTest : public ::testing::Test {
 protected:
  EndpointPool pool_{kBs};
  EndpointId add(std::string url, Role role = Role::kBoth, uint32_t capacity = 0) {
    auto id = pool_.add({.url = std::move(url), .role = role, .kv_capacity_blocks = capacity}, 0);
    EXPECT_TRUE(id.ok());
    return *id;
  }
  const RouterLoad& load(EndpointId id) { return pool_.get(id)->load; }
  // Request `id` prefilled and decoded on `endpoint`: 70 prompt tokens (4 full blocks + 6)
  // and 40 expected output, ceil(110/16) = 7 decode blocks; 50 tokens to prefill.
  Status route_whole(RequestId id, EndpointId endpoint) {
    const std::vector<kv::BlockKey> keys = {1, 2, 3, 4};
    return pool_.on_routed(id,
                           {.endpoint = endpoint,
                            .keys = keys,
                            .prompt_tokens = 70,
                            .expected_output_tokens = 40,
                            .prefill_tokens = 50},
                           0);
  }
  // Request `id` prefilled on `prefill` and decoded on `decode`: 32 prompt tokens (2 full
  // blocks), all 32 to prefill.
  Status route_split(RequestId id, EndpointId decode, EndpointId prefill) {
    const std::vector<kv::BlockKey> keys = {1, 2};
    return pool_.on_routed(id,
                           {.endpoint = decode,
                            .prefill_endpoint = prefill,
                            .keys = keys,
                            .prompt_tokens = 32,
                            .prefill_tokens = 32},
                           0);
  }
};

TEST_F(EndpointPoolTest, IdsAreDenseAndReused) {
  EXPECT_EQ(add("a"), 0u);
  EXPECT_EQ(add("b"), 1u);
  EXPECT_EQ(add("c"), 2u);
  EXPECT_TRUE(pool_.remove(1));
  EXPECT_FALSE(pool_.remove(1));
  EXPECT_EQ(pool_.get(1), nullptr);
  EXPECT_EQ(std::vector<EndpointId>(pool_.ids().begin(), pool_.ids().end()),
            (std::vector<EndpointId>{0, 2}));
  EXPECT_EQ(add("d"), 1u);
  EXPECT_EQ(pool_.find("d"), std::optional<EndpointId>(1));
  EXPECT_FALSE(pool_.add({.url = "a"}, 0).ok());  // duplicate URL
}

TEST_F(EndpointPoolTest, LifecycleKeepsLoadExact) {
  EndpointId a = add("a");
  ASSERT_TRUE(route_whole(9, a));  // 7 decode blocks, 50 tokens to prefill
  EXPECT_EQ(load(a).in_flight, 1u);
  EXPECT_EQ(load(a).active_prefill_tokens, 50u);
  EXPECT_EQ(load(a).active_decode_blocks, 7u);
  EXPECT_FALSE(pool_.on_routed(9, {.endpoint = a}, 0).ok());  // duplicate id
  EXPECT_TRUE(pool_.on_first_token(9, 10));
  EXPECT_EQ(load(a).active_prefill_tokens, 0u);
  EXPECT_EQ(load(a).in_flight, 1u);
  EXPECT_TRUE(pool_.on_finished(9, 20));
  EXPECT_EQ(load(a).in_flight, 0u);
  EXPECT_EQ(load(a).active_decode_blocks, 0u);
  EXPECT_FALSE(pool_.on_finished(9, 30));  // unknown now: ignored
  EXPECT_EQ(load(a).routed_total, 1u);
}

TEST_F(EndpointPoolTest, CountsTheRequestsRoutedSinceTheScrapeThatHaveNotStarted) {
  EndpointId a = add("a");
  auto unstarted = [&] { return pool_.get(a)->unstarted_since_scrape; };
  ASSERT_TRUE(pool_.on_routed(1, {.endpoint = a, .prompt_tokens = 16}, 0));
  ASSERT_TRUE(pool_.on_routed(2, {.endpoint = a, .prompt_tokens = 16}, 0));
  EXPECT_EQ(unstarted(), 2u);
  pool_.on_first_token(1, 1);
  pool_.on_first_token(1, 2);  // once only
  EXPECT_EQ(unstarted(), 1u);
  pool_.on_failed(2, 3);  // ended without a first token: no longer waiting either
  EXPECT_EQ(unstarted(), 0u);
  // A scrape sees the requests routed before it: they no longer count, and their first
  // tokens after it do not take from the ones routed after it.
  ASSERT_TRUE(pool_.on_routed(3, {.endpoint = a, .prompt_tokens = 16}, 4));
  pool_.on_metrics(a, {.waiting = 1}, 5);
  EXPECT_EQ(unstarted(), 0u);
  ASSERT_TRUE(pool_.on_routed(4, {.endpoint = a, .prompt_tokens = 16}, 6));
  pool_.on_first_token(3, 7);
  EXPECT_EQ(unstarted(), 1u);
  pool_.on_finished(4, 8);
  EXPECT_EQ(unstarted(), 0u);
}

TEST_F(EndpointPoolTest, SharedPrefixBlocksCountOnce) {
  EndpointId a = add("a");
  std::vector<kv::BlockKey> r1 = {1, 2, 3, 4};
  std::vector<kv::BlockKey> r2 = {1, 2, 5, 6};
  ASSERT_TRUE(pool_.on_routed(1, {.endpoint = a, .keys = r1, .prompt_tokens = 64}, 0));
  ASSERT_TRUE(pool_.on_routed(2, {.endpoint = a, .keys = r2, .prompt_tokens = 64}, 0));
  EXPECT_EQ(load(a).active_decode_blocks, 6u);  // 1 2 3 4 5 6
  std::vector<ActiveBlocks::Prefix> p;
  pool_.active_prefix(std::vector<kv::BlockKey>{1, 2, 3, 9}, p);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].blocks, 3u);
  pool_.on_finished(1, 1);
  EXPECT_EQ(load(a).active_decode_blocks, 4u);  // 3, 4 released; 1, 2 still r2's
  pool_.on_failed(2, 1);
  EXPECT_EQ(load(a).active_decode_blocks, 0u);
  EXPECT_EQ(load(a).failed_total, 1u);
}

TEST_F(EndpointPoolTest, RemotePrefillEndsAtFirstToken) {
  EndpointId p = add("p", Role::kPrefill);
  EndpointId d = add("d", Role::kDecode);
  ASSERT_TRUE(route_split(1, d, p));
  EXPECT_EQ(load(p).in_flight, 1u);
  EXPECT_EQ(load(p).active_prefill_tokens, 32u);
  EXPECT_EQ(load(p).active_decode_blocks, 0u);
  EXPECT_EQ(load(d).in_flight, 1u);
  EXPECT_EQ(load(d).active_prefill_tokens, 0u);
  EXPECT_EQ(load(d).active_decode_blocks, 2u);
  pool_.on_first_token(1, 5);
  EXPECT_EQ(load(p).in_flight, 0u);
  EXPECT_EQ(load(p).active_prefill_tokens, 0u);
  EXPECT_EQ(load(d).in_flight, 1u);
  pool_.on_finished(1, 9);
  EXPECT_EQ(load(d).in_flight, 0u);
  EXPECT_EQ(load(d).active_decode_blocks, 0u);
}

TEST_F(EndpointPoolTest, AMovedRequestsLoadFollowsItToTheEndpointThatServesIt) {
  EndpointId a = add("a");
  EndpointId b = add("b");
  ASSERT_TRUE(route_whole(9, a));
  EXPECT_TRUE(pool_.on_moved(9, b, 5));
  EXPECT_EQ(load(a).in_flight, 0u);
  EXPECT_EQ(load(a).active_prefill_tokens, 0u);
  EXPECT_EQ(load(a).active_decode_blocks, 0u);
  EXPECT_EQ(load(a).failed_total, 1u);
  EXPECT_EQ(load(b).in_flight, 1u);
  EXPECT_EQ(load(b).active_prefill_tokens, 50u);
  EXPECT_EQ(load(b).active_decode_blocks, 7u);
  EXPECT_EQ(load(b).routed_total, 1u);
  EXPECT_EQ(pool_.request(9)->endpoint, b);
  EXPECT_TRUE(pool_.on_moved(9, b, 6));  // already there: nothing changes
  EXPECT_EQ(load(b).in_flight, 1u);
  EXPECT_FALSE(pool_.on_moved(9, 42, 6));  // unknown endpoint
  EXPECT_FALSE(pool_.on_moved(8, a, 6));   // unknown request
  // The rest of its life is b's.
  EXPECT_TRUE(pool_.on_first_token(9, 10));
  EXPECT_EQ(load(b).active_prefill_tokens, 0u);
  EXPECT_TRUE(pool_.on_finished(9, 20));
  EXPECT_EQ(load(b).in_flight, 0u);
  EXPECT_EQ(load(b).active_decode_blocks, 0u);
  EXPECT_EQ(load(a).in_flight, 0u);
  // Nothing of it is left on a.
  EXPECT_TRUE(pool_.remove(a));
  EXPECT_EQ(pool_.requests_in_flight(), 0u);
}

TEST_F(EndpointPoolTest, AMovedDecodeKeepsItsRemotePrefill) {
  EndpointId p = add("p", Role::kPrefill);
  EndpointId d = add("d", Role::kDecode);
  EndpointId e = add("e", Role::kDecode);
  ASSERT_TRUE(route_split(1, d, p));
  EXPECT_FALSE(pool_.on_moved(1, p, 1));  // its prefill endpoint cannot decode it
  EXPECT_TRUE(pool_.on_moved(1, e, 1));
  EXPECT_EQ(load(p).in_flight, 1u);
  EXPECT_EQ(load(p).active_prefill_tokens, 32u);
  EXPECT_EQ(load(d).in_flight, 0u);
  EXPECT_EQ(load(d).active_decode_blocks, 0u);
  EXPECT_EQ(load(e).in_flight, 1u);
  EXPECT_EQ(load(e).active_prefill_tokens, 0u);
  EXPECT_EQ(load(e).active_decode_blocks, 2u);
  pool_.on_finished(1, 9);
  EXPECT_EQ(load(p).in_flight, 0u);
  EXPECT_EQ(load(e).in_flight, 0u);
  EXPECT_EQ(load(e).active_decode_blocks, 0u);
}

TEST_F(EndpointPoolTest, FailureBeforeFirstTokenReleasesPrefillToo) {
  EndpointId p = add("p", Role::kPrefill);
  EndpointId d = add("d", Role::kDecode);
  ASSERT_TRUE(pool_.on_routed(
      1, {.endpoint = d, .prefill_endpoint = p, .prompt_tokens = 10, .prefill_tokens = 10}, 0));
  pool_.on_failed(1, 1);
  EXPECT_EQ(load(p).in_flight, 0u);
  EXPECT_EQ(load(p).active_prefill_tokens, 0u);
  EXPECT_EQ(load(p).failed_total, 1u);
  EXPECT_EQ(load(d).failed_total, 1u);
}

// RouterLoad::prefill_moved_at: when the prefill queue last moved (a request in it got
// its first token or left it, or it went from empty to not), what the latency predictor
// measures the queue's progress from.
TEST_F(EndpointPoolTest, ThePrefillQueueMovesAtFirstTokensAndWhenItStarts) {
  EndpointId a = add("a");
  auto route_at = [&](RequestId id, Nanos now, uint32_t prefill) {
    return pool_.on_routed(id, {.endpoint = a, .prompt_tokens = 64, .prefill_tokens = prefill},
                           now);
  };
  EXPECT_EQ(load(a).prefill_moved_at, 0);
  ASSERT_TRUE(route_at(1, 100, 50));  // an empty queue: it starts now
  EXPECT_EQ(load(a).prefill_moved_at, 100);
  ASSERT_TRUE(route_at(2, 150, 30));  // behind it: the queue has not moved
  EXPECT_EQ(load(a).prefill_moved_at, 100);
  ASSERT_TRUE(route_at(3, 160, 20));
  EXPECT_TRUE(pool_.on_first_token(1, 200));
  EXPECT_EQ(load(a).prefill_moved_at, 200);
  EXPECT_EQ(load(a).active_prefill_tokens, 50u);
  EXPECT_TRUE(pool_.on_finished(1, 260));  // it had left the queue already
  EXPECT_EQ(load(a).prefill_moved_at, 200);
  EXPECT_TRUE(pool_.on_failed(2, 300));  // it leaves the queue without a first token
  EXPECT_EQ(load(a).prefill_moved_at, 300);
  EXPECT_TRUE(pool_.on_finished(3, 320));  // a whole answer: no first token seen
  EXPECT_EQ(load(a).prefill_moved_at, 320);
  EXPECT_EQ(load(a).active_prefill_tokens, 0u);
  ASSERT_TRUE(route_at(4, 400, 0));  // nothing to prefill: the queue stays empty
  EXPECT_EQ(load(a).prefill_moved_at, 320);
  ASSERT_TRUE(route_at(5, 500, 10));
  EXPECT_EQ(load(a).prefill_moved_at, 500);
  // Moved to another endpoint before its first token: it leaves a's queue and starts b's.
  EndpointId b = add("b");
  EXPECT_TRUE(pool_.on_moved(5, b, 600));
  EXPECT_EQ(load(a).prefill_moved_at, 600);
  EXPECT_EQ(load(b).prefill_moved_at, 600);
  EXPECT_EQ(load(b).active_prefill_tokens, 10u);
}

TEST_F(EndpointPoolTest, RemovingAnEndpointForgetsItsRequests) {
  EndpointId p = add("p", Role::kPrefill);
  EndpointId d = add("d", Role::kDecode);
  EndpointId d2 = add("d2", Role::kDecode);
  ASSERT_TRUE(route_split(1, d, p));
  ASSERT_TRUE(route_split(2, d2, p));
  pool_.remove(d);
  EXPECT_EQ(pool_.request(1), nullptr);
  EXPECT_FALSE(pool_.on_finished(1, 1));
  EXPECT_EQ(load(p).in_flight, 1u);  // request 2 only
  EXPECT_EQ(load(p).active_prefill_tokens, 32u);
  pool_.remove(p);
  ASSERT_NE(pool_.request(2), nullptr);
  EXPECT_FALSE(pool_.request(2)->prefill_endpoint.has_value());
  EXPECT_TRUE(pool_.on_first_token(2, 1));
  EXPECT_TRUE(pool_.on_finished(2, 2));
  EXPECT_EQ(load(d2).active_decode_blocks, 0u);
  EXPECT_EQ(load(d2).in_flight, 0u);
}

TEST_F(EndpointPoolTest, UnknownEndpointIsAnError) {
  EXPECT_FALSE(pool_.on_routed(1, {.endpoint = 3}, 0).ok());
  EXPECT_FALSE(pool_.on_metrics(3, {}, 0));
  EXPECT_FALSE(pool_.set_health(3, Health::kDraining));
}

// Mooncake's prediction: blocks in use + prefills ending by then - decodes finishing by
// then. Three requests on one decode endpoint, 10 blocks each (160 tokens, no output
// beyond the prompt's blocks: expected output inside them).
TEST_F(EndpointPoolTest, PredictedDecodeBlocks) {
  EndpointId d = add("d", Role::kDecode, 1000);
  const double spt = 0.01;  // 10 ms per output token
  auto route = [&](RequestId id, Nanos prefill_end, uint32_t output) {
    ASSERT_TRUE(pool_.on_routed(id,
                                {.endpoint = d,
                                 .prompt_tokens = 160 - output,
                                 .expected_output_tokens = output,
                                 .predicted_prefill_end = prefill_end},
                                0));
  };
  route(1, 0, 100);  // decoding since t=0 (first token), 1 s of output
  pool_.on_first_token(1, 0);
  route(2, seconds(0.5), 50);  // prefill ends at 0.5 s, then 0.5 s of output
  route(3, seconds(2), 0);     // prefill ends at 2 s, unknown output length
  EXPECT_EQ(pool_.get(d)->load.active_decode_blocks, 30u);
  EXPECT_DOUBLE_EQ(pool_.predicted_decode_blocks(d, seconds(0.2), spt), 10);  // 1 only
  EXPECT_DOUBLE_EQ(pool_.predicted_decode_blocks(d, seconds(0.7), spt), 20);  // 1 and 2
  EXPECT_DOUBLE_EQ(pool_.predicted_decode_blocks(d, seconds(1.2), spt), 0);   // both done
  EXPECT_DOUBLE_EQ(pool_.predicted_decode_blocks(d, seconds(2.5), spt), 10);  // 3 stays
  // A scrape showing more KV in use than the router knows of raises the base.
  pool_.on_metrics(d, {.kv_usage = 0.1}, 0);  // 100 of 1000 blocks, router knew 30
  EXPECT_DOUBLE_EQ(pool_.predicted_decode_blocks(d, seconds(0.2), spt), 80);
}

// The naive rule's view: only requests whose prefill is done are on decode, however
// long ago their prefill was predicted to end.
TEST_F(EndpointPoolTest, DecodeBlocksNowCountsOnlyPrefillsDone) {
  EndpointId p = add("p", Role::kPrefill);
  EndpointId d = add("d", Role::kDecode, 1000);
  auto route = [&](RequestId id) {
    ASSERT_TRUE(pool_.on_routed(id,
                                {.endpoint = d,
                                 .prefill_endpoint = p,
                                 .prompt_tokens = 150,
                                 .expected_output_tokens = 10,
                                 .prefill_tokens = 150,
                                 .predicted_prefill_end = seconds(0.1)},
                                0));
  };
  route(1);
  route(2);
  EXPECT_DOUBLE_EQ(pool_.decode_blocks_now(d), 0);  // both still in prefill
  // Past their predicted prefill end the prediction counts them; the naive view not.
  EXPECT_DOUBLE_EQ(pool_.predicted_decode_blocks(d, seconds(0.2), 1.0), 20);
  EXPECT_DOUBLE_EQ(pool_.decode_blocks_now(d), 0);
  pool_.on_first_token(1, seconds(0.3));  // request 1's prefill answer came back
  EXPECT_DOUBLE_EQ(pool_.decode_blocks_now(d), 10);
  EXPECT_EQ(load(p).active_prefill_tokens, 150u);
  EXPECT_DOUBLE_EQ(pool_.decode_blocks_now(99), 0);  // unknown endpoint
}

// A scrape is brought up to date with what the router saw since: requests finished
// after it free their blocks at once, not at the next scrape.
TEST_F(EndpointPoolTest, ScrapedUsageFollowsFinishesSinceTheScrape) {
  EndpointId d = add("d", Role::kDecode, 1000);
  for (RequestId id : {1, 2}) {
    ASSERT_TRUE(pool_.on_routed(id, {.endpoint = d, .prompt_tokens = 160}, 0));
    pool_.on_first_token(id, 0);
  }
  // The engine shows 100 blocks in use (80 the router does not know of) when the
  // router counts 20.
  pool_.on_metrics(d, {.kv_usage = 0.1}, 0);
  EXPECT_DOUBLE_EQ(pool_.decode_blocks_now(d), 100);
  pool_.on_finished(1, seconds(0.01));
  EXPECT_DOUBLE_EQ(pool_.decode_blocks_now(d), 90);
  EXPECT_DOUBLE_EQ(pool_.predicted_decode_blocks(d, seconds(0.02), 0.01), 90);
  ASSERT_TRUE(pool_.on_routed(3, {.endpoint = d, .prompt_tokens = 160}, seconds(0.02)));
  pool_.on_first_token(3, seconds(0.03));
  EXPECT_DOUBLE_EQ(pool_.decode_blocks_now(d), 100);
}

}  // namespace endpoint_pool_test
}  // namespace kvgate::route
