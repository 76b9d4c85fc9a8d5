// The whole decision: filters, overlap from the real indexes, policies, P/D pairing,
// early rejection, commit.
#include "core/route/router.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>

namespace kvgate::route {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace router_test {

constexpr uint32_t kBs = 16;

class RouterTest : public ::testing::Test {
 protected:
  kv::PreciseIndex precise_{{.model = "m", .block_size = kBs}};
  kv::ApproxIndex approx_{{}};
  RouterConfig config_;
  std::unique_ptr<Router> router_;
  Rng rng_{5};
  // Keep prompts alive: RouteRequest borrows the keys.
  std::vector<std::vector<kv::TokenId>> tokens_;
  std::vector<std::vector<kv::BlockKey>> keys_;
  RequestId next_id_ = 1;

  void SetUp() override {
    config_.block_size = kBs;
    config_.policy = {"kv-cost", {}};
    // These tests feed the event-fed index (the default is the router's own history).
    config_.overlap_source = OverlapSource::kPrecise;
  }
  void build() {
    auto r = Router::create(config_, {.precise = &precise_, .approx = &approx_});
    ASSERT_TRUE(r.ok()) << r.error();
    router_ = std::move(*r);
  }
  EndpointId add(EndpointSpec spec) {
    auto id = router_->add_endpoint(std::move(spec), 0);
    EXPECT_TRUE(id.ok());
    return *id;
  }
  // A prompt of `blocks` full blocks; prompts with the same `seed` share everything.
  RouteRequest prompt(uint32_t blocks, uint32_t seed,
                      Criticality criticality = Criticality::kStandard) {
    tokens_.emplace_back(blocks * kBs);
    std::iota(tokens_.back().begin(), tokens_.back().end(), seed * 100000);
    keys_.emplace_back();
    kv::hash_blocks(tokens_.back(), kBs, kv::block_seed("m", "", ""), keys_.back());
    return {.id = next_id_++,
            .keys = keys_.back(),
            .prompt_tokens = blocks * kBs,
            .criticality = criticality};
  }
  // The engine at `ep` reports it stored the first `blocks` blocks of `r`'s prompt.
  void cache(EndpointId ep, const RouteRequest& r, uint32_t blocks) {
    const std::vector<kv::TokenId>* t = nullptr;
    for (size_t i = 0; i < keys_.size(); ++i) {
      if (keys_[i].data() == r.keys.data()) t = &tokens_[i];
    }
    ASSERT_NE(t, nullptr);
    std::vector<uint64_t> hashes(blocks);
    std::iota(hashes.begin(), hashes.end(), 7000 + ep * 1000);
    kv::BlockStoredEvent ev;
    ev.block_hashes = hashes;
    ev.token_ids = std::span(*t).first(blocks * kBs);
    ev.block_size = kBs;
    precise_.apply_stored(ep, ev);
  }
  // Puts `blocks` blocks of decode load on `ep` through the lifecycle.
  void busy(EndpointId ep, uint32_t blocks) {
    ASSERT_TRUE(router_->pool()
                    .on_routed(next_id_++, {.endpoint = ep, .prompt_tokens = blocks * kBs}, 0)
                    .ok());
  }
  char winner(const RouteRequest& r, const char* names = "ABCDEFGH") {
    Decision d = router_->decide(r, 0, rng_);
    EXPECT_TRUE(d.accepted()) << to_string(d.reason);
    return names[d.endpoint];
  }
};

TEST_F(RouterTest, CreateRejectsBadConfig) {
  config_.policy = {"nope", {}};
  EXPECT_FALSE(Router::create(config_, {.precise = &precise_}).ok());
  config_.policy = {"kv-cost", {}};
  config_.filters = {{"nope", {}}};
  EXPECT_FALSE(Router::create(config_, {.precise = &precise_}).ok());
  config_.filters = {};
  config_.overlap_source = OverlapSource::kApprox;  // but no approx index
  EXPECT_FALSE(Router::create(config_, {.precise = &precise_}).ok());
  config_.block_size = 0;
  EXPECT_FALSE(Router::create(config_, {.precise = &precise_, .approx = &approx_}).ok());
}

TEST_F(RouterTest, RejectionReasons) {
  build();
  auto r = prompt(4, 1);
  Decision d = router_->decide(r, 0, rng_);
  EXPECT_EQ(d.reason, RejectReason::kNoEndpoints);
  EXPECT_EQ(to_string(d.reason), "no_endpoints");
  EXPECT_EQ(http_status(d.reason), 503);
  EndpointId a = add({.url = "a"});
  EndpointId b = add({.url = "b"});
  router_->pool().set_health(a, Health::kUnhealthy);
  router_->pool().set_health(b, Health::kDraining);
  d = router_->decide(r, 0, rng_);
  EXPECT_EQ(d.reason, RejectReason::kNoHealthyEndpoints);
  router_->pool().set_health(b, Health::kHealthy);
  EXPECT_EQ(winner(r), 'B');
}

// A retry (or flow control's capacity check) names the endpoints a request must not go
// to: the best endpoint by cache is skipped for that request only, nothing about the
// endpoint changes, and a request that excludes every endpoint gets the healthy filter's
// reason.
TEST_F(RouterTest, ExcludedEndpointsAreSkippedForThatRequestOnly) {
  build();
  auto r = prompt(8, 1);
  EndpointId a = add({.url = "A"});
  EndpointId b = add({.url = "B"});
  cache(a, r, 8);
  EXPECT_EQ(winner(r), 'A');
  const std::vector<EndpointId> not_a = {a};
  RouteRequest retry = r;
  retry.excluded = not_a;
  Decision d = router_->decide(retry, 0, rng_);
  ASSERT_TRUE(d.accepted());
  EXPECT_EQ(d.endpoint, b);
  EXPECT_EQ(router_->pool().get(a)->health, Health::kHealthy);
  EXPECT_EQ(winner(r), 'A');  // the next request is not affected
  const std::vector<EndpointId> both = {a, b};
  retry.excluded = both;
  EXPECT_EQ(router_->decide(retry, 0, rng_).reason, RejectReason::kNoHealthyEndpoints);
}

// The Endpoint Picker's fallbacks: the candidates after the winner, by the policy's cost.
TEST_F(RouterTest, RunnersUpFollowThePolicysCost) {
  build();
  auto r = prompt(8, 1);
  EndpointId a = add({.url = "A"});
  EndpointId b = add({.url = "B"});
  EndpointId c = add({.url = "C"});
  cache(b, r, 8);
  cache(c, r, 4);
  Decision d = router_->decide(r, 0, rng_);
  ASSERT_TRUE(d.accepted());
  EXPECT_EQ(d.endpoint, b);
  EXPECT_EQ(d.runner_count, 0);  // not asked
  r.runners_up = 1;
  d = router_->decide(r, 0, rng_);
  ASSERT_EQ(d.runner_count, 1);
  EXPECT_EQ(d.runners_up[0], c);
  r.runners_up = 4;  // more than there are: every other candidate, best first
  d = router_->decide(r, 0, rng_);
  EXPECT_EQ(d.endpoint, b);
  ASSERT_EQ(d.runner_count, 2);
  EXPECT_EQ(d.runners_up[0], c);
  EXPECT_EQ(d.runners_up[1], a);
  const std::vector<EndpointId> not_c = {c};
  r.excluded = not_c;  // an excluded endpoint is no runner-up either
  d = router_->decide(r, 0, rng_);
  ASSERT_EQ(d.runner_count, 1);
  EXPECT_EQ(d.runners_up[0], a);
}

// A request's preferred endpoint (a Responses conversation's previous one) wins over the
// policy's choice while it is healthy, also when saturated (stale metrics count as
// saturated: the conversation is stored nowhere else), and is passed over when it is
// unhealthy or excluded: then the policy decides as if nothing were preferred.
TEST_F(RouterTest, PreferredEndpointWinsWhileItIsACandidate) {
  build();
  auto r = prompt(8, 1);
  EndpointId a = add({.url = "A"});
  EndpointId b = add({.url = "B"});
  cache(a, r, 8);
  EXPECT_EQ(winner(r), 'A');
  RouteRequest follow_up = r;
  follow_up.preferred = b;
  EXPECT_EQ(winner(follow_up), 'B');
  // Saturated: a request whose prefix B holds goes to A, the follow-up still to B.
  auto on_b = prompt(8, 2);
  cache(b, on_b, 8);
  EXPECT_EQ(winner(on_b), 'B');
  ScrapedMetrics saturated{.waiting = 1000, .running = 64, .kv_usage = 1.0};
  ASSERT_TRUE(router_->pool().on_metrics(b, saturated, 0));
  EXPECT_EQ(winner(on_b), 'A');
  EXPECT_EQ(winner(follow_up), 'B');
  router_->pool().set_health(b, Health::kUnhealthy);
  EXPECT_EQ(winner(follow_up), 'A');
  router_->pool().set_health(b, Health::kHealthy);
  const std::vector<EndpointId> not_b = {b};
  follow_up.excluded = not_b;
  EXPECT_EQ(winner(follow_up), 'A');
}

// An adapter's request avoids the endpoints where it would evict another adapter (none
// of its requests there, every slot taken) while another endpoint has it active or a
// free slot; when every endpoint would have to evict, load decides as for any request.
TEST_F(RouterTest, AnAdapterGoesWhereItIsActiveOrASlotIsFree) {
  build();
  auto r = prompt(8, 1);
  EndpointId a = add({.url = "A"});
  EndpointId b = add({.url = "B"});
  cache(a, r, 8);  // the prefix alone would pick A
  ScrapedMetrics full{.lora = {.max_loras = 1, .running = {"chat"}}};
  ScrapedMetrics roomy{.lora = {.max_loras = 2, .running = {"chat"}}};
  ASSERT_TRUE(router_->pool().on_metrics(a, full, 0));
  ASSERT_TRUE(router_->pool().on_metrics(b, roomy, 0));
  RouteRequest sql = r;
  sql.adapter = "sql";
  EXPECT_EQ(winner(sql), 'B');  // A would evict chat; B has a free slot
  RouteRequest chat = r;
  chat.adapter = "chat";
  EXPECT_EQ(winner(chat), 'A');  // active on both: the prefix decides
  EXPECT_EQ(winner(r), 'A');     // the base model: no adapter, no constraint
  ASSERT_TRUE(router_->pool().on_metrics(b, full, 0));
  EXPECT_EQ(winner(sql), 'A');  // both would evict: as any request
}

// LoRA affinity in three tiers: where the adapter is active, else where a slot is free,
// else anywhere; load (and cache) decide only within the tier kept. Active wins even over
// a less loaded endpoint with a free slot.
TEST_F(RouterTest, AnAdapterPrefersWhereItIsActiveOverAFreeSlotEvenWhenBusier) {
  build();
  auto r = prompt(8, 1);
  EndpointId a = add({.url = "A"});
  EndpointId b = add({.url = "B"});
  busy(a, 64);  // A is the busier one
  ASSERT_TRUE(router_->pool().on_metrics(a, {.lora = {.max_loras = 2, .running = {"sql"}}}, 0));
  ASSERT_TRUE(router_->pool().on_metrics(b, {.lora = {.max_loras = 2, .running = {"chat"}}}, 0));
  EXPECT_EQ(winner(r), 'B');  // the base model: load decides
  RouteRequest sql = r;
  sql.adapter = "sql";
  EXPECT_EQ(winner(sql), 'A');  // active on A, only a free slot on B
  RouteRequest chat = r;
  chat.adapter = "chat";
  EXPECT_EQ(winner(chat), 'B');
  RouteRequest other = r;
  other.adapter = "other";
  EXPECT_EQ(winner(other), 'B');  // a free slot on both: load decides
}

// A free slot beats an eviction even where the prefix is cached, and among the endpoints
// with a free slot load decides.
TEST_F(RouterTest, AnAdapterPrefersAFreeSlotOverAnEviction) {
  build();
  auto r = prompt(8, 1);
  EndpointId a = add({.url = "A"});
  EndpointId b = add({.url = "B"});
  EndpointId c = add({.url = "C"});
  cache(a, r, 8);  // the prefix alone would pick A
  busy(b, 64);     // B is busier than C
  ScrapedMetrics full{.lora = {.max_loras = 1, .running = {"chat"}}};
  ScrapedMetrics roomy{.lora = {.max_loras = 2, .running = {"chat"}}};
  ASSERT_TRUE(router_->pool().on_metrics(a, full, 0));
  ASSERT_TRUE(router_->pool().on_metrics(b, roomy, 0));
  ASSERT_TRUE(router_->pool().on_metrics(c, roomy, 0));
  RouteRequest sql = r;
  sql.adapter = "sql";
  EXPECT_EQ(winner(sql), 'C');
  EXPECT_EQ(winner(r), 'A');  // the base model: no constraint
}

// When every endpoint would have to evict, the adapter's request is placed as any other:
// by load.
TEST_F(RouterTest, AnAdapterThatMustEvictEverywhereGoesByLoad) {
  build();
  auto r = prompt(8, 1);
  EndpointId a = add({.url = "A"});
  EndpointId b = add({.url = "B"});
  busy(a, 64);
  ScrapedMetrics full{.lora = {.max_loras = 1, .running = {"chat"}}};
  ASSERT_TRUE(router_->pool().on_metrics(a, full, 0));
  ASSERT_TRUE(router_->pool().on_metrics(b, full, 0));
  RouteRequest sql = r;
  sql.adapter = "sql";
  EXPECT_EQ(winner(sql), 'B');
}

// The tiers apply after the saturation filter: a saturated endpoint that has the adapter
// active is dropped first, so the adapter goes where a slot is free rather than queueing
// behind it (or evicting where the prefix is cached); once it recovers, it wins again.
TEST_F(RouterTest, ASaturatedHolderDoesNotTrapItsAdapter) {
  build();
  auto r = prompt(8, 1);
  EndpointId a = add({.url = "A"});
  EndpointId b = add({.url = "B"});
  EndpointId c = add({.url = "C"});
  cache(c, r, 8);  // the prefix alone would pick C, which must evict
  ScrapedMetrics saturated_holder{.waiting = 50, .lora = {.max_loras = 2, .running = {"sql"}}};
  ASSERT_TRUE(router_->pool().on_metrics(a, saturated_holder, 0));
  ASSERT_TRUE(router_->pool().on_metrics(b, {.lora = {.max_loras = 2, .running = {"chat"}}}, 0));
  ASSERT_TRUE(router_->pool().on_metrics(c, {.lora = {.max_loras = 1, .running = {"chat"}}}, 0));
  RouteRequest sql = r;
  sql.adapter = "sql";
  EXPECT_EQ(winner(sql), 'B');
  ASSERT_TRUE(router_->pool().on_metrics(a, {.lora = {.max_loras = 2, .running = {"sql"}}}, 0));
  EXPECT_EQ(winner(sql), 'A');
}

// With LoRA placement (Endpoint::lora_placed), an adapter's request goes only where the
// placement loaded it, else where its load is in flight, else anywhere (as without
// placement); the base model's requests are not constrained.
TEST_F(RouterTest, WithPlacementAnAdapterGoesWhereItIsLoadedElseWhereItIsLoading) {
  build();
  auto r = prompt(8, 1);
  EndpointId a = add({.url = "A"});
  EndpointId b = add({.url = "B"});
  EndpointId c = add({.url = "C"});
  cache(a, r, 8);  // the prefix alone would pick A
  RouteRequest sql = r;
  sql.adapter = "sql";
  EXPECT_EQ(winner(sql), 'A');  // no placement: as before
  ASSERT_TRUE(router_->pool().set_lora_placed(a, LoraPlaced{}));
  ASSERT_TRUE(router_->pool().set_lora_placed(b, LoraPlaced{.loading = {"sql"}}));
  ASSERT_TRUE(router_->pool().set_lora_placed(c, LoraPlaced{.loaded = {"sql"}}));
  EXPECT_EQ(winner(sql), 'C');
  EXPECT_EQ(winner(r), 'A');  // the base model
  router_->pool().set_health(c, Health::kUnhealthy);
  EXPECT_EQ(winner(sql), 'B');  // loaded only where it cannot go: where it is loading
  router_->pool().set_health(c, Health::kHealthy);
  ASSERT_TRUE(router_->pool().set_lora_placed(c, LoraPlaced{}));
  EXPECT_EQ(winner(sql), 'B');
  ASSERT_TRUE(router_->pool().set_lora_placed(b, std::nullopt));
  EXPECT_EQ(winner(sql), 'A');  // nowhere: every endpoint, the prefix decides
}

// The seed's toy example end to end: cache contents from KV events into the precise
// index, load from requests in flight. See policies_test.cc for the arithmetic.
TEST_F(RouterTest, SeedToyExampleThroughTheIndex) {
  config_.filters = {};  // the busy endpoint would count as saturated otherwise
  auto r = prompt(100, 1);
  for (double w : {1.0, 2.0, 3.0, 4.0, 10.0}) {
    config_.policy = {"kv-cost", {{"overlap_weight", std::to_string(w)}}};
    precise_.remove_endpoint(0);
    precise_.remove_endpoint(1);
    precise_.remove_endpoint(2);
    build();
    EndpointId a = add({.url = "A"});
    EndpointId b = add({.url = "B"});
    EndpointId c = add({.url = "C"});
    cache(a, r, 90);
    cache(c, r, 50);
    busy(a, 275);
    busy(b, 10);
    busy(c, 135);
    Decision d = router_->decide(r, 0, rng_);
    ASSERT_TRUE(d.accepted());
    const char want = w <= 2 ? 'B' : w == 3 ? 'C' : 'A';
    EXPECT_EQ("ABC"[d.endpoint], want) << "weight " << w;
    if (want == 'A') {
      EXPECT_EQ(d.matched_blocks, 90u);
      EXPECT_EQ(d.prefill_tokens, 10 * kBs);
    }
  }
}

TEST_F(RouterTest, NewEndpointHoldsNothing) {
  build();
  auto r = prompt(20, 1);
  EndpointId a = add({.url = "A"});
  cache(a, r, 20);
  busy(a, 5);
  EXPECT_EQ(winner(r), 'A');  // all cached beats 5 blocks of load
  // A is removed and a new endpoint takes its id: it must not inherit A's cache.
  router_->remove_endpoint(a);
  EndpointId b = add({.url = "B"});
  ASSERT_EQ(b, a);
  Decision d = router_->decide(r, 0, rng_);
  EXPECT_EQ(d.matched_blocks, 0u);
  EXPECT_EQ(d.prefill_tokens, 20 * kBs);
}

TEST_F(RouterTest, ReconfigureChangesThePolicyAndKeepsEndpointsAndLoad) {
  config_.filters = {};
  build();
  auto r = prompt(100, 1);
  EndpointId a = add({.url = "A"});
  EndpointId b = add({.url = "B"});
  EndpointId c = add({.url = "C"});
  cache(a, r, 90);
  cache(c, r, 50);
  busy(a, 275);
  busy(b, 10);
  busy(c, 135);
  EXPECT_EQ(winner(r), 'B');  // overlap_weight 1
  RouterConfig next = router_->config();
  next.policy = {"kv-cost", {{"overlap_weight", "4"}}};
  ASSERT_TRUE(router_->reconfigure(next).ok());
  EXPECT_EQ(winner(r), 'A');
  EXPECT_EQ(router_->config().policy.params[0].second, "4");
  EXPECT_EQ(router_->pool().size(), 3u);
  EXPECT_EQ(router_->pool().get(a)->load.in_flight, 1u);
  // Another policy altogether.
  next.policy = {"least-request", {}};
  ASSERT_TRUE(router_->reconfigure(next).ok());
  EXPECT_EQ(router_->config().policy.name, "least-request");
}

TEST_F(RouterTest, ReconfigureRejectsBadConfigAndChangesNothing) {
  config_.policy = {"kv-cost", {{"overlap_weight", "2"}}};
  build();
  auto bad = [&](RouterConfig next, std::string_view what) {
    Status s = router_->reconfigure(std::move(next));
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.error().find(what), std::string::npos) << s.error();
    EXPECT_EQ(router_->config().policy.name, "kv-cost");
    EXPECT_EQ(router_->config().policy.params[0].second, "2");
  };
  RouterConfig next = router_->config();
  next.policy = {"kv-cost", {{"overlap_weight", "-1"}}};
  bad(next, "overlap_weight");
  next.policy = {"kv-cost", {{"overlap_wieght", "1"}}};
  bad(next, "overlap_wieght");
  next.policy = {"nope", {}};
  bad(next, "nope");
  next = router_->config();
  next.filters = {{"nope", {}}};
  bad(next, "nope");
  next = router_->config();
  next.saturation.kv_threshold = 0;
  bad(next, "saturation.kv_threshold");
  next = router_->config();
  next.block_size = 32;
  bad(next, "block_size");
  // A router without an approximate index cannot switch to it.
  auto only_precise = Router::create(config_, {.precise = &precise_});
  ASSERT_TRUE(only_precise.ok());
  next = (*only_precise)->config();
  next.overlap_source = OverlapSource::kApprox;
  EXPECT_FALSE((*only_precise)->reconfigure(next).ok());
}

TEST_F(RouterTest, ExplainShowsEveryEndpointsMatchAndCost) {
  config_.filters = {};
  build();
  auto r = prompt(100, 1);
  EndpointId a = add({.url = "A"});
  EndpointId b = add({.url = "B"});
  EndpointId c = add({.url = "C"});
  cache(a, r, 90);
  cache(c, r, 50);
  busy(a, 275);
  busy(b, 10);
  busy(c, 135);
  router_->pool().set_health(c, Health::kDraining);
  const size_t in_flight = router_->pool().requests_in_flight();
  Explanation x = router_->explain(r, 0, rng_);
  ASSERT_TRUE(x.decision.accepted());
  EXPECT_EQ(x.decision.endpoint, b);
  EXPECT_EQ(x.decision.prompt_blocks, 100u);
  ASSERT_EQ(x.endpoints.size(), 3u);
  EXPECT_EQ(x.endpoints[a].gpu_blocks, 90u);
  EXPECT_EQ(x.endpoints[b].gpu_blocks, 0u);
  EXPECT_EQ(x.endpoints[c].gpu_blocks, 50u);  // matched although not a candidate
  ASSERT_TRUE(x.endpoints[a].cost.has_value());
  ASSERT_TRUE(x.endpoints[b].cost.has_value());
  EXPECT_DOUBLE_EQ(*x.endpoints[b].cost, x.decision.cost);
  EXPECT_GT(*x.endpoints[a].cost, *x.endpoints[b].cost);
  EXPECT_FALSE(x.endpoints[c].cost.has_value());  // draining: filtered before the policy
  EXPECT_FALSE(x.endpoints[a].decode_cost.has_value());
  // kv-cost's cost is its prefill and decode terms, added up.
  for (EndpointId id : {a, b}) {
    const std::vector<CostTerm>& t = x.endpoints[id].terms;
    ASSERT_EQ(t.size(), 2u);
    EXPECT_EQ(t[0].name, "prefill");
    EXPECT_EQ(t[1].name, "decode");
    EXPECT_DOUBLE_EQ(t[0].value + t[1].value, *x.endpoints[id].cost);
  }
  EXPECT_TRUE(x.endpoints[c].terms.empty());
  // Nothing recorded.
  EXPECT_EQ(router_->pool().requests_in_flight(), in_flight);
}

TEST_F(RouterTest, ExplainLooksUpTheIndexEvenForPoliciesThatIgnoreIt) {
  config_.policy = {"least-request", {}};
  build();
  auto r = prompt(8, 1);
  EndpointId a = add({.url = "A"});
  cache(a, r, 6);
  Explanation x = router_->explain(r, 0, rng_);
  ASSERT_EQ(x.endpoints.size(), 1u);
  EXPECT_EQ(x.endpoints[0].gpu_blocks, 6u);
  EXPECT_EQ(x.decision.matched_blocks, 6u);
}

TEST_F(RouterTest, CommitTracksLoadAndTeachesTheApproxIndex) {
  config_.overlap_source = OverlapSource::kApprox;
  config_.policy = {"kv-cost", {{"overlap_weight", "4"}}};
  build();
  add({.url = "A"});
  add({.url = "B"});
  auto r1 = prompt(30, 1);
  Decision d1 = router_->route(r1, 0, rng_);
  ASSERT_TRUE(d1.accepted());
  EXPECT_EQ(d1.matched_blocks, 0u);
  const Endpoint* e = router_->pool().get(d1.endpoint);
  EXPECT_EQ(e->load.in_flight, 1u);
  EXPECT_EQ(e->load.active_prefill_tokens, 30 * kBs);
  EXPECT_EQ(e->load.active_decode_blocks, 30u);
  // The same prompt again: history says d1's endpoint has it; load says the other.
  // Weight 4: 4 x 30 (prefill in queue) + 30 + 0 new blocks (shared prefix)
  // vs 4 x 30 + 30: a tie on this load... so finish the first prefill.
  router_->pool().on_first_token(r1.id, 1);
  auto r2 = r1;
  r2.id = 1000;
  Decision d2 = router_->route(r2, 2, rng_);
  ASSERT_TRUE(d2.accepted());
  EXPECT_EQ(d2.endpoint, d1.endpoint);
  EXPECT_EQ(d2.matched_blocks, 30u);
  EXPECT_EQ(d2.prefill_tokens, 0u);
  EXPECT_EQ(router_->pool().get(d1.endpoint)->load.active_decode_blocks, 30u);  // shared
  // Routing the same id twice is refused.
  EXPECT_EQ(router_->route(r2, 3, rng_).reason, RejectReason::kDuplicateRequest);
  EXPECT_FALSE(router_->commit(r2, Decision{.reason = RejectReason::kSaturated}, 3).ok());
}

// Between two scrapes the router's own in-flight count spreads a burst.
TEST_F(RouterTest, BurstIsSpreadBetweenScrapes) {
  config_.policy = {"load", {}};
  build();
  for (const char* u : {"A", "B", "C", "D"}) {
    EndpointId id = add({.url = u, .kv_capacity_blocks = 1000});
    router_->pool().on_metrics(id, {.waiting = 0, .running = 0, .kv_usage = 0}, 0);
  }
  std::map<EndpointId, int> count;
  for (int i = 0; i < 8; ++i) {
    auto r = prompt(50, i);
    Decision d = router_->route(r, kMillisecond, rng_);
    ASSERT_TRUE(d.accepted());
    count[d.endpoint]++;
  }
  EXPECT_EQ(count.size(), 4u);
  for (auto [ep, n] : count) EXPECT_EQ(n, 2) << ep;
}

class ShedTest : public RouterTest {
 protected:
  EndpointId a_ = 0, b_ = 0;
  void SetUp() override {
    RouterTest::SetUp();
    config_.policy = {"least-request", {}};
    config_.saturation.metrics_max_age = 2 * kSecond;
    build();
    a_ = add({.url = "A"});
    b_ = add({.url = "B"});
  }
  void metrics(EndpointId ep, uint32_t waiting, double kv, Nanos at = 0) {
    router_->pool().on_metrics(ep, {.waiting = waiting, .kv_usage = kv}, at);
  }
  Decision route(Criticality c, Nanos now = 0) {
    return router_->decide(prompt(2, 9, c), now, rng_);
  }
};

TEST_F(ShedTest, SheddableGoesOnlyToUnsaturated) {
  metrics(a_, 5, 0.1);  // saturated by queue
  metrics(b_, 0, 0.5);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(route(Criticality::kSheddable).endpoint, b_);
  metrics(b_, 0, 0.85);  // saturated by KV
  Decision d = route(Criticality::kSheddable);
  EXPECT_EQ(d.reason, RejectReason::kSaturated);
  EXPECT_EQ(to_string(d.reason), "saturated");
  EXPECT_EQ(http_status(d.reason), 429);
  // Standard requests are not shed: they go to the saturated endpoints.
  EXPECT_TRUE(route(Criticality::kStandard).accepted());
}

TEST_F(ShedTest, SheddingCanBeTurnedOff) {
  config_.saturation.shed = false;
  build();
  a_ = add({.url = "A"});
  metrics(a_, 9, 0.9);
  EXPECT_TRUE(route(Criticality::kSheddable).accepted());
}

TEST_F(ShedTest, StandardPrefersUnsaturated) {
  metrics(a_, 6, 0.1);
  metrics(b_, 1, 0.1);
  ASSERT_TRUE(router_->pool().on_routed(100, {.endpoint = b_}, 0).ok());  // more in flight
  ASSERT_TRUE(router_->pool().on_routed(101, {.endpoint = b_}, 0).ok());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(route(Criticality::kStandard).endpoint, b_);
}

TEST_F(ShedTest, CriticalGoesWhereTheQueueIsShort) {
  metrics(a_, 60, 0.95);
  metrics(b_, 40, 0.95);  // saturated, but below 50 waiting
  for (int i = 0; i < 10; ++i) EXPECT_EQ(route(Criticality::kCritical).endpoint, b_);
  metrics(b_, 70, 0.95);  // nowhere below 50: still routed, never shed
  EXPECT_TRUE(route(Criticality::kCritical).accepted());
  EXPECT_EQ(route(Criticality::kSheddable).reason, RejectReason::kSaturated);
}

TEST_F(ShedTest, StaleMetricsCountAsSaturated) {
  metrics(a_, 0, 0.1, 0);
  metrics(b_, 0, 0.1, 0);
  EXPECT_TRUE(route(Criticality::kSheddable, kSecond).accepted());
  metrics(b_, 0, 0.1, 2 * kSecond);  // a's scrapes stop
  for (int i = 0; i < 10; ++i) EXPECT_EQ(route(Criticality::kSheddable, 3 * kSecond).endpoint, b_);
  EXPECT_EQ(route(Criticality::kSheddable, 5 * kSecond).reason, RejectReason::kSaturated);
  // A critical request avoids the stale one while a fresh one exists.
  metrics(b_, 0, 0.1, 5 * kSecond);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(route(Criticality::kCritical, 5 * kSecond).endpoint, b_);
}

class PdTest : public RouterTest {
 protected:
  void SetUp() override {
    RouterTest::SetUp();
    config_.filters = {};
  }
};

TEST_F(PdTest, PrefillByCostDecodeByLoadAndLocality) {
  config_.pd.locality_weight = 50;
  build();
  EndpointId p0 = add({.url = "p0", .role = Role::kPrefill, .zone = "z1", .rack = "r1"});
  EndpointId p1 = add({.url = "p1", .role = Role::kPrefill, .zone = "z2", .rack = "r3"});
  EndpointId d_rack = add({.url = "d0", .role = Role::kDecode, .zone = "z1", .rack = "r1"});
  EndpointId d_zone = add({.url = "d1", .role = Role::kDecode, .zone = "z1", .rack = "r2"});
  EndpointId d_far = add({.url = "d2", .role = Role::kDecode, .zone = "z2", .rack = "r3"});
  auto r = prompt(40, 1);
  cache(p0, r, 40);     // p0 has it all: the prefill goes there
  cache(d_far, r, 40);  // decode ignores cache: no credit for d_far
  Decision d = router_->decide(r, 0, rng_);
  ASSERT_TRUE(d.accepted());
  ASSERT_TRUE(d.prefill_endpoint.has_value());
  EXPECT_EQ(*d.prefill_endpoint, p0);
  EXPECT_EQ(d.endpoint, d_rack);  // same rack
  EXPECT_EQ(d.matched_blocks, 40u);
  // 30 blocks in use on the rack-mate: 30 < 50, still preferred over the zone-mate.
  busy(d_rack, 30);
  EXPECT_EQ(router_->decide(r, 0, rng_).endpoint, d_rack);
  // 60 blocks: now the same-zone one (distance 1 x 50) is cheaper.
  busy(d_rack, 30);
  EXPECT_EQ(router_->decide(r, 0, rng_).endpoint, d_zone);
  // Both near ones loaded: rack-mate 120 + 40, zone-mate 60 + 40 + 50, far 40 + 100.
  busy(d_rack, 60);
  busy(d_zone, 60);
  EXPECT_EQ(router_->decide(r, 0, rng_).endpoint, d_far);
  (void)p1;
}

TEST_F(PdTest, NoLocalityWeightMeansLoadOnly) {
  config_.pd.locality_weight = 0;
  build();
  add({.url = "p0", .role = Role::kPrefill, .zone = "z1", .rack = "r1"});
  EndpointId d0 = add({.url = "d0", .role = Role::kDecode, .zone = "z1", .rack = "r1"});
  EndpointId d1 = add({.url = "d1", .role = Role::kDecode, .zone = "z9", .rack = "r9"});
  busy(d0, 1);
  auto r = prompt(8, 1);
  EXPECT_EQ(router_->decide(r, 0, rng_).endpoint, d1);
}

TEST_F(PdTest, RemotePrefillSkippedWhenLittleIsUncached) {
  config_.pd.local_prefill_max_tokens = 64;  // fewer than 4 uncached blocks: local
  build();
  EndpointId p = add({.url = "p", .role = Role::kPrefill});
  EndpointId d = add({.url = "d", .role = Role::kDecode});
  auto r = prompt(40, 1);
  cache(d, r, 37);  // 3 blocks = 48 tokens uncached on the decode endpoint
  Decision dec = router_->decide(r, 0, rng_);
  ASSERT_TRUE(dec.accepted());
  EXPECT_EQ(dec.endpoint, d);
  EXPECT_FALSE(dec.prefill_endpoint.has_value());
  EXPECT_EQ(dec.prefill_tokens, 48u);
  // 36 cached: 64 uncached, not fewer than the threshold: remote prefill.
  precise_.remove_endpoint(d);
  cache(d, r, 36);
  dec = router_->decide(r, 0, rng_);
  ASSERT_TRUE(dec.prefill_endpoint.has_value());
  EXPECT_EQ(*dec.prefill_endpoint, p);
  EXPECT_EQ(dec.prefill_tokens, 40 * kBs);
}

TEST_F(PdTest, MissingRolesAreReasons) {
  config_.pd.mode = PdMode::kOn;
  build();
  EndpointId d = add({.url = "d", .role = Role::kDecode});
  auto r = prompt(4, 1);
  EXPECT_EQ(router_->decide(r, 0, rng_).reason, RejectReason::kNoPrefillEndpoint);
  router_->remove_endpoint(d);
  EndpointId p = add({.url = "p", .role = Role::kPrefill});
  EXPECT_EQ(router_->decide(r, 0, rng_).reason, RejectReason::kNoDecodeEndpoint);
  EndpointId d2 = add({.url = "d2", .role = Role::kDecode});
  router_->pool().set_health(d2, Health::kUnhealthy);
  EXPECT_EQ(router_->decide(r, 0, rng_).reason, RejectReason::kNoDecodeEndpoint);
  router_->pool().set_health(d2, Health::kHealthy);
  router_->pool().set_health(p, Health::kDraining);
  EXPECT_EQ(router_->decide(r, 0, rng_).reason, RejectReason::kNoPrefillEndpoint);
}

TEST_F(PdTest, CommitPutsPrefillAndDecodeLoadWhereTheyBelong) {
  build();
  EndpointId p = add({.url = "p", .role = Role::kPrefill});
  EndpointId d = add({.url = "d", .role = Role::kDecode});
  auto r = prompt(10, 1);
  Decision dec = router_->route(r, 0, rng_);
  ASSERT_TRUE(dec.accepted());
  EXPECT_EQ(router_->pool().get(p)->load.active_prefill_tokens, 10 * kBs);
  EXPECT_EQ(router_->pool().get(d)->load.active_decode_blocks, 10u);
  router_->pool().on_first_token(r.id, 1);
  EXPECT_EQ(router_->pool().get(p)->load.active_prefill_tokens, 0u);
  // The approx index learned that p computed (and so caches) the prompt.
  std::vector<kv::EndpointMatch> m;
  approx_.match(r.keys, 2, m);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].endpoint, p);
}

