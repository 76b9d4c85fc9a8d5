// Latency-target routing in the router: the predictor learns each endpoint through the
// request lifecycle; a request with targets goes to the cheapest endpoint predicted to
// meet them, and when none does, per the configured action; a request without targets
// routes as without the feature. Also the config section and the flow controller's queue.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <vector>

#include "core/route/config_yaml.h"
#include "core/route/flow_control.h"
#include "core/route/router.h"
#include "core/route/session_affinity.h"

namespace kvgate::route {
// Named after the file: the tests compile in unity batches (docs/development.md).
namespace latency_targets_test {

class LatencyTargets : public ::testing::Test {
 protected:
  RouterConfig config_;
  std::unique_ptr<Router> router_;
  Rng rng_{3};
  Nanos now_ = 0;
  RequestId next_id_ = 1;
  EndpointId a_ = 0;  // cheaper by the policy's cost, slow
  EndpointId b_ = 0;  // busier, fast

  void SetUp() override {
    config_.block_size = 16;
    config_.policy = {"kv-cost", {}};
    config_.overlap_source = OverlapSource::kNone;
    config_.filters = {};
    config_.saturation.metrics_max_age = 0;  // never stale in these tests
    config_.latency_targets.enabled = true;
    config_.latency_targets.headroom = 0.1;
    config_.latency_targets.predictor.min_samples = 1;
  }
  void build() {
    auto r = Router::create(config_, {});
    ASSERT_TRUE(r.ok()) << r.error();
    router_ = std::move(*r);
    auto a = router_->add_endpoint({.url = "a"}, 0);
    auto b = router_->add_endpoint({.url = "b"}, 0);
    ASSERT_TRUE(a.ok() && b.ok());
    a_ = *a;
    b_ = *b;
  }
  RouteRequest request(Nanos ttft_target = 0, Nanos tpot_target = 0) {
    RouteRequest r;
    r.id = next_id_++;
    r.prompt_tokens = 1600;
    r.expected_output_tokens = 10;
    r.ttft_target = ttft_target;
    r.tpot_target = tpot_target;
    return r;
  }
  // `n` requests served by `ep` alone, each with this TTFT and 20 ms per output token,
  // each finished before the next (so the load, hence the features, are the same).
  void teach(EndpointId ep, Nanos ttft, int n) {
    const std::vector<EndpointId> others = {ep == a_ ? b_ : a_};
    for (int i = 0; i < n; ++i) {
      RouteRequest r = request();
      r.excluded = others;
      const Decision d = router_->route(r, now_, rng_);
      ASSERT_TRUE(d.accepted());
      ASSERT_EQ(d.endpoint, ep);
      ASSERT_TRUE(d.latency_features.has_value());
      EXPECT_TRUE(router_->on_first_token(r.id, now_ + ttft));
      EXPECT_TRUE(router_->on_finished(r.id, now_ + ttft + 10 * 20 * kMillisecond, 11));
      now_ += kSecond;
    }
  }
  // A slow (800 ms) but cheap, B fast (100 ms) but carrying decode load, so that the
  // policy's own choice is A.
  void build_and_teach() {
    build();
    teach(a_, 800 * kMillisecond, 30);
    teach(b_, 100 * kMillisecond, 30);
    ASSERT_TRUE(
        router_->pool().on_routed(999'999, {.endpoint = b_, .prompt_tokens = 50 * 16}, now_).ok());
  }
  Decision decide(const RouteRequest& r) { return router_->decide(r, now_, rng_); }
};

TEST_F(LatencyTargets, ThePredictorLearnsThroughTheLifecycle) {
  build_and_teach();
  const LatencyPredictor* p = router_->predictor();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->samples(a_), 30u);
  EXPECT_EQ(p->samples(b_), 30u);
  EXPECT_EQ(p->ttft_error().count, 60u);
  EXPECT_EQ(p->tpot_error().count, 60u);
  const Decision d = decide(request());
  ASSERT_TRUE(d.accepted());
  EXPECT_EQ(d.endpoint, a_);
  EXPECT_NEAR(to_seconds(d.predicted_latency.ttft), 0.8, 0.01);
  EXPECT_NEAR(to_seconds(d.predicted_latency.tpot), 0.02, 0.001);
  EXPECT_FALSE(d.predicted_latency.from_pool);
}

TEST_F(LatencyTargets, WithoutTargetsTheDecisionIsThePolicys) {
  build_and_teach();
  for (int i = 0; i < 5; ++i) {
    const Decision d = decide(request());
    ASSERT_TRUE(d.accepted());
    EXPECT_EQ(d.endpoint, a_);
  }
  // The same pool without the feature decides alike.
  config_.latency_targets.enabled = false;
  ASSERT_TRUE(router_->reconfigure(config_).ok());
  EXPECT_EQ(router_->predictor(), nullptr);
  const Decision d = decide(request(50 * kMillisecond));  // targets ignored
  ASSERT_TRUE(d.accepted());
  EXPECT_EQ(d.endpoint, a_);
  EXPECT_FALSE(d.latency_features.has_value());
}

TEST_F(LatencyTargets, TheCheapestThatMeetsTheTargetsWins) {
  build_and_teach();
  // 300 ms: A (800) misses, B (100 x 1.1) meets.
  Decision d = decide(request(300 * kMillisecond));
  ASSERT_TRUE(d.accepted());
  EXPECT_EQ(d.endpoint, b_);
  // 2 s: both meet; A is cheaper.
  d = decide(request(2 * kSecond));
  ASSERT_TRUE(d.accepted());
  EXPECT_EQ(d.endpoint, a_);
  // A TPOT target A meets (20 ms x 1.1 <= 30 ms) keeps the policy's choice.
  d = decide(request(0, 30 * kMillisecond));
  ASSERT_TRUE(d.accepted());
  EXPECT_EQ(d.endpoint, a_);
  // Headroom: 850 ms meets A's 800 only without it.
  d = decide(request(850 * kMillisecond));
  ASSERT_TRUE(d.accepted());
  EXPECT_EQ(d.endpoint, b_);
  config_.latency_targets.headroom = 0;
  ASSERT_TRUE(router_->reconfigure(config_).ok());
  EXPECT_EQ(router_->predictor()->samples(a_), 30u);  // kept: its parameters did not change
  d = decide(request(850 * kMillisecond));
  ASSERT_TRUE(d.accepted());
  EXPECT_EQ(d.endpoint, a_);
}

// The features carry the queue's position: the prefill queued on the endpoint and how
// long since that queue last moved (a first token came back, or it started).
TEST_F(LatencyTargets, TheFeaturesCarryTheQueuesProgress) {
  build();
  const std::vector<EndpointId> not_a = {a_};
  auto on_b = [&](RouteRequest r) {
    r.excluded = not_a;
    const Decision d = router_->route(r, now_, rng_);
    EXPECT_TRUE(d.accepted());
    EXPECT_EQ(d.endpoint, b_);
    EXPECT_TRUE(d.latency_features.has_value());
    return d.latency_features.value_or(LatencyFeatures{});
  };
  now_ = kSecond;
  const RouteRequest first = request();
  LatencyFeatures f = on_b(first);  // nothing queued
  EXPECT_EQ(f.prefill_tokens, 1600.0);
  EXPECT_EQ(f.queued_prefill_tokens, 0.0);
  EXPECT_EQ(f.prefill_elapsed, 0.0);
  now_ += 50 * kMillisecond;
  f = on_b(request());  // the first one's prefill, begun 50 ms ago
  EXPECT_EQ(f.queued_prefill_tokens, 1600.0);
  EXPECT_NEAR(f.prefill_elapsed, 0.05, 1e-9);
  now_ += 30 * kMillisecond;
  EXPECT_TRUE(router_->on_first_token(first.id, now_));  // the queue moved
  now_ += 10 * kMillisecond;
  f = on_b(request());  // the second one's, 10 ms since
  EXPECT_EQ(f.queued_prefill_tokens, 1600.0);
  EXPECT_NEAR(f.prefill_elapsed, 0.01, 1e-9);
  // At the priors (10k tokens/s), 100 of the 1,600 are done: 1,500 ahead.
  EXPECT_NEAR(router_->predictor()->prefill_tokens_ahead(b_, f), 1500, 1e-6);
}

TEST_F(LatencyTargets, NoneMeetsBestEffortGoesToTheNearest) {
  config_.latency_targets.action = SloAction::kBestEffort;
  build_and_teach();
  const Decision d = decide(request(50 * kMillisecond));  // B's 110 misses too
  ASSERT_TRUE(d.accepted());
  EXPECT_EQ(d.endpoint, b_);
}

TEST_F(LatencyTargets, NoneMeetsRejectRefusesSloUnattainable) {
  config_.latency_targets.action = SloAction::kReject;
  build_and_teach();
  Decision d = decide(request(50 * kMillisecond));
  EXPECT_EQ(d.reason, RejectReason::kSloUnattainable);
  EXPECT_EQ(to_string(d.reason), "slo_unattainable");
  EXPECT_EQ(http_status(d.reason), 429);
  // A TPOT target: A predicts 20 ms, B somewhat less (its model never saw a larger batch
  // and extrapolates); neither meets 10 ms.
  d = decide(request(0, 10 * kMillisecond));
  EXPECT_EQ(d.reason, RejectReason::kSloUnattainable);
  // Attainable targets still route.
  EXPECT_TRUE(decide(request(300 * kMillisecond)).accepted());
}

TEST_F(LatencyTargets, NoneMeetsQueueRefusesSaturatedUntilDequeued) {
  config_.latency_targets.action = SloAction::kQueue;
  build_and_teach();
  RouteRequest r = request(50 * kMillisecond);
  EXPECT_EQ(decide(r).reason, RejectReason::kSaturated);
  r.dequeued = true;  // it waited in the flow-control queue: best effort
  const Decision d = decide(r);
  ASSERT_TRUE(d.accepted());
  EXPECT_EQ(d.endpoint, b_);
}

TEST_F(LatencyTargets, TheFlowControllerQueuesWhatNoEndpointMeets) {
  config_.latency_targets.action = SloAction::kQueue;
  build_and_teach();
  FlowQueueConfig q;
  q.enabled = true;
  FlowController flow(*router_, q);
  RouteRequest r = request(50 * kMillisecond);
  std::vector<FlowOutcome> out;
  const FlowOutcome o = flow.admit({.request = &r}, now_, rng_, out);
  // Queued, and dispatched at once since the endpoints have capacity: best effort.
  EXPECT_NE(o.kind, FlowOutcome::Kind::kRefused);
  if (o.kind == FlowOutcome::Kind::kDispatched) {
    EXPECT_EQ(o.decision.endpoint, b_);
  }
}

TEST_F(LatencyTargets, ASessionBoundToAnEndpointThatMissesTheTargetsIsRebound) {
  config_.session_affinity.enabled = true;
  build_and_teach();
  const uint64_t session = session_key("conv-1", "model");
  // Routed and ended at once, with what the endpoint is known to take, so that the load
  // stays as build_and_teach left it.
  auto route_and_end = [&](RouteRequest r) {
    r.session = session;
    const Decision d = router_->route(r, now_, rng_);
    if (d.accepted()) {
      const Nanos ttft = d.endpoint == a_ ? 800 * kMillisecond : 100 * kMillisecond;
      EXPECT_TRUE(router_->on_first_token(r.id, now_ + ttft));
      EXPECT_TRUE(router_->on_finished(r.id, now_ + ttft + 200 * kMillisecond, 11));
      now_ += kSecond;
    }
    return d;
  };
  // The session's first request, without targets: the policy's choice, A; bound there.
  Decision d = route_and_end(request());
  ASSERT_TRUE(d.accepted());
  EXPECT_EQ(d.endpoint, a_);
  ASSERT_NE(router_->sessions(), nullptr);
  EXPECT_EQ(router_->sessions()->find(session, now_), std::optional<EndpointId>(a_));
  // Without targets it stays.
  d = route_and_end(request());
  ASSERT_TRUE(d.accepted());
  EXPECT_EQ(d.endpoint, a_);
  EXPECT_TRUE(d.session_kept());
  // 300 ms: A (800 ms) misses, so the session does not keep it: B meets, and the
  // session is rebound there.
  d = route_and_end(request(300 * kMillisecond));
  ASSERT_TRUE(d.accepted());
  EXPECT_EQ(d.endpoint, b_);
  EXPECT_FALSE(d.session_kept());
  EXPECT_EQ(router_->sessions()->find(session, now_), std::optional<EndpointId>(b_));
  // Its next request, without targets, follows the session to B (within the load bound).
  d = route_and_end(request());
  ASSERT_TRUE(d.accepted());
  EXPECT_EQ(d.endpoint, b_);
  EXPECT_TRUE(d.session_kept());
}

TEST_F(LatencyTargets, PriorsDecideBeforeAnySample) {
  config_.latency_targets.action = SloAction::kReject;
  build();
  // 1600 tokens at the prior 10k tokens/s: 160 ms (x 1.1 headroom).
  EXPECT_EQ(decide(request(150 * kMillisecond)).reason, RejectReason::kSloUnattainable);
  EXPECT_TRUE(decide(request(200 * kMillisecond)).accepted());
}

TEST_F(LatencyTargets, ConfigSection) {
  RouterConfig c;
  Status s = read_router_section(YAML::Load(R"(
latency_targets: {enabled: true, headroom: 0.2, action: reject, forgetting: 0.98,
                  min_samples: 4, prior_prefill_tokens_per_second: 5000, prior_tpot: 50ms}
)"),
                                 "router", c);
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_TRUE(c.latency_targets.enabled);
  EXPECT_DOUBLE_EQ(c.latency_targets.headroom, 0.2);
  EXPECT_EQ(c.latency_targets.action, SloAction::kReject);
  EXPECT_DOUBLE_EQ(c.latency_targets.predictor.forgetting, 0.98);
  EXPECT_EQ(c.latency_targets.predictor.min_samples, 4u);
  EXPECT_DOUBLE_EQ(c.latency_targets.predictor.prior_prefill_tokens_per_second, 5000);
  EXPECT_EQ(c.latency_targets.predictor.prior_tpot, 50 * kMillisecond);
  s = read_router_section(YAML::Load("latency_targets.action: queue\n"), "router", c);
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(c.latency_targets.action, SloAction::kQueue);

  s = read_router_section(YAML::Load("latency_targets: {action: later}\n"), "router", c, {},
                          "fleet.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("fleet.yaml:1:"), std::string::npos) << s.error();
  EXPECT_NE(s.error().find("router.latency_targets.action"), std::string::npos) << s.error();
  s = read_router_section(YAML::Load("latency_targets: {forgetting: 2}\n"), "router", c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("forgetting"), std::string::npos) << s.error();
  s = read_router_section(YAML::Load("latency_targets: {nope: 1}\n"), "router", c);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(parse_slo_action("best_effort"), SloAction::kBestEffort);
  EXPECT_EQ(to_string(SloAction::kQueue), "queue");
  EXPECT_FALSE(parse_slo_action("drop").has_value());
}

}  // namespace latency_targets_test
}  // namespace kvgate::route
