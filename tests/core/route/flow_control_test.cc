// FlowController over a real Router in virtual time: when to queue, dispatch when
// capacity appears, late binding, shedding, early rejection before queueing, scale
// from zero.
#include "core/route/flow_control.h"

#include <gtest/gtest.h>

#include <deque>

namespace kvgate::route {
namespace {

using Kind = FlowOutcome::Kind;

class FlowControlTest : public ::testing::Test {
 protected:
  RouterConfig config_;
  FlowQueueConfig flow_;
  std::unique_ptr<Router> router_;
  std::unique_ptr<FlowController> fc_;
  Rng rng_{3};
  std::deque<RouteRequest> requests_;  // stable addresses: the queue borrows them
  std::vector<FlowOutcome> out_;
  RequestId next_ = 1;

  void SetUp() override {
    config_.overlap_source = OverlapSource::kNone;
    config_.policy = {"least-request", {}};
    config_.saturation.queue_threshold = 2;
    config_.saturation.metrics_max_age = 0;
    flow_.enabled = true;
    flow_.max_wait.fill(0);
  }
  void build() {
    auto r = Router::create(config_, {});
    ASSERT_TRUE(r.ok()) << r.error();
    router_ = std::move(*r);
    fc_ = std::make_unique<FlowController>(*router_, flow_);
  }
  // Drops the controller, the router and the requests, for a build() with other options.
  void start_over() {
    fc_.reset();  // before the router and the requests it borrows
    router_.reset();
    requests_.clear();
    out_.clear();
    next_ = 1;
  }
  EndpointId add(std::string url, uint32_t kv_blocks = 0) {
    auto id = router_->add_endpoint({.url = std::move(url), .kv_capacity_blocks = kv_blocks}, 0);
    EXPECT_TRUE(id.ok());
    return *id;
  }
  FlowOutcome admit(std::string_view tenant, Criticality c = Criticality::kStandard, Nanos now = 0,
                    uint32_t prompt = 64, uint32_t output = 16) {
    RouteRequest& rr = requests_.emplace_back();
    rr.id = next_++;
    rr.prompt_tokens = prompt;
    rr.expected_output_tokens = output;
    rr.criticality = c;
    return fc_->admit({.request = &rr, .tenant = tenant}, now, rng_, out_);
  }
  void scrape(EndpointId id, uint32_t waiting, uint32_t running, Nanos now, double kv = 0) {
    router_->pool().on_metrics(id, {.waiting = waiting, .running = running, .kv_usage = kv}, now);
  }
};

// targets_first (flow_queue.h): a request's TTFT target reaches the queue with
// latency_targets off, and the targeted request is dispatched first.
TEST_F(FlowControlTest, TargetedRequestsAreDispatchedFirst) {
  ASSERT_FALSE(config_.latency_targets.enabled);
  flow_.input_weight = 1;
  flow_.output_weight = 1;
  auto admit_targeted = [this](std::string_view tenant, Nanos ttft_target, Nanos now) {
    RouteRequest& rr = requests_.emplace_back();
    rr.id = next_++;
    rr.prompt_tokens = 64;
    rr.expected_output_tokens = 16;
    rr.ttft_target = ttft_target;
    return fc_->admit({.request = &rr, .tenant = tenant}, now, rng_, out_);
  };
  for (const bool on : {false, true}) {
    SCOPED_TRACE(on ? "targets_first" : "off");
    start_over();
    flow_.targets_first = on;
    build();
    const EndpointId id = add("http://a:1");
    scrape(id, 5, 10, 0);                                                       // full
    EXPECT_EQ(admit_targeted("a", 0, 0).kind, Kind::kQueued);                   // 1
    EXPECT_EQ(admit_targeted("b", 0, 1).kind, Kind::kQueued);                   // 2
    EXPECT_EQ(admit_targeted("c", 400 * kMillisecond, 2).kind, Kind::kQueued);  // 3
    // The engine drained its queue: room for queue_threshold (2) requests.
    scrape(id, 0, 10, kSecond);
    fc_->dispatch(kSecond, rng_, out_);
    ASSERT_EQ(out_.size(), 2u);
    if (on) {
      EXPECT_EQ(out_[0].id, 3u);
      EXPECT_EQ(out_[1].id, 1u);
    } else {
      EXPECT_EQ(out_[0].id, 1u);
      EXPECT_EQ(out_[1].id, 2u);
    }
    EXPECT_EQ(out_[0].kind, Kind::kDispatched);
  }
}

TEST_F(FlowControlTest, DispatchesAtOnceWhileAnEndpointHasCapacityThenQueues) {
  build();
  EndpointId a = add("http://a:1");
  scrape(a, 0, 0, 0);
  // queue_threshold 2: two requests routed since the scrape fill it.
  EXPECT_EQ(admit("t").kind, Kind::kDispatched);
  EXPECT_EQ(admit("t").kind, Kind::kDispatched);
  EXPECT_FALSE(fc_->has_capacity(0));
  FlowOutcome q = admit("t");
  EXPECT_EQ(q.kind, Kind::kQueued);
  EXPECT_EQ(fc_->queue().size(), 1u);
  EXPECT_TRUE(out_.empty());
  // Nothing changed: dispatch leaves it queued.
  EXPECT_EQ(fc_->dispatch(1, rng_, out_), 0u);
  // One request finishes: room for one.
  router_->pool().on_finished(1, 2 * kSecond);
  EXPECT_EQ(fc_->dispatch(2 * kSecond, rng_, out_), 1u);
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_EQ(out_[0].kind, Kind::kDispatched);
  EXPECT_EQ(out_[0].id, 3u);
  EXPECT_EQ(out_[0].waited, 2 * kSecond);
  EXPECT_EQ(out_[0].decision.endpoint, a);
  EXPECT_NE(router_->pool().request(3), nullptr);  // routed and tracked
}

TEST_F(FlowControlTest, AScrapeShowingRoomReleasesTheQueueInOrder) {
  build();
  EndpointId a = add("http://a:1");
  scrape(a, 5, 10, 0);  // saturated
  for (int i = 0; i < 4; ++i) EXPECT_EQ(admit("t", Criticality::kStandard, i).kind, Kind::kQueued);
  EXPECT_EQ(admit("t", Criticality::kCritical, 10).kind, Kind::kQueued);
  scrape(a, 0, 10, kSecond);  // the engine drained its queue
  fc_->dispatch(kSecond, rng_, out_);
  ASSERT_EQ(out_.size(), 2u);  // queue_threshold requests beyond the scrape
  EXPECT_EQ(out_[0].id, 5u);   // critical first
  EXPECT_EQ(out_[1].id, 1u);
  EXPECT_EQ(fc_->queue().size(), 3u);
}

TEST_F(FlowControlTest, LateBindingRoutesToWhatIsThereWhenTheRequestLeaves) {
  build();
  EndpointId a = add("http://a:1");
  scrape(a, 9, 9, 0);
  EXPECT_EQ(admit("t").kind, Kind::kQueued);
  // A second endpoint joins while it waits: the request goes there.
  EndpointId b = add("http://b:1");
  fc_->dispatch(0, rng_, out_);
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_EQ(out_[0].decision.endpoint, b);
}

TEST_F(FlowControlTest, ScaleFromZeroHoldsRequestsUntilTheFirstReplica) {
  build();
  // No endpoint at all: without flow control this is no_endpoints (503).
  for (int i = 0; i < 3; ++i) EXPECT_EQ(admit("t", Criticality::kStandard, i).kind, Kind::kQueued);
  EXPECT_EQ(fc_->queue().size(), 3u);  // the autoscaler's waiting signal
  const Nanos ready = 90 * kSecond;
  EndpointId a = router_->add_endpoint({.url = "http://a:1"}, ready).value();
  fc_->dispatch(ready, rng_, out_);
  ASSERT_EQ(out_.size(), 2u);
  EXPECT_EQ(out_[0].id, 1u);
  EXPECT_EQ(out_[0].waited, ready);
  EXPECT_EQ(out_[0].decision.endpoint, a);
  scrape(a, 0, 2, ready + kSecond);
  fc_->dispatch(ready + kSecond, rng_, out_);
  ASSERT_EQ(out_.size(), 3u);  // none lost
  EXPECT_TRUE(fc_->queue().empty());
}

TEST_F(FlowControlTest, SheddableIsShedOrQueuedByPolicy) {
  flow_.shed_sheddable = true;
  build();
  EndpointId a = add("http://a:1");
  scrape(a, 9, 9, 0);
  FlowOutcome o = admit("t", Criticality::kSheddable);
  EXPECT_EQ(o.kind, Kind::kRefused);
  EXPECT_EQ(o.decision.reason, RejectReason::kSaturated);
  EXPECT_EQ(admit("t", Criticality::kStandard).kind, Kind::kQueued);

  flow_.shed_sheddable = false;
  build();
  a = add("http://a:1");
  scrape(a, 9, 9, 0);
  EXPECT_EQ(admit("t", Criticality::kSheddable).kind, Kind::kQueued);
}

TEST_F(FlowControlTest, EarlyRejectionRefusesBeforeQueueing) {
  config_.early_reject.enabled = true;
  config_.saturation.kv_threshold = 0.5;
  build();
  EndpointId a = add("http://a:1", /*kv_blocks=*/10);
  scrape(a, 9, 9, 0);
  // 64 + 16 tokens = 5 blocks of 16: fits in 10 x 0.95.
  EXPECT_EQ(admit("t").kind, Kind::kQueued);
  // 400 tokens = 25 blocks: decode will never have room.
  FlowOutcome o = admit("t", Criticality::kStandard, 0, 384, 16);
  EXPECT_EQ(o.kind, Kind::kRefused);
  EXPECT_EQ(o.decision.reason, RejectReason::kDecodeFull);
  EXPECT_EQ(fc_->queue().size(), 1u);
}

TEST_F(FlowControlTest, QueueRefusalsAndEvictionsComeBackAsOutcomes) {
  flow_.max_requests = 1;
  flow_.max_wait = {0, 5 * kSecond, 0};
  build();
  EndpointId a = add("http://a:1");
  scrape(a, 9, 9, 0);
  EXPECT_EQ(admit("t", Criticality::kSheddable).kind, Kind::kQueued);
  EXPECT_EQ(admit("t", Criticality::kStandard, kSecond).kind, Kind::kQueued);
  ASSERT_EQ(out_.size(), 1u);  // the sheddable one, evicted
  EXPECT_EQ(out_[0].id, 1u);
  EXPECT_EQ(out_[0].refusal, FlowRefusal::kQueueFull);
  FlowOutcome full = admit("u", Criticality::kStandard, kSecond);
  EXPECT_EQ(full.kind, Kind::kRefused);
  EXPECT_EQ(full.refusal, FlowRefusal::kQueueFull);
  out_.clear();
  fc_->expire(6 * kSecond, out_);
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_EQ(out_[0].id, 2u);
  EXPECT_EQ(out_[0].refusal, FlowRefusal::kQueueTimeout);
  EXPECT_EQ(out_[0].waited, 5 * kSecond);
}

TEST_F(FlowControlTest, CancelRemovesAQueuedRequest) {
  build();
  EndpointId a = add("http://a:1");
  scrape(a, 9, 9, 0);
  admit("t");
  admit("t");
  EXPECT_TRUE(fc_->cancel(1));
  EXPECT_FALSE(fc_->cancel(1));
  scrape(a, 0, 9, kSecond);
  fc_->dispatch(kSecond, rng_, out_);
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_EQ(out_[0].id, 2u);
}

TEST_F(FlowControlTest, DisabledRoutesLikeTheRouter) {
  flow_.enabled = false;
  build();
  FlowOutcome o = admit("t");
  EXPECT_EQ(o.kind, Kind::kRefused);
  EXPECT_EQ(o.decision.reason, RejectReason::kNoEndpoints);
  EndpointId a = add("http://a:1");
  scrape(a, 9, 9, 0);
  EXPECT_EQ(admit("t").kind, Kind::kDispatched);  // piles up on the engine, as before
  EXPECT_EQ(admit("t", Criticality::kSheddable).decision.reason, RejectReason::kSaturated);
}

TEST_F(FlowControlTest, NoisyTenantDoesNotDelayAQuietOne) {
  build();
  EndpointId a = add("http://a:1");
  scrape(a, 9, 9, 0);
  for (int i = 0; i < 50; ++i) admit("noisy", Criticality::kStandard, i);
  admit("quiet", Criticality::kStandard, 60);
  scrape(a, 0, 9, 100);
  fc_->dispatch(100, rng_, out_);
  ASSERT_EQ(out_.size(), 2u);
  EXPECT_EQ(out_[0].tenant, "noisy");  // equal counters: the older backlog first
  EXPECT_EQ(out_[1].tenant, "quiet");  // then the quiet tenant, not after 50
}

TEST_F(FlowControlTest, ASparseTenantTakesTheReserveInsteadOfWaitingForAPlace) {
  build();
  EndpointId a = add("http://a:1", 1000);
  scrape(a, 0, 9, 0);
  // queue_threshold 2: two requests routed since the scrape fill it; the rest waits.
  EXPECT_EQ(admit("noisy").kind, Kind::kDispatched);
  EXPECT_EQ(admit("noisy").kind, Kind::kDispatched);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(admit("noisy").kind, Kind::kQueued);
  // The quiet tenant's request is next in order (lifted to noisy's counter, it wins the
  // tie) and its tenant has nothing else queued: it takes the reserve, one request
  // beyond the limit, at once instead of waiting for a request to finish.
  FlowOutcome quiet = admit("quiet", Criticality::kStandard, 10);
  EXPECT_EQ(quiet.kind, Kind::kDispatched);
  EXPECT_EQ(quiet.decision.endpoint, a);
  EXPECT_TRUE(out_.empty());  // noisy's backlog still waits
  // The reserve is used up: another sparse tenant's request waits.
  EXPECT_EQ(admit("other", Criticality::kStandard, 11).kind, Kind::kQueued);
  // Quiet's counter is now ahead of noisy's: its next request waits its turn.
  EXPECT_EQ(admit("quiet", Criticality::kStandard, 12).kind, Kind::kQueued);
  // Two requests finish: room for one below the limit, in the queue's order (noisy's,
  // its counter the lowest now), and the reserve is free again: the next in order,
  // other's, is sparse and takes it. Quiet's second waits its turn.
  router_->pool().on_finished(1, 20);
  router_->pool().on_finished(quiet.id, 20);
  EXPECT_EQ(fc_->dispatch(20, rng_, out_), 2u);
  ASSERT_EQ(out_.size(), 2u);
  EXPECT_EQ(out_[0].tenant, "noisy");
  EXPECT_EQ(out_[1].tenant, "other");
  EXPECT_EQ(fc_->queue().size(), 5u);  // four of noisy's and quiet's
}

TEST_F(FlowControlTest, TheReserveIsOffAtZeroAndNeverForALoneTenant) {
  flow_.sparse_reserve = 0;
  build();
  EndpointId a = add("http://a:1", 1000);
  scrape(a, 0, 9, 0);
  admit("noisy");
  admit("noisy");
  admit("noisy");
  EXPECT_EQ(admit("quiet").kind, Kind::kQueued);

  flow_.sparse_reserve = 1;
  build();
  a = add("http://a:1", 1000);
  scrape(a, 2, 9, 0);
  // One tenant: its first queued request has no one else's backlog to skip.
  EXPECT_EQ(admit("only").kind, Kind::kQueued);
  EXPECT_EQ(fc_->dispatch(0, rng_, out_), 0u);
}

TEST_F(FlowControlTest, TheReserveTakesTheKvHeadroomOnlyAsFarAsTheRequestFits) {
  build();
  // 100 blocks of 16 tokens.
  EndpointId a = add("http://a:1", 100);
  scrape(a, 0, 9, 0, 0.5);
  EXPECT_EQ(admit("noisy").kind, Kind::kDispatched);
  scrape(a, 0, 9, 1, 0.92);  // above kv_threshold (0.9): no capacity
  EXPECT_EQ(admit("noisy", Criticality::kStandard, 1).kind, Kind::kQueued);
  // 160 + 16 tokens = 11 blocks: 0.92 + 0.11 > 1, it would wait inside the engine.
  FlowOutcome big = admit("big", Criticality::kStandard, 1, 160, 16);
  EXPECT_EQ(big.kind, Kind::kQueued);
  EXPECT_TRUE(fc_->cancel(big.id));
  // 64 + 16 tokens = 5 blocks: fits in the headroom.
  EXPECT_EQ(admit("small", Criticality::kStandard, 1, 64, 16).kind, Kind::kDispatched);
}

TEST_F(FlowControlTest, ARequestWithItsFirstTokenNoLongerCountsAsWaiting) {
  build();
  EndpointId a = add("http://a:1", 1000);
  scrape(a, 0, 9, 0);
  // queue_threshold 2: two requests routed since the scrape, neither started yet.
  FlowOutcome first = admit("t");
  EXPECT_EQ(first.kind, Kind::kDispatched);
  EXPECT_EQ(admit("t").kind, Kind::kDispatched);
  EXPECT_EQ(admit("t", Criticality::kStandard, 1).kind, Kind::kQueued);
  EXPECT_EQ(fc_->dispatch(1, rng_, out_), 0u);
  // The first one's first token came back: it runs, so the engine's queue holds at most
  // one of them. Room for the queued request before the next scrape, and no more.
  router_->pool().on_first_token(first.id, 2);
  EXPECT_EQ(fc_->dispatch(2, rng_, out_), 1u);
  EXPECT_EQ(admit("t", Criticality::kStandard, 3).kind, Kind::kQueued);
}

// prefill_threshold: an endpoint with that many prompt tokens routed to it and not yet
// started has no room, whatever its queue length; a first token makes room again.
TEST_F(FlowControlTest, APrefillThresholdHoldsRequestsBehindALongPrefill) {
  for (const uint64_t threshold : {uint64_t{0}, uint64_t{1000}}) {
    SCOPED_TRACE(threshold);
    start_over();
    flow_.prefill_threshold = threshold;
    build();
    const EndpointId a = add("http://a:1");
    scrape(a, 0, 0, 0);
    // queue_threshold 2 would take two requests; a 2,000-token prompt fills the threshold.
    const FlowOutcome doc = admit("docs", Criticality::kStandard, 0, 2000);
    EXPECT_EQ(doc.kind, Kind::kDispatched);
    const FlowOutcome chat = admit("chat", Criticality::kStandard, 1, 64);
    if (threshold == 0) {
      EXPECT_EQ(chat.kind, Kind::kDispatched);
      continue;
    }
    EXPECT_EQ(chat.kind, Kind::kQueued);
    EXPECT_FALSE(fc_->has_capacity(1));
    EXPECT_EQ(fc_->dispatch(1, rng_, out_), 0u);
    // The document's prefill is done: its tokens leave the count, the chat goes.
    router_->pool().on_first_token(doc.id, 2);
    EXPECT_EQ(fc_->dispatch(2, rng_, out_), 1u);
    ASSERT_EQ(out_.size(), 1u);
    EXPECT_EQ(out_[0].id, chat.id);
    EXPECT_EQ(out_[0].decision.endpoint, a);
    // 64 tokens under way: below the threshold, room for the next (queue_threshold 2).
    EXPECT_TRUE(fc_->has_capacity(3));
  }
}

// `a` is full by the queue's measure (two requests routed since its scrape, neither
// started) but not by the router's (its scrape showed room); `b` has room by both but
// more requests in flight. Least-request prefers `a`: late_binding room keeps the
// request off it, late_binding any lets the router have its way.
TEST_F(FlowControlTest, LateBindingRoomOrAnyDecidesWhetherAFullEndpointMayBeChosen) {
  for (LateBinding binding : {LateBinding::kRoom, LateBinding::kAny}) {
    flow_.late_binding = binding;
    build();
    EndpointId a = add("http://a:1");
    EndpointId b = add("http://b:1");
    for (RequestId id : {101, 102, 103}) {
      ASSERT_TRUE(router_->pool().on_routed(id, {.endpoint = b, .prompt_tokens = 16}, 0).ok());
    }
    scrape(b, 1, 3, 0);
    scrape(a, 0, 0, 0);
    for (RequestId id : {104, 105}) {
      ASSERT_TRUE(router_->pool().on_routed(id, {.endpoint = a, .prompt_tokens = 16}, 0).ok());
    }
    FlowOutcome o = admit("t");
    ASSERT_EQ(o.kind, Kind::kDispatched) << to_string(binding);
    EXPECT_EQ(o.decision.endpoint, binding == LateBinding::kRoom ? b : a) << to_string(binding);
  }
}

}  // namespace
}  // namespace kvgate::route
