// Room sharing between gateway replicas' queues: the shares (max-min fair, by demand
// with a floor of one slot), the whole slots cut alike in every replica, and a
// FlowController that releases only its share of the pool's room when it has peers and,
// without peers, exactly what it released before.
#include "core/route/room_share.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <deque>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "core/route/flow_control.h"

namespace kvgate::route {
namespace room_share_test {

std::vector<double> shares(RoomShare mode, uint32_t room, std::vector<uint32_t> demand) {
  std::vector<double> out(demand.size());
  room_shares(mode, room, demand, out);
  return out;
}

double sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

TEST(RoomShare, NamesRoundTrip) {
  for (RoomShare r : {RoomShare::kNone, RoomShare::kSplit, RoomShare::kDemand}) {
    EXPECT_EQ(parse_room_share(to_string(r)), r);
  }
  EXPECT_FALSE(parse_room_share("equal").has_value());
}

TEST(RoomShare, RoomForEveryDemandGivesEachItsDemandAndAnEqualPartOfTheRest) {
  for (RoomShare mode : {RoomShare::kSplit, RoomShare::kDemand}) {
    const std::vector<double> x = shares(mode, 10, {1, 3, 0, 2});
    EXPECT_DOUBLE_EQ(x[0], 2);
    EXPECT_DOUBLE_EQ(x[1], 4);
    EXPECT_DOUBLE_EQ(x[2], 1);
    EXPECT_DOUBLE_EQ(x[3], 3);
  }
}

TEST(RoomShare, SplitIsMaxMinFairAmongTheReplicasWithDemand) {
  // Water-filling: the small demand is met, the rest share equally; no demand, nothing.
  const std::vector<double> x = shares(RoomShare::kSplit, 8, {1, 10, 10, 10, 0});
  EXPECT_DOUBLE_EQ(x[0], 1);
  EXPECT_NEAR(x[1], 7.0 / 3, 1e-12);
  EXPECT_NEAR(x[2], 7.0 / 3, 1e-12);
  EXPECT_NEAR(x[3], 7.0 / 3, 1e-12);
  EXPECT_DOUBLE_EQ(x[4], 0);
  EXPECT_NEAR(sum(x), 8, 1e-9);
  // Two levels settle in turn.
  const std::vector<double> y = shares(RoomShare::kSplit, 10, {1, 2, 20, 20});
  EXPECT_DOUBLE_EQ(y[0], 1);
  EXPECT_DOUBLE_EQ(y[1], 2);
  EXPECT_DOUBLE_EQ(y[2], 3.5);
  EXPECT_DOUBLE_EQ(y[3], 3.5);
}

TEST(RoomShare, DemandGivesOneSlotEachThenInProportion) {
  const std::vector<double> x = shares(RoomShare::kDemand, 8, {1, 10, 10, 0});
  EXPECT_DOUBLE_EQ(x[0], 1);  // the floor of one slot
  EXPECT_DOUBLE_EQ(x[1], 3.5);
  EXPECT_DOUBLE_EQ(x[2], 3.5);
  EXPECT_DOUBLE_EQ(x[3], 0);
  EXPECT_NEAR(sum(x), 8, 1e-9);
  // Less room than replicas with demand: equal parts (each holds the turn as often).
  const std::vector<double> y = shares(RoomShare::kDemand, 2, {5, 50, 5, 5});
  for (double v : y) EXPECT_DOUBLE_EQ(v, 0.5);
}

TEST(RoomShare, WholeSlotsAddUpToTheRoomAndAreFloorOrCeilOfEachShare) {
  const std::vector<double> x = shares(RoomShare::kSplit, 6, {9, 9, 9, 1});  // 5/3 and 1
  for (int k = 0; k < 100; ++k) {
    const double offset = k / 100.0;
    uint32_t total = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const uint32_t a = room_allotment(x, i, offset);
      EXPECT_GE(a, static_cast<uint32_t>(std::floor(x[i] + 1e-9))) << i << " " << offset;
      EXPECT_LE(a, static_cast<uint32_t>(std::ceil(x[i] - 1e-9))) << i << " " << offset;
      total += a;
    }
    EXPECT_EQ(total, 6u) << offset;
  }
  EXPECT_EQ(room_allotment(x, 9, 0.5), 0u);  // no such replica
}

TEST(RoomShare, OneSlotGoesToOneReplicaATurnEachOverTheWindows) {
  const std::vector<double> x = shares(RoomShare::kSplit, 1, {50, 50, 50, 50});
  std::array<int, 4> turns{};
  const Nanos window = 10 * kMillisecond;
  for (int w = 0; w < 4000; ++w) {
    const double offset = room_offset(w * window + window / 2, window);
    ASSERT_GE(offset, 0);
    ASSERT_LT(offset, 1);
    int holders = 0;
    for (size_t i = 0; i < 4; ++i) {
      const uint32_t a = room_allotment(x, i, offset);
      holders += static_cast<int>(a);
      turns[i] += static_cast<int>(a);
    }
    EXPECT_EQ(holders, 1) << w;
  }
  for (int t : turns) {
    EXPECT_GT(t, 850);
    EXPECT_LT(t, 1150);
  }
  // The same window, the same offset, whenever in it.
  EXPECT_EQ(room_offset(5 * window + 1, window), room_offset(6 * window - 1, window));
}

// A controller over a pool of four endpoints that each take one request (queue_threshold
// 1, scraped idle), for the share in a fleet.
class RoomShareController : public ::testing::Test {
 protected:
  RouterConfig config_;
  FlowQueueConfig flow_;
  std::unique_ptr<Router> router_;
  std::unique_ptr<FlowController> fc_;
  Rng rng_{11};
  std::deque<RouteRequest> requests_;
  std::vector<FlowOutcome> out_;
  RequestId next_ = 1;

