// late_binding cache (docs/flow-control.md "Late binding"): a backlogged tenant's request
// leaving the queue may follow its cached prefix into a full engine within the cache
// reserve; a tenant within its share, and a request whose prefix no full engine holds,
// go where there is room, as with late_binding room.
#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "core/kv/block_hash.h"
#include "core/route/flow_control.h"

namespace kvgate::route {
// Named after the file, not anonymous: the tests compile in unity batches.
namespace flow_cache_binding_test {

using Kind = FlowOutcome::Kind;
constexpr uint32_t kBs = 16;

class FlowCacheBindingTest : public ::testing::Test {
 protected:
  kv::PreciseIndex precise_{{.model = "m", .block_size = kBs}};
  RouterConfig config_;
  FlowQueueConfig flow_;
  std::unique_ptr<Router> router_;
  std::unique_ptr<FlowController> fc_;
  Rng rng_{3};
  // Stable addresses: the queue borrows the requests, the requests their keys.
  std::deque<std::vector<kv::TokenId>> tokens_;
  std::deque<std::vector<kv::BlockKey>> keys_;
  std::deque<RouteRequest> requests_;
  std::vector<FlowOutcome> out_;
  RequestId next_ = 1;
  EndpointId a_ = 0;
  EndpointId b_ = 0;

