// The autoscaler's signals from the router's state (core/route/pool_signals.h), as the
// gateway and the simulator both build them.
#include "core/route/pool_signals.h"

#include <gtest/gtest.h>

#include "core/kv/approx_index.h"
#include "core/kv/precise_index.h"
#include "core/route/router.h"
#include "core/scale/cold_start.h"

namespace kvgate::route {
namespace {

EndpointView endpoint(EndpointId id, uint32_t waiting, uint32_t running, double kv,
                      Nanos scraped_at, Health health = Health::kHealthy) {
  return {.id = id,
          .url = "http://10.0.0." + std::to_string(id) + ":8000",
          .health = health,
          .metrics =
              ScrapedMetrics{
                  .waiting = waiting, .running = running, .kv_usage = kv, .scraped_at = scraped_at},
          .in_flight = running + waiting,
          .added_at = 0};
}

TEST(BuildSignals, SumsQueuesAndAveragesKvOverServingEndpoints) {
  const Nanos now = 100 * kSecond;
  std::vector<EndpointView> v = {
      endpoint(0, 6, 10, 0.5, now - kSecond), endpoint(1, 2, 8, 0.3, now - kSecond),
      endpoint(2, 50, 50, 1.0, now - kSecond, Health::kDraining),  // leaving: not load
      endpoint(3, 40, 40, 0.9, now - 60 * kSecond),                // stopped answering a minute ago
  };
  v.push_back({.id = 4, .url = "http://10.0.0.4:8000"});  // never scraped
  scale::UsageRates usage;
  usage.prompt_tokens_per_s = 1000;
  usage.generation_tokens_per_s = 200;
  usage.mean_prompt_tokens = 500;
  usage.mean_generation_tokens = 100;
  usage.generation_tokens_sd = 30;
  usage.ttft = {.p50 = 0.1, .p90 = 0.2, .p99 = 0.3, .mean = 0.12, .samples = 10};
  scale::PoolSignals s = build_pool_signals(
      v, {.usage = usage, .queued = 3, .arrival_rate = 4.5, .max_age = 5 * kSecond}, now);
  EXPECT_DOUBLE_EQ(s.waiting, 8 + 3) << "the gateway's queue counts as waiting";
  EXPECT_DOUBLE_EQ(s.running, 18);
  EXPECT_DOUBLE_EQ(s.kv_usage, 0.4);
  EXPECT_DOUBLE_EQ(s.prompt_tokens_per_s, 1000);
  EXPECT_DOUBLE_EQ(s.generation_tokens_per_s, 200);
  EXPECT_DOUBLE_EQ(s.mean_prompt_tokens, 500);
  EXPECT_DOUBLE_EQ(s.mean_generation_tokens, 100);
  EXPECT_DOUBLE_EQ(s.generation_tokens_sd, 30);
  ASSERT_TRUE(s.arrival_rate);
  EXPECT_DOUBLE_EQ(*s.arrival_rate, 4.5);
  EXPECT_EQ(s.ttft.samples, 10u);
  EXPECT_DOUBLE_EQ(s.ttft.p90, 0.2);
  EXPECT_TRUE(s.replicas.empty());
}

TEST(BuildSignals, EmptyPoolIsAllZero) {
  scale::PoolSignals s = build_pool_signals({}, {.max_age = kSecond}, 0);
  EXPECT_EQ(s.waiting, 0);
  EXPECT_EQ(s.kv_usage, 0);
  EXPECT_FALSE(s.arrival_rate);
}

TEST(ReplicasFromEndpoints, PhasesFollowHealthAndTeachNoStartupTime) {
  std::vector<EndpointView> v = {
      endpoint(0, 1, 2, 0.1, 0),
      endpoint(1, 0, 0, 0.0, 0, Health::kDraining),
      endpoint(2, 0, 0, 0.0, 0, Health::kUnhealthy),
  };
  v[0].added_at = 5 * kSecond;
  const Nanos offset = 1'000'000 * kSecond;
  auto r = replicas_from_endpoints(v, offset);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].id, "http://10.0.0.0:8000");
  EXPECT_EQ(r[0].phase, scale::ReplicaPhase::kReady);
  EXPECT_EQ(r[0].launched_at, offset + 5 * kSecond);
  EXPECT_EQ(r[0].in_flight, 3u);
  EXPECT_EQ(r[1].phase, scale::ReplicaPhase::kDraining);
  EXPECT_EQ(r[2].phase, scale::ReplicaPhase::kStarting);
  // Nobody launched them: the startup tracker must not learn a 0 s startup from them.
  scale::StartupTracker tracker(120 * kSecond);
  tracker.observe(r);
  EXPECT_EQ(tracker.observations(), 0u);
  EXPECT_EQ(tracker.expected(), 120 * kSecond);
}

TEST(ViewEndpoints, ReadsTheRouterPool) {
  kv::PreciseIndex precise({.block_size = 16});
  kv::ApproxIndex approx({});
  RouterConfig rc;
  rc.policy.name = "round-robin";
  auto router = Router::create(rc, {.precise = &precise, .approx = &approx});
  ASSERT_TRUE(router) << router.error();
  auto a = (*router)->add_endpoint({.url = "http://127.0.0.1:9001"}, 7);
  ASSERT_TRUE(a);
  (*router)->pool().on_metrics(*a, {.waiting = 3, .running = 4, .kv_usage = 0.25}, 9);
  auto v = view_endpoints((*router)->pool());
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].url, "http://127.0.0.1:9001");
  EXPECT_EQ(v[0].added_at, 7);
  ASSERT_TRUE(v[0].metrics);
  EXPECT_EQ(v[0].metrics->waiting, 3u);
  EXPECT_EQ(v[0].metrics->scraped_at, 9);
}

TEST(ScrapeMaxAge, FiveIntervalsAtLeastTwoSeconds) {
  EXPECT_EQ(scrape_max_age(100 * kMillisecond), 2 * kSecond);
  EXPECT_EQ(scrape_max_age(kSecond), 5 * kSecond);
}

}  // namespace
}  // namespace kvgate::route
