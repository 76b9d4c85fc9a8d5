#include "core/metrics/step_series.h"

#include <gtest/gtest.h>

namespace kvgate::metrics {
namespace step_series_test {

TEST(StepSeries, MeansPerStepOldestFirstWithGaps) {
  StepSeries<2> s(5 * kSecond, 4);
  s.add(1 * kSecond, 0, 0.3, 3);   // step 0: 0.1 a request
  s.add(4 * kSecond, 0, 0.1, 1);   // step 0 again: 0.4 over 4
  s.add(6 * kSecond, 1, 2.0, 1);   // step 1, the other channel only
  s.add(16 * kSecond, 0, 0.5, 1);  // step 3 (step 2 left empty)
  const auto m = s.means(17 * kSecond, 0);
  ASSERT_EQ(m.size(), 4u);
  ASSERT_TRUE(m[0].has_value());
  EXPECT_DOUBLE_EQ(*m[0], 0.1);
  EXPECT_FALSE(m[1].has_value());  // nothing in channel 0
  EXPECT_FALSE(m[2].has_value());  // nothing at all
  ASSERT_TRUE(m[3].has_value());
  EXPECT_DOUBLE_EQ(*m[3], 0.5);
  const auto other = s.means(17 * kSecond, 1);
  ASSERT_TRUE(other[1].has_value());
  EXPECT_DOUBLE_EQ(*other[1], 2.0);
}

TEST(StepSeries, OldStepsFallOutAndSlotsAreReused) {
  StepSeries<1> s(kSecond, 3);
  for (int i = 0; i < 10; ++i) s.set(i * kSecond + kSecond / 2, 0, i);
  auto m = s.means(9 * kSecond, 0);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0], 7.0);
  EXPECT_EQ(m[1], 8.0);
  EXPECT_EQ(m[2], 9.0);
  // Later, with no writes: the steps are too old to show, although their slots hold them.
  m = s.means(20 * kSecond, 0);
  for (const auto& v : m) EXPECT_FALSE(v.has_value());
  // Before the series began (step indexes below 0): empty.
  StepSeries<1> young(kSecond, 5);
  young.set(kSecond, 0, 4);
  m = young.means(kSecond, 0);
  EXPECT_FALSE(m[0].has_value());
  EXPECT_EQ(m[4], 4.0);
}

TEST(StepSeries, SetReplacesWhatTheStepHeld) {
  StepSeries<1> s(10 * kSecond, 2);
  s.add(kSecond, 0, 6, 2);
  s.set(2 * kSecond, 0, 5);
  s.set(3 * kSecond, 0, 7);  // the last reading of the step wins
  EXPECT_EQ(s.means(3 * kSecond, 0)[1], 7.0);
}

}  // namespace step_series_test
}  // namespace kvgate::metrics