// Early rejection: two decode endpoints of 100 blocks, max_usage 1. Prefill runs at
// 16000 tokens/s, so a 10-block prompt (160 tokens) takes 10 ms and a 100-block one
// 100 ms. Each decode endpoint holds 90 blocks of requests that will finish decoding
// 50 ms from now.
class EarlyRejectTest : public PdTest {
 protected:
  EndpointId d0_ = 0, d1_ = 0;
  void SetUp() override {
    PdTest::SetUp();
    config_.prefill_tokens_per_second = 16000;
    config_.early_reject = {.enabled = true, .max_usage = 1.0, .decode_seconds_per_token = 0.001};
    build();
    add({.url = "p", .role = Role::kPrefill});
    d0_ = add({.url = "d0", .role = Role::kDecode, .kv_capacity_blocks = 100});
    d1_ = add({.url = "d1", .role = Role::kDecode, .kv_capacity_blocks = 100});
    for (EndpointId d : {d0_, d1_}) {
      // 90 blocks: 1390 prompt tokens + 50 output tokens, decoding since t = 0.
      RequestId id = next_id_++;
      ASSERT_TRUE(
          router_->pool()
              .on_routed(id, {.endpoint = d, .prompt_tokens = 1390, .expected_output_tokens = 50},
                         0)
              .ok());
      router_->pool().on_first_token(id, 0);
    }
  }
};