  void SetUp() override {
    config_.block_size = kBs;
    config_.policy = {"kv-cost", {}};
    config_.overlap_source = OverlapSource::kPrecise;
    config_.saturation.queue_threshold = 1;
    config_.saturation.metrics_max_age = 0;
    flow_.enabled = true;
    flow_.max_wait.fill(0);
  }
  // Two endpoints, both full (one request waiting each, queue_threshold 1).
  void build(LateBinding binding) {
    flow_.late_binding = binding;
    auto r = Router::create(config_, {.precise = &precise_});
    ASSERT_TRUE(r.ok()) << r.error();
    router_ = std::move(*r);
    fc_ = std::make_unique<FlowController>(*router_, flow_);
    a_ = *router_->add_endpoint({.url = "http://a:1"}, 0);
    b_ = *router_->add_endpoint({.url = "http://b:1"}, 0);
    scrape(a_, 1, 4, 0);
    scrape(b_, 1, 4, 0);
  }
  void scrape(EndpointId id, uint32_t waiting, uint32_t running, Nanos now) {
    router_->pool().on_metrics(id, {.waiting = waiting, .running = running}, now);
  }
  // A request of `tenant` whose 8-block prompt is the same for every request of one `seed`.
  const RouteRequest& admit(std::string_view tenant, uint32_t seed) {
    tokens_.emplace_back(8 * kBs);
    std::iota(tokens_.back().begin(), tokens_.back().end(), seed * 100000);
    keys_.emplace_back();
    kv::hash_blocks(tokens_.back(), kBs, kv::block_seed("m", "", ""), keys_.back());
    RouteRequest& rr = requests_.emplace_back();
    rr.id = next_++;
    rr.keys = keys_.back();
    rr.prompt_tokens = 8 * kBs;
    EXPECT_EQ(fc_->admit({.request = &rr, .tenant = tenant}, 0, rng_, out_).kind, Kind::kQueued);
    return rr;
  }
  // The engine at `ep` reports it stored the whole prompt of `r`.
  void cache(EndpointId ep, const RouteRequest& r) {
    const std::vector<kv::TokenId>* t = nullptr;
    for (size_t i = 0; i < keys_.size(); ++i) {
      if (keys_[i].data() == r.keys.data()) t = &tokens_[i];
    }
    ASSERT_NE(t, nullptr);
    std::vector<uint64_t> hashes(r.keys.size());
    std::iota(hashes.begin(), hashes.end(), 7000 + ep * 1000);
    kv::BlockStoredEvent ev;
    ev.block_hashes = hashes;
    ev.token_ids = *t;
    ev.block_size = kBs;
    precise_.apply_stored(ep, ev);
  }
};

// `a` holds the heavy tenant's prefix and is full, within the cache reserve (one waiting,
// below queue_threshold 1 + cache_reserve 1); `b` gets room. room: the first request
// goes to `b`, and nothing more fits. cache: the first follows its prefix to `a` (whose
// queue then reaches the reserve's bound), the next takes the room on `b`.
TEST_F(FlowCacheBindingTest, ABackloggedTenantsRequestFollowsItsCacheIntoTheReserve) {
  for (LateBinding binding : {LateBinding::kRoom, LateBinding::kCache}) {
    SCOPED_TRACE(std::string(to_string(binding)));
    out_.clear();
    build(binding);
    const RouteRequest& first = admit("heavy", 1);
    admit("heavy", 1);
    admit("heavy", 1);
    cache(a_, first);
    scrape(b_, 0, 4, kMillisecond);
    fc_->dispatch(kMillisecond, rng_, out_);
    if (binding == LateBinding::kRoom) {
      ASSERT_EQ(out_.size(), 1u);
      EXPECT_EQ(out_[0].id, first.id);
      EXPECT_EQ(out_[0].decision.endpoint, b_);
    } else {
      ASSERT_EQ(out_.size(), 2u);
      EXPECT_EQ(out_[0].id, first.id);
      EXPECT_EQ(out_[0].kind, Kind::kDispatched);
      EXPECT_EQ(out_[0].decision.endpoint, a_);
      EXPECT_EQ(out_[0].decision.prefill_tokens, 0u);  // all of it cached there
      EXPECT_EQ(out_[1].decision.endpoint, b_);        // `a` is at the reserve's bound
    }
    EXPECT_EQ(fc_->queue().size(), binding == LateBinding::kRoom ? 2u : 1u);
  }
}

// cache_reserve 0: `a` (one waiting, queue_threshold 1) is beyond the reserve.
TEST_F(FlowCacheBindingTest, NoEndpointBeyondTheReserve) {
  flow_.cache_reserve = 0;
  build(LateBinding::kCache);
  const RouteRequest& first = admit("heavy", 1);
  admit("heavy", 1);
  cache(a_, first);
  scrape(b_, 0, 4, kMillisecond);
  fc_->dispatch(kMillisecond, rng_, out_);
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_EQ(out_[0].decision.endpoint, b_);
}

// The light tenant's only queued request leaves first (the tenants tie; it waited
// longest): within its share, it goes where there is room although `a` holds its prefix.
// The sparse reserve is off: with it, the light request (its tenant's only one) would
// leave into that reserve as soon as the heavy ones queue behind it, before the dispatch.
TEST_F(FlowCacheBindingTest, ATenantWithinItsShareGoesWhereThereIsRoom) {
  flow_.sparse_reserve = 0;
  build(LateBinding::kCache);
  const RouteRequest& light = admit("light", 1);
  admit("heavy", 2);
  admit("heavy", 2);
  cache(a_, light);
  scrape(b_, 0, 4, kMillisecond);
  fc_->dispatch(kMillisecond, rng_, out_);
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_EQ(out_[0].id, light.id);
  EXPECT_EQ(out_[0].decision.endpoint, b_);
}

// No full endpoint holds the prompt: a full one saves no prefill, so the request goes
// where there is room (`a` and `b` cost the same to kv-cost: either could win the
// router's tie, the rule must not take `a`).
TEST_F(FlowCacheBindingTest, WithoutACachedPrefixTheRoomDecides) {
  build(LateBinding::kCache);
  const RouteRequest& first = admit("heavy", 1);
  admit("heavy", 1);
  scrape(b_, 0, 4, kMillisecond);
  fc_->dispatch(kMillisecond, rng_, out_);
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_EQ(out_[0].id, first.id);
  EXPECT_EQ(out_[0].decision.endpoint, b_);
}

// With late_binding cache the sparse reserve lies above the cache reserve: `a` and `b`
// hold two waiting each (queue_threshold 1 + cache_reserve 1, what backlogged tenants'
// requests may fill); the light tenant's request, sparse once the heavy tenant queues,
// still finds a place there. With late_binding room two waiting is beyond
// queue_threshold 1 + sparse_reserve 1.
TEST_F(FlowCacheBindingTest, TheSparseReserveLiesAboveTheCacheReserve) {
  for (LateBinding binding : {LateBinding::kRoom, LateBinding::kCache}) {
    SCOPED_TRACE(std::string(to_string(binding)));
    out_.clear();
    build(binding);
    scrape(a_, 2, 4, 0);
    scrape(b_, 2, 4, 0);
    const RouteRequest& light = admit("light", 1);
    admit("heavy", 2);
    admit("heavy", 2);
    fc_->dispatch(kMillisecond, rng_, out_);
    if (binding == LateBinding::kRoom) {
      EXPECT_TRUE(out_.empty());
      EXPECT_EQ(fc_->queue().size(), 3u);
    } else {
      ASSERT_EQ(out_.size(), 1u);
      EXPECT_EQ(out_[0].id, light.id);
      EXPECT_EQ(out_[0].kind, Kind::kDispatched);
      EXPECT_EQ(fc_->queue().size(), 2u);
    }
  }
}

TEST(FlowCacheBindingConfigTest, ParsesCacheAndItsReserveAndNamesTheChoices) {
  FlowQueueConfig c;
  EXPECT_EQ(c.late_binding, LateBinding::kRoom);  // the default stays
  std::vector<std::pair<std::string, std::string>> e = {{"late_binding", "cache"},
                                                        {"cache_reserve", "2"}};
  ASSERT_TRUE(apply_flow_entries(e, c).ok());
  EXPECT_EQ(c.late_binding, LateBinding::kCache);
  EXPECT_EQ(c.cache_reserve, 2u);
  EXPECT_EQ(to_string(LateBinding::kCache), "cache");
  EXPECT_TRUE(parse_late_binding("cache") == LateBinding::kCache);
  std::vector<std::pair<std::string, std::string>> bad = {{"late_binding", "cached"}};
  Status s = apply_flow_entries(bad, c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("'cached'"), std::string::npos) << s.error();
  EXPECT_NE(s.error().find("room, any or cache"), std::string::npos) << s.error();
  std::vector<std::pair<std::string, std::string>> reserve = {{"cache_reserve", "-1"}};
  EXPECT_FALSE(apply_flow_entries(reserve, c).ok());
}

}  // namespace flow_cache_binding_test
}  // namespace kvgate::route
