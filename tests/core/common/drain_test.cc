#include "core/common/drain.h"

#include <gtest/gtest.h>

namespace kvgate {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace drain_test {

TEST(DrainPlan, LongGraceKeepsFixedMargins) {
  const DrainPlan p = drain_plan(30 * kSecond);
  EXPECT_EQ(p.refuse_queued_at, 29 * kSecond);
  EXPECT_EQ(p.answer_unstarted_at, 30 * kSecond - 250 * kMillisecond);
  EXPECT_EQ(p.end, 30 * kSecond);
}

TEST(DrainPlan, ShortGraceScalesTheMargins) {
  // The integration tests' 1.5 s drain.
  const DrainPlan p = drain_plan(1500 * kMillisecond);
  EXPECT_EQ(p.refuse_queued_at, 750 * kMillisecond);
  EXPECT_EQ(p.answer_unstarted_at, 1250 * kMillisecond);
  EXPECT_EQ(p.end, 1500 * kMillisecond);
}

TEST(DrainPlan, OrderedForEveryGrace) {
  for (Nanos g : {Nanos{0}, Nanos{1}, 3 * kMillisecond, 400 * kMillisecond, 999 * kMillisecond,
                  kSecond, 2 * kSecond, 2 * kSecond + 1, 60 * kSecond}) {
    const DrainPlan p = drain_plan(g);
    EXPECT_GE(p.refuse_queued_at, 0) << g;
    EXPECT_LE(p.refuse_queued_at, p.answer_unstarted_at) << g;
    EXPECT_LE(p.answer_unstarted_at, p.end) << g;
    EXPECT_EQ(p.end, g);
  }
}

TEST(DrainPlan, NegativeGraceIsNone) {
  const DrainPlan p = drain_plan(-kSecond);
  EXPECT_EQ(p.refuse_queued_at, 0);
  EXPECT_EQ(p.answer_unstarted_at, 0);
  EXPECT_EQ(p.end, 0);
}

}  // namespace drain_test
}  // namespace kvgate