TEST_F(EarlyRejectTest, RejectsWhenNoDecodeWillHaveRoom) {
  auto small = prompt(20, 1);  // prefill done at 20 ms: decode still holds 90 + 20 > 100
  Decision d = router_->decide(small, 0, rng_);
  EXPECT_EQ(d.reason, RejectReason::kDecodeFull);
  EXPECT_EQ(to_string(d.reason), "decode_full");
  EXPECT_EQ(http_status(d.reason), 429);
}

TEST_F(EarlyRejectTest, AcceptsWhenDecodesFinishBeforeThePrefillEnds) {
  // A 60-block prompt: prefill ends at 60 ms, after the running decodes end at 50 ms.
  // A naive check against the current load (90 + 60 > 100) would turn it away.
  auto big = prompt(60, 2);
  Decision d = router_->decide(big, 0, rng_);
  EXPECT_TRUE(d.accepted()) << to_string(d.reason);
  EXPECT_EQ(d.predicted_prefill, 60 * kMillisecond);
}

TEST_F(EarlyRejectTest, CountsPrefillsThatLandBeforeThisOne) {
  // A first 60-block request is accepted for one decode endpoint; its prefill is queued
  // on the prefill endpoint, so a second 60-block request's prefill ends at 120 ms,
  // after the first one lands on its decode endpoint (60 blocks there from 60 ms): the
  // second must go to the other decode endpoint, and a third has nowhere to go.
  auto r1 = prompt(60, 3);
  Decision d1 = router_->route(r1, 0, rng_);
  ASSERT_TRUE(d1.accepted());
  auto r2 = prompt(60, 4);
  Decision d2 = router_->route(r2, 0, rng_);
  ASSERT_TRUE(d2.accepted()) << to_string(d2.reason);
  EXPECT_NE(d2.endpoint, d1.endpoint);
  auto r3 = prompt(60, 5);
  EXPECT_EQ(router_->decide(r3, 0, rng_).reason, RejectReason::kDecodeFull);
}

