// Room sharing's demand reports: their wire form round-trips and bad input is refused; a
// replica reports its queue when it changed (and with the heartbeat), shares the room
// with the peers it heard from, skips its own reports, forgets silent peers, and takes the
// whole room again when the sync is lost.
#include "core/cluster/fleet_room.h"

#include <gtest/gtest.h>

#include <array>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kvgate::cluster {
namespace fleet_room_test {

using route::Criticality;
using route::FlowController;
using route::FlowOutcome;
using route::RouteRequest;

TEST(DemandReport, RoundTripsThroughItsWireForm) {
  DemandReport r{.replica = "gw-1", .pool = "chat", .seq = 300, .queued = {2, 70000, 0}};
  Result<DemandReport> back = decode_demand_report(encode(r));
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(*back, r);
}

TEST(DemandReport, BadInputIsRefused) {
  const std::string wire = encode(DemandReport{.replica = "gw-1", .pool = "p", .seq = 1});
  EXPECT_FALSE(decode_demand_report("").ok());
  for (size_t n = 1; n < wire.size(); ++n) {
    EXPECT_FALSE(decode_demand_report(std::string_view(wire).substr(0, n)).ok()) << n;
  }
  EXPECT_FALSE(decode_demand_report(wire + "x").ok());
  std::string other = wire;
  other[0] = 9;  // unknown version
  EXPECT_FALSE(decode_demand_report(other).ok());
}

class FleetRoomTest : public ::testing::Test {
 protected:
  std::unique_ptr<route::Router> router_;
  std::unique_ptr<FlowController> fc_;
  std::unique_ptr<FleetRoom> room_;
  Rng rng_{5};
  std::deque<RouteRequest> requests_;
  std::vector<FlowOutcome> out_;
  route::RequestId next_ = 1;

  void SetUp() override {
    route::RouterConfig config;
    config.overlap_source = route::OverlapSource::kNone;
    config.policy = {"least-request", {}};
    config.saturation.queue_threshold = 1;
    config.saturation.metrics_max_age = 0;
    route::FlowQueueConfig flow;
    flow.enabled = true;
    flow.max_wait.fill(0);
    flow.sparse_reserve = 0;
    auto r = route::Router::create(config, {});
    ASSERT_TRUE(r.ok()) << r.error();
    router_ = std::move(*r);
    fc_ = std::make_unique<FlowController>(*router_, flow);
    auto id = router_->add_endpoint({.url = "http://e:1"}, 0);
    ASSERT_TRUE(id.ok());
    router_->pool().on_metrics(*id, {.waiting = 5, .running = 8}, 0);  // full: requests queue
    room_ = std::make_unique<FleetRoom>(
        *fc_, "gw-b", "chat",
        FleetRoom::Options{.peer_timeout = 15 * kSecond, .window = 10 * kMillisecond});
  }
  void queue(Criticality band) {
    RouteRequest& rr = requests_.emplace_back();
    rr.id = next_++;
    rr.prompt_tokens = 64;
    rr.expected_output_tokens = 16;
    rr.criticality = band;
    ASSERT_EQ(fc_->admit({.request = &rr, .tenant = "t"}, 0, rng_, out_).kind,
              FlowOutcome::Kind::kQueued);
  }
  static DemandReport peer(std::string name, uint64_t seq, uint32_t standard) {
    DemandReport r{.replica = std::move(name), .pool = "chat", .seq = seq};
    r.queued[static_cast<size_t>(Criticality::kStandard)] = standard;
    return r;
  }
};

TEST_F(FleetRoomTest, ReportsTheQueueWhenItChangedAndWithTheHeartbeat) {
  std::optional<DemandReport> first = room_->take();
  ASSERT_TRUE(first.has_value());  // the first report says what there is
  EXPECT_EQ(first->replica, "gw-b");
  EXPECT_EQ(first->pool, "chat");
  EXPECT_EQ(first->seq, 1u);
  EXPECT_FALSE(room_->take().has_value());  // nothing changed
  queue(Criticality::kCritical);
  queue(Criticality::kStandard);
  queue(Criticality::kStandard);
  std::optional<DemandReport> r = room_->take();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->seq, 2u);
  EXPECT_EQ(r->queued, (std::array<uint32_t, route::kBands>{1, 2, 0}));
  EXPECT_FALSE(room_->take().has_value());
  std::optional<DemandReport> beat = room_->take(/*heartbeat=*/true);
  ASSERT_TRUE(beat.has_value());
  EXPECT_EQ(beat->queued, r->queued);
  EXPECT_EQ(room_->stats().reports_published, 3u);
}

TEST_F(FleetRoomTest, PeersHeardFromShareTheRoomOwnReportsDoNot) {
  EXPECT_EQ(fc_->room_peers(), 0u);
  room_->apply(peer("gw-b", 1, 50), kSecond);  // its own, read back
  EXPECT_EQ(fc_->room_peers(), 0u);
  EXPECT_EQ(room_->peers(), 0u);
  room_->apply(peer("gw-a", 1, 50), kSecond);
  room_->apply(peer("gw-c", 1, 50), kSecond);
  room_->apply(peer("gw-a", 2, 10), 2 * kSecond);  // the newer report replaces the older
  EXPECT_EQ(room_->peers(), 2u);
  EXPECT_EQ(fc_->room_peers(), 2u);
  EXPECT_EQ(room_->stats().reports_applied, 3u);
}

TEST_F(FleetRoomTest, SilentPeersAreForgotten) {
  room_->apply(peer("gw-a", 1, 5), 0);
  room_->apply(peer("gw-c", 1, 5), 10 * kSecond);
  room_->expire(14 * kSecond);
  EXPECT_EQ(room_->peers(), 2u);
  room_->expire(15 * kSecond);  // gw-a silent for peer_timeout
  EXPECT_EQ(room_->peers(), 1u);
  EXPECT_EQ(fc_->room_peers(), 1u);
  EXPECT_EQ(room_->stats().dead_peers, 1u);
}

TEST_F(FleetRoomTest, TheSyncLostTakesTheWholeRoomUntilAPeerIsHeardAgain) {
  room_->apply(peer("gw-a", 1, 5), 0);
  EXPECT_EQ(fc_->room_peers(), 1u);
  room_->fall_back();
  room_->fall_back();  // counted once per loss
  EXPECT_EQ(fc_->room_peers(), 0u);
  EXPECT_EQ(room_->stats().fallbacks, 1u);
  room_->apply(peer("gw-a", 2, 5), kSecond);
  EXPECT_EQ(fc_->room_peers(), 1u);
  room_->fall_back();
  EXPECT_EQ(room_->stats().fallbacks, 2u);
}

}  // namespace fleet_room_test
}  // namespace kvgate::cluster