  void build(RoomShare share = RoomShare::kSplit) {
    config_.overlap_source = OverlapSource::kNone;
    config_.policy = {"least-request", {}};
    config_.saturation.queue_threshold = 1;
    config_.saturation.metrics_max_age = 0;
    flow_.enabled = true;
    flow_.max_wait.fill(0);
    flow_.sparse_reserve = 0;
    flow_.room_share = share;
    auto r = Router::create(config_, {});
    ASSERT_TRUE(r.ok()) << r.error();
    router_ = std::move(*r);
    fc_ = std::make_unique<FlowController>(*router_, flow_);
    for (int i = 0; i < 4; ++i) {
      auto id = router_->add_endpoint({.url = "http://e" + std::to_string(i) + ":1"}, 0);
      ASSERT_TRUE(id.ok());
      router_->pool().on_metrics(*id, {.waiting = 5, .running = 8}, 0);  // full
    }
  }
  FlowOutcome admit(Nanos now, Criticality c = Criticality::kStandard) {
    RouteRequest& rr = requests_.emplace_back();
    rr.id = next_++;
    rr.prompt_tokens = 64;
    rr.expected_output_tokens = 16;
    rr.criticality = c;
    return fc_->admit({.request = &rr, .tenant = "t"}, now, rng_, out_);
  }
  // Every endpoint scraped with an empty queue: one slot each.
  void free_all(Nanos now) {
    for (EndpointId id : router_->pool().ids()) {
      router_->pool().on_metrics(id, {.waiting = 0, .running = 8}, now);
    }
  }
  static FlowController::RoomFleet fleet(std::vector<uint32_t> peer_standard, Nanos window,
                                         uint32_t peer_critical = 0) {
    FlowController::RoomFleet f;
    f.self = "gw-b";
    f.window = window;
    const char* names[] = {"gw-a", "gw-c", "gw-d", "gw-e"};
    for (size_t i = 0; i < peer_standard.size() && i < 4; ++i) {
      FlowController::RoomPeer p;
      p.replica = names[i];
      p.queued[static_cast<size_t>(Criticality::kStandard)] = peer_standard[i];
      p.queued[static_cast<size_t>(Criticality::kCritical)] = peer_critical;
      f.peers.push_back(p);
    }
    return f;
  }
  size_t dispatched() const {
    size_t n = 0;
    for (const FlowOutcome& o : out_) n += o.kind == FlowOutcome::Kind::kDispatched ? 1 : 0;
    return n;
  }
};

TEST_F(RoomShareController, WithoutPeersItTakesTheWholeRoom) {
  build();
  for (int i = 0; i < 10; ++i) ASSERT_EQ(admit(0).kind, FlowOutcome::Kind::kQueued);
  fc_->set_room_fleet(fleet({}, 10 * kMillisecond));  // no peer
  EXPECT_EQ(fc_->room_peers(), 0u);
  free_all(kSecond);
  fc_->dispatch(kSecond, rng_, out_);
  EXPECT_EQ(dispatched(), 4u);
  EXPECT_EQ(fc_->room_holds(), 0u);
}

TEST_F(RoomShareController, NoneTakesTheWholeRoomWhateverThePeers) {
  build(RoomShare::kNone);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(admit(0).kind, FlowOutcome::Kind::kQueued);
  fc_->set_room_fleet(fleet({10, 10, 10}, 10 * kMillisecond));
  EXPECT_EQ(fc_->room_peers(), 0u);
  free_all(kSecond);
  fc_->dispatch(kSecond, rng_, out_);
  EXPECT_EQ(dispatched(), 4u);
}

TEST_F(RoomShareController, FourReplicasWithDemandTakeOneSlotEachOfFour) {
  build();
  for (int i = 0; i < 10; ++i) ASSERT_EQ(admit(0).kind, FlowOutcome::Kind::kQueued);
  const Nanos window = 10 * kMillisecond;
  fc_->set_room_fleet(fleet({10, 10, 10}, window));
  EXPECT_EQ(fc_->room_peers(), 3u);
  free_all(kSecond);
  // Four slots, four replicas with demand: one each (whole shares, whatever the offset).
  fc_->dispatch(kSecond, rng_, out_);
  EXPECT_EQ(dispatched(), 1u);
  EXPECT_GT(fc_->room_holds(), 0u);
  // Within the window nothing more, however often it is asked.
  out_.clear();
  fc_->dispatch(kSecond + window / 2, rng_, out_);
  EXPECT_EQ(dispatched(), 0u);
  // After it, the three slots left (in this view) are shared again: at most one more.
  out_.clear();
  fc_->dispatch(kSecond + window, rng_, out_);
  EXPECT_LE(dispatched(), 1u);
}

TEST_F(RoomShareController, AReplicaAloneWithDemandTakesTheRoom) {
  build();
  for (int i = 0; i < 10; ++i) ASSERT_EQ(admit(0).kind, FlowOutcome::Kind::kQueued);
  fc_->set_room_fleet(fleet({0, 0, 0}, 10 * kMillisecond));  // peers idle
  free_all(kSecond);
  fc_->dispatch(kSecond, rng_, out_);
  EXPECT_EQ(dispatched(), 4u);
}

TEST_F(RoomShareController, AnArrivalAtAnEmptyQueueWaitsWhenItsShareIsUsed) {
  build();
  free_all(0);
  const Nanos window = 10 * kMillisecond;
  // Three peers with large demand: four slots, one of them this replica's.
  fc_->set_room_fleet(fleet({10, 10, 10}, window));
  EXPECT_EQ(admit(kMillisecond).kind, FlowOutcome::Kind::kDispatched);
  EXPECT_EQ(admit(2 * kMillisecond).kind, FlowOutcome::Kind::kQueued);
  EXPECT_TRUE(fc_->has_capacity(2 * kMillisecond));  // room was there; the share was not
}

TEST_F(RoomShareController, StrictBandsShareTheRoomForTheFleetsHighestBand) {
  build();
  for (int i = 0; i < 10; ++i) ASSERT_EQ(admit(0).kind, FlowOutcome::Kind::kQueued);
  // A peer holds more critical requests than the room: this replica's standard ones wait.
  fc_->set_room_fleet(fleet({10}, 10 * kMillisecond, /*peer_critical=*/10));
  free_all(kSecond);
  fc_->dispatch(kSecond, rng_, out_);
  EXPECT_EQ(dispatched(), 0u);
  EXPECT_EQ(fc_->queue().size(), 10u);
}

TEST_F(RoomShareController, DemandModeFollowsTheQueues) {
  build(RoomShare::kDemand);
  for (int i = 0; i < 9; ++i) ASSERT_EQ(admit(0).kind, FlowOutcome::Kind::kQueued);
  // 4 slots; demands 9 here, 1 and 2 at the peers: one each, then the one left in
  // proportion to what each wants beyond it (8 here, 0 and 1 there), so this replica's
  // share is 1 + 8/9: one or two slots, never three.
  fc_->set_room_fleet(fleet({1, 2}, 10 * kMillisecond));
  free_all(kSecond);
  fc_->dispatch(kSecond, rng_, out_);
  EXPECT_GE(dispatched(), 1u);
  EXPECT_LE(dispatched(), 2u);
}

}  // namespace room_share_test
}  // namespace kvgate::route
