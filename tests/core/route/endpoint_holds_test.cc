#include "core/route/endpoint_holds.h"

#include <gtest/gtest.h>

#include <vector>

namespace kvgate::route {
namespace endpoint_holds_test {

TEST(EndpointHolds, HealthIsThatOfTheFirstHoldInPrecedence) {
  EXPECT_EQ(health_of(0), Health::kHealthy);
  EXPECT_EQ(health_of(static_cast<uint8_t>(Hold::kStandby)), Health::kStandby);
  EXPECT_EQ(health_of(static_cast<uint8_t>(Hold::kBreaker)), Health::kUnhealthy);
  EXPECT_EQ(health_of(static_cast<uint8_t>(Hold::kWarmup)), Health::kUnhealthy);
  EXPECT_EQ(health_of(static_cast<uint8_t>(Hold::kDrain)), Health::kDraining);
  const auto breaker_and_standby = static_cast<uint8_t>(static_cast<uint8_t>(Hold::kBreaker) |
                                                        static_cast<uint8_t>(Hold::kStandby));
  EXPECT_EQ(health_of(breaker_and_standby), Health::kUnhealthy);
  EXPECT_EQ(health_of(0xf), Health::kDraining);
}

TEST(EndpointHolds, SetReturnsTheNewHealthOnlyWhenItChanges) {
  EndpointHolds h;
  EXPECT_EQ(h.health(3), Health::kHealthy);  // never seen: no hold
  EXPECT_EQ(h.set(3, Hold::kWarmup, true), Health::kUnhealthy);
  EXPECT_EQ(h.set(3, Hold::kWarmup, true), std::nullopt);   // already held
  EXPECT_EQ(h.set(3, Hold::kBreaker, true), std::nullopt);  // still unhealthy
  EXPECT_TRUE(h.has(3, Hold::kBreaker));
  EXPECT_EQ(h.set(3, Hold::kWarmup, false), std::nullopt);  // the breaker keeps it out
  EXPECT_EQ(h.set(3, Hold::kBreaker, false), Health::kHealthy);
  EXPECT_EQ(h.set(3, Hold::kStandby, false), std::nullopt);  // releasing nothing
  EXPECT_FALSE(h.has(3, Hold::kWarmup));
  EXPECT_EQ(h.health(0), Health::kHealthy);  // the others untouched
}

// A breaker that half-opens does not end a standby or a warm-up; a warm-up that ends does
// not put a draining endpoint back.
TEST(EndpointHolds, ReleasingOneHoldLeavesTheOthers) {
  EndpointHolds h;
  EXPECT_EQ(h.set(0, Hold::kStandby, true), Health::kStandby);
  EXPECT_EQ(h.set(0, Hold::kBreaker, true), Health::kUnhealthy);
  EXPECT_EQ(h.set(0, Hold::kBreaker, false), Health::kStandby);
  EXPECT_EQ(h.set(0, Hold::kStandby, false), Health::kHealthy);

  EXPECT_EQ(h.set(1, Hold::kWarmup, true), Health::kUnhealthy);
  EXPECT_EQ(h.set(1, Hold::kDrain, true), Health::kDraining);
  EXPECT_EQ(h.set(1, Hold::kWarmup, false), std::nullopt);
  EXPECT_EQ(h.health(1), Health::kDraining);
  EXPECT_EQ(h.set(1, Hold::kDrain, false), Health::kHealthy);  // discovery's grace ended
}

TEST(EndpointHolds, ResetForgetsEveryHold) {
  EndpointHolds h;
  h.set(2, Hold::kDrain, true);
  h.set(2, Hold::kBreaker, true);
  h.reset(2);
  EXPECT_EQ(h.health(2), Health::kHealthy);
  EXPECT_FALSE(h.has(2, Hold::kDrain));
  h.reset(7);  // unknown: nothing to do
  EXPECT_EQ(h.health(7), Health::kHealthy);
}

TEST(EndpointHolds, OnlyEndpointsHeldForNothingElseAreStandbyCandidates) {
  EndpointHolds h;
  h.set(1, Hold::kStandby, true);
  h.set(2, Hold::kWarmup, true);
  h.set(3, Hold::kBreaker, true);
  h.set(4, Hold::kDrain, true);
  EXPECT_TRUE(h.standby_candidate(0));
  EXPECT_TRUE(h.standby_candidate(1));
  EXPECT_FALSE(h.standby_candidate(2));
  EXPECT_FALSE(h.standby_candidate(3));
  EXPECT_FALSE(h.standby_candidate(4));
}

// The youngest candidates go to standby (scale::pick_standby, ties by the caller's order),
// one always keeps routing; a lower count gives them back.
TEST(PlanStandby, HoldsTheYoungestCandidatesAndGivesThemBack) {
  EndpointHolds h;
  const std::vector<EndpointId> ids = {0, 1, 2, 3};
  const std::vector<Nanos> ready_at = {10, 40, 20, 30};
  StandbyPlan p = plan_standby(h, ids, ready_at, 2);
  EXPECT_EQ(p.in_standby, 2u);
  ASSERT_EQ(p.changes.size(), 2u);
  EXPECT_EQ(p.changes[0].id, 1u);
  EXPECT_EQ(p.changes[0].health, Health::kStandby);
  EXPECT_EQ(p.changes[1].id, 3u);
  EXPECT_EQ(p.changes[1].health, Health::kStandby);

  p = plan_standby(h, ids, ready_at, 2);  // the same count: nothing changes
  EXPECT_EQ(p.in_standby, 2u);
  EXPECT_TRUE(p.changes.empty());

  p = plan_standby(h, ids, ready_at, 1);
  EXPECT_EQ(p.in_standby, 1u);
  ASSERT_EQ(p.changes.size(), 1u);
  EXPECT_EQ(p.changes[0].id, 3u);
  EXPECT_EQ(p.changes[0].health, Health::kHealthy);
  EXPECT_TRUE(h.has(1, Hold::kStandby));

  p = plan_standby(h, ids, ready_at, 0);
  EXPECT_EQ(p.in_standby, 0u);
  ASSERT_EQ(p.changes.size(), 1u);
  EXPECT_EQ(p.changes[0].id, 1u);
  EXPECT_EQ(p.changes[0].health, Health::kHealthy);

  p = plan_standby(h, ids, ready_at, 9);  // never all of them
  EXPECT_EQ(p.in_standby, 3u);
  EXPECT_FALSE(h.has(0, Hold::kStandby));
}

TEST(PlanStandby, SkipsEndpointsHeldForSomethingElse) {
  EndpointHolds h;
  h.set(1, Hold::kWarmup, true);  // the youngest, but warming up
  const std::vector<EndpointId> ids = {0, 1, 2};
  const std::vector<Nanos> ready_at = {10, 50, 20};
  StandbyPlan p = plan_standby(h, ids, ready_at, 1);
  EXPECT_EQ(p.in_standby, 1u);
  ASSERT_EQ(p.changes.size(), 1u);
  EXPECT_EQ(p.changes[0].id, 2u);
  EXPECT_FALSE(h.has(1, Hold::kStandby));
  EXPECT_EQ(h.health(1), Health::kUnhealthy);

  // A standby endpoint whose breaker opens is no candidate: the next plan takes another
  // and drops its standby, so it returns to routing when its breaker closes.
  h.set(2, Hold::kBreaker, true);
  EXPECT_EQ(h.health(2), Health::kUnhealthy);
  p = plan_standby(h, ids, ready_at, 1);
  EXPECT_EQ(p.in_standby, 0u);  // endpoint 0 is the only candidate, and keeps routing
  EXPECT_TRUE(p.changes.empty());
  EXPECT_FALSE(h.has(2, Hold::kStandby));
  EXPECT_EQ(h.set(2, Hold::kBreaker, false), Health::kHealthy);
}

TEST(DrainOver, WhenNothingIsInFlightOrAtTheDeadline) {
  EXPECT_TRUE(drain_over(0, 5, 10));
  EXPECT_FALSE(drain_over(2, 5, 10));
  EXPECT_TRUE(drain_over(2, 10, 10));
  EXPECT_FALSE(drain_over(1, INT64_MAX - 1, kNoDrainDeadline));
}

}  // namespace endpoint_holds_test
}  // namespace kvgate::route