// The naive rule (predict: false) judges the decode load now: it is blind to the
// prefills already in the pipe, even those predicted to have landed by now, until their
// prefill answer comes back.
TEST_F(PdTest, NaiveEarlyRejectionIgnoresPrefillsInThePipe) {
  config_.prefill_tokens_per_second = 16000;
  config_.early_reject = {
      .enabled = true, .max_usage = 1.0, .decode_seconds_per_token = 0.001, .predict = false};
  build();
  add({.url = "p", .role = Role::kPrefill});
  add({.url = "d", .role = Role::kDecode, .kv_capacity_blocks = 100});
  auto r1 = prompt(60, 1);
  ASSERT_TRUE(router_->route(r1, 0, rng_).accepted());
  auto r2 = prompt(60, 2);
  // 60 blocks are on their way, 60 more would not fit: the naive rule admits anyway,
  // now and past r1's predicted prefill end (60 ms).
  EXPECT_TRUE(router_->decide(r2, 0, rng_).accepted());
  EXPECT_TRUE(router_->decide(r2, 200 * kMillisecond, rng_).accepted());
  // The prediction sees r1 land first and turns r2 away.
  config_.early_reject.predict = true;
  ASSERT_TRUE(router_->reconfigure(config_).ok());
  EXPECT_EQ(router_->decide(r2, 0, rng_).reason, RejectReason::kDecodeFull);
  // Once r1's prefill is done, the naive rule sees it too.
  config_.early_reject.predict = false;
  ASSERT_TRUE(router_->reconfigure(config_).ok());
  router_->pool().on_first_token(r1.id, 250 * kMillisecond);
  EXPECT_EQ(router_->decide(r2, 250 * kMillisecond, rng_).reason, RejectReason::kDecodeFull);
}

TEST_F(EarlyRejectTest, AlsoAppliesToAggregatedPools) {
  config_.pd.mode = PdMode::kOff;
  build();
  EndpointId a = add({.url = "a", .kv_capacity_blocks = 100});
  busy(a, 95);
  auto r = prompt(10, 1);
  EXPECT_EQ(router_->decide(r, 0, rng_).reason, RejectReason::kDecodeFull);
  router_->pool().set_kv_capacity(a, 200);
  EXPECT_TRUE(router_->decide(r, 0, rng_).accepted());
}

}  // namespace router_test
}  // namespace kvgate::route
