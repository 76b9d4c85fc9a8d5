#include "core/route/load.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kvgate::route {
namespace {

Endpoint make_endpoint() {
  Endpoint e;
  e.spec.kv_capacity_blocks = 100;
  return e;
}

TEST(EffectiveLoad, SaturationIsTheWorseOfQueueAndKv) {
  SaturationConfig cfg;  // 5 waiting, 0.8 KV
  Endpoint e = make_endpoint();
  e.metrics = ScrapedMetrics{.waiting = 2, .running = 7, .kv_usage = 0.6};
  EffectiveLoad l = effective_load(e, 0, cfg);
  EXPECT_DOUBLE_EQ(l.saturation, 0.75);  // max(2/5, 0.6/0.8)
  EXPECT_FALSE(l.saturated());
  e.metrics->waiting = 5;
  EXPECT_TRUE(effective_load(e, 0, cfg).saturated());
  e.metrics->waiting = 0;
  e.metrics->kv_usage = 0.8;
  EXPECT_TRUE(effective_load(e, 0, cfg).saturated());
  cfg.kv_threshold = 0.9;
  EXPECT_FALSE(effective_load(e, 0, cfg).saturated());
}

TEST(EffectiveLoad, StaleMetricsCountAsSaturated) {
  SaturationConfig cfg;
  cfg.metrics_max_age = 2 * kSecond;
  Endpoint e = make_endpoint();
  e.metrics = ScrapedMetrics{.scraped_at = 10 * kSecond};
  EXPECT_FALSE(effective_load(e, 12 * kSecond, cfg).stale);
  EffectiveLoad l = effective_load(e, 12 * kSecond + 1, cfg);
  EXPECT_TRUE(l.stale);
  EXPECT_TRUE(l.saturated());
  EXPECT_TRUE(std::isinf(l.saturation));
  cfg.metrics_max_age = 0;  // never stale
  EXPECT_FALSE(effective_load(e, 1000 * kSecond, cfg).stale);
}

TEST(EffectiveLoad, NeverScrapedGetsGraceFromWhenAdded) {
  SaturationConfig cfg;
  cfg.metrics_max_age = 2 * kSecond;
  Endpoint e = make_endpoint();
  e.added_at = 5 * kSecond;
  EXPECT_FALSE(effective_load(e, 7 * kSecond, cfg).stale);
  EXPECT_TRUE(effective_load(e, 8 * kSecond, cfg).stale);
}

TEST(EffectiveLoad, RouterLoadFillsTheGapBetweenScrapes) {
  SaturationConfig cfg;
  Endpoint e = make_endpoint();
  // At the scrape: 3 in flight, 20 blocks; all already in the metrics.
  e.metrics = ScrapedMetrics{.waiting = 1, .running = 2, .kv_usage = 0.2};
  e.in_flight_at_scrape = 3;
  e.decode_blocks_at_scrape = 20;
  // Since: 4 more requests, 30 more blocks.
  e.load.in_flight = 7;
  e.load.active_decode_blocks = 50;
  EffectiveLoad l = effective_load(e, 0, cfg);
  EXPECT_DOUBLE_EQ(l.waiting, 5);  // a queue existed: the new ones queue too
  EXPECT_DOUBLE_EQ(l.running, 2);
  EXPECT_DOUBLE_EQ(l.kv_usage, 0.5);  // 0.2 + 30/100
  EXPECT_TRUE(l.saturated());         // 5 waiting
  // No queue at the scrape: the new requests are assumed running.
  e.metrics->waiting = 0;
  l = effective_load(e, 0, cfg);
  EXPECT_DOUBLE_EQ(l.waiting, 0);
  EXPECT_DOUBLE_EQ(l.running, 6);
  // Requests finished since the scrape do not make the load negative.
  e.load.in_flight = 1;
  e.load.active_decode_blocks = 5;
  l = effective_load(e, 0, cfg);
  EXPECT_DOUBLE_EQ(l.running, 2);
  EXPECT_DOUBLE_EQ(l.kv_usage, 0.2);
}

}  // namespace
}  // namespace kvgate::route
