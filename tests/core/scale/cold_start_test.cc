#include "core/scale/cold_start.h"

#include <gtest/gtest.h>

namespace kvgate::scale {
namespace {

ReplicaSignal ready(std::string id, Nanos launched, Nanos ready_at, uint32_t in_flight = 0) {
  return {.id = std::move(id),
          .phase = ReplicaPhase::kReady,
          .launched_at = launched,
          .ready_at = ready_at,
          .in_flight = in_flight};
}
ReplicaSignal starting(std::string id, Nanos launched) {
  return {.id = std::move(id), .phase = ReplicaPhase::kStarting, .launched_at = launched};
}

TEST(StartupTracker, MedianOfObservedStartups) {
  StartupTracker t(120 * kSecond);
  EXPECT_EQ(t.expected(), 120 * kSecond);  // prior
  t.observe({ready("a", 0, 200 * kSecond), starting("b", 10 * kSecond)});
  EXPECT_EQ(t.expected(), 200 * kSecond);
  // "a" again is not a new observation; "b" and "c" are.
  t.observe({ready("a", 0, 200 * kSecond), ready("b", 10 * kSecond, 78 * kSecond),
             ready("c", 0, 430 * kSecond)});
  EXPECT_EQ(t.observations(), 3u);
  EXPECT_EQ(t.expected(), 200 * kSecond);  // median of 68, 200, 430
  t.observe({ready("d", 0, 139 * kSecond)});
  EXPECT_EQ(t.expected(), (139 + 200) * kSecond / 2);  // even count: mid-point
}

TEST(Capacity, StartingReplicasArriveAtTheirExpectedReadyTime) {
  const Nanos now = 1000 * kSecond;
  const Nanos startup = 200 * kSecond;
  std::vector<ReplicaSignal> r = {
      ready("a", 0, 200 * kSecond),
      starting("b", now - 50 * kSecond),   // expected at now + 150 s
      starting("c", now),                  // expected at now + 200 s
      starting("d", now - 700 * kSecond),  // 3.5 x the startup time: stuck
      {.id = "e", .phase = ReplicaPhase::kDraining},
  };
  Capacity c = account_capacity(r, now, /*horizon=*/startup, startup, 3.0);
  EXPECT_EQ(c.ready, 1);
  EXPECT_EQ(c.arriving, 2);
  EXPECT_EQ(c.stuck, 1);
  EXPECT_EQ(c.total(), 4);
  EXPECT_EQ(c.at_horizon(), 3);
  // With a shorter horizon, the one launched just now is late.
  c = account_capacity(r, now, 100 * kSecond, startup, 3.0);
  EXPECT_EQ(c.arriving, 0);
  EXPECT_EQ(c.late, 2);
}

TEST(Victims, StuckFirstThenIdleOldThenYoungThenStarting) {
  const Nanos now = 10'000 * kSecond;
  const VictimPolicy p{
      .young_age = 300 * kSecond, .expected_startup = 200 * kSecond, .stuck_factor = 3.0};
  std::vector<ReplicaSignal> r = {
      starting("boot-new", now - 10 * kSecond),
      starting("boot-old", now - 150 * kSecond),
      ready("young-idle", now - 400 * kSecond, now - 100 * kSecond, 0),
      ready("old-busy", 0, 200 * kSecond, 9),
      ready("old-idle", 0, 300 * kSecond, 1),
      starting("stuck", now - 1000 * kSecond),
      {.id = "draining", .phase = ReplicaPhase::kDraining},
  };
  EXPECT_EQ(select_victims(r, 10, now, p),
            (std::vector<std::string>{"stuck", "old-idle", "old-busy", "young-idle", "boot-new",
                                      "boot-old"}));
  // A young replica is not the first to go, even when it is the idlest.
  EXPECT_EQ(select_victims(r, 2, now, p), (std::vector<std::string>{"stuck", "old-idle"}));
  EXPECT_TRUE(select_victims(r, 0, now, p).empty());
}

TEST(Victims, TiesAreBrokenByIdDeterministically) {
  std::vector<ReplicaSignal> r = {ready("b", 0, 0), ready("a", 0, 0), ready("c", 0, 0)};
  EXPECT_EQ(select_victims(r, 2, 1000 * kSecond, {}), (std::vector<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace kvgate::scale
