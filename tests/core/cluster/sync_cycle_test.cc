// The cycle mode's timing (cluster::SyncCycle): a cycle every tick while something
// moves, a wait that doubles up to idle_max while nothing does, and the first event
// (own or read) snapping it back; a full batch brings the next cycle forward, never
// nearer than min_gap to the last start.
#include "core/cluster/sync_cycle.h"

#include <gtest/gtest.h>

namespace kvgate::cluster {
namespace sync_cycle_test {

constexpr Nanos kMs = kMillisecond;

SyncCycle defaults() {
  return SyncCycle({.tick = 25 * kMs, .min_gap = 5 * kMs, .idle_max = 100 * kMs});
}

TEST(SyncCycle, ATickApartWhileSomethingMoves) {
  SyncCycle c = defaults();
  c.started(0);
  EXPECT_TRUE(c.in_flight());
  EXPECT_EQ(c.done(1 * kMs, /*moved=*/true), 25 * kMs);
  EXPECT_FALSE(c.in_flight());
  c.started(25 * kMs);
  EXPECT_EQ(c.done(27 * kMs, true), 50 * kMs);
  // A slow reply: the next cycle runs at once, not in the past.
  c.started(50 * kMs);
  EXPECT_EQ(c.done(90 * kMs, true), 90 * kMs);
  EXPECT_EQ(c.wait(), 25 * kMs);
  EXPECT_EQ(c.snaps(), 0u);
}

TEST(SyncCycle, IdleWaitDoublesUpToItsBoundAndAnEventSnapsItBack) {
  SyncCycle c = defaults();
  Nanos start = 0;
  const Nanos expected[] = {50 * kMs, 100 * kMs, 100 * kMs, 100 * kMs};
  for (Nanos want : expected) {
    c.started(start);
    const Nanos next = c.done(start + kMs, /*moved=*/false);
    EXPECT_EQ(next - start, want);
    EXPECT_EQ(c.wait(), want);
    start = next;
  }
  // A peer's event read by a cycle: the next one a tick later.
  c.started(start);
  EXPECT_EQ(c.done(start + kMs, /*moved=*/true), start + 25 * kMs);
  EXPECT_EQ(c.snaps(), 1u);

  // Idle again; then an own event between cycles: the next cycle a tick after the last
  // start (the one armed for 100 ms after it is replaced), or at once when that passed.
  start += 25 * kMs;
  for (int i = 0; i < 3; ++i) {
    c.started(start);
    start = c.done(start + kMs, false);
  }
  ASSERT_EQ(c.wait(), 100 * kMs);
  const Nanos last_start = start - 100 * kMs;
  std::optional<Nanos> at = c.woken(last_start + 10 * kMs, /*full=*/false);
  ASSERT_TRUE(at.has_value());
  EXPECT_EQ(*at, last_start + 25 * kMs);
  EXPECT_EQ(c.wait(), 25 * kMs);
  EXPECT_EQ(c.snaps(), 2u);
  at = c.woken(last_start + 60 * kMs, false);
  ASSERT_TRUE(at.has_value());
  EXPECT_EQ(*at, last_start + 60 * kMs);
  EXPECT_EQ(c.snaps(), 2u);  // already snapped back
}

TEST(SyncCycle, AFullBatchComesNoNearerThanMinGap) {
  SyncCycle c = defaults();
  c.started(100 * kMs);
  EXPECT_EQ(c.done(101 * kMs, true), 125 * kMs);
  std::optional<Nanos> at = c.woken(102 * kMs, /*full=*/true);
  ASSERT_TRUE(at.has_value());
  EXPECT_EQ(*at, 105 * kMs);
  at = c.woken(110 * kMs, true);
  ASSERT_TRUE(at.has_value());
  EXPECT_EQ(*at, 110 * kMs);
}

TEST(SyncCycle, AnOwnEventDuringACycleShapesTheNextOne) {
  SyncCycle c = defaults();
  // Lengthen the wait first.
  c.started(0);
  Nanos start = c.done(kMs, false);
  c.started(start);
  start = c.done(start + kMs, false);
  ASSERT_EQ(c.wait(), 100 * kMs);
  c.started(start);
  // The event came while the cycle was in flight: nothing to arm now, and the cycle that
  // moved nothing does not lengthen the wait.
  EXPECT_FALSE(c.woken(start + kMs, /*full=*/false).has_value());
  EXPECT_EQ(c.done(start + 2 * kMs, /*moved=*/false), start + 25 * kMs);
  EXPECT_EQ(c.wait(), 25 * kMs);
  // A full batch during a cycle: the next at min_gap after its start.
  c.started(start + 25 * kMs);
  EXPECT_FALSE(c.woken(start + 26 * kMs, /*full=*/true).has_value());
  EXPECT_EQ(c.done(start + 27 * kMs, true), start + 30 * kMs);
  // Consumed: the cycle after that is a tick later again.
  c.started(start + 30 * kMs);
  EXPECT_EQ(c.done(start + 31 * kMs, true), start + 55 * kMs);
}

TEST(SyncCycle, AFullReadRunsTheNextCycleAtOnce) {
  SyncCycle c = defaults();
  c.started(0);
  EXPECT_EQ(c.done(3 * kMs, true, /*more=*/true), 3 * kMs);
}

TEST(SyncCycle, IdleMaxAtTheTickNeverLengthens) {
  SyncCycle c({.tick = 5 * kMs, .min_gap = 5 * kMs, .idle_max = 5 * kMs});
  Nanos start = 0;
  for (int i = 0; i < 5; ++i) {
    c.started(start);
    const Nanos next = c.done(start + kMs, false);
    EXPECT_EQ(next - start, 5 * kMs);
    start = next;
  }
  EXPECT_EQ(c.snaps(), 0u);
  // An idle_max below the tick is taken as the tick.
  SyncCycle below({.tick = 25 * kMs, .min_gap = 5 * kMs, .idle_max = kMs});
  below.started(0);
  EXPECT_EQ(below.done(kMs, false), 25 * kMs);
}

}  // namespace sync_cycle_test
}  // namespace kvgate::cluster
