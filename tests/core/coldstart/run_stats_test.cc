#include "core/coldstart/run_stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace kvgate::coldstart {
namespace {

TEST(RunStatsTest, MedianAndRange) {
  std::vector<double> odd{204, 189, 200};
  auto s = summarize(odd);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->count, 3u);
  EXPECT_DOUBLE_EQ(s->median, 200);
  EXPECT_DOUBLE_EQ(s->min, 189);
  EXPECT_DOUBLE_EQ(s->max, 204);
  std::vector<double> even{4, 1, 3, 10};
  EXPECT_DOUBLE_EQ(summarize(even)->median, 3.5);
  std::vector<double> one{7};
  EXPECT_DOUBLE_EQ(summarize(one)->median, 7);
  EXPECT_FALSE(summarize(std::vector<double>{}));
}

TEST(RunStatsTest, TwentyPercentWarning) {
  // The seed's 7B cold total: 200 s (189-204) differs by 7.5%: no warning.
  Summary steady{4, 200, 189, 204};
  EXPECT_NEAR(relative_spread(steady), 0.075, 1e-12);
  EXPECT_FALSE(spread_exceeds(steady, 0.2));
  // The 32B with caches: 139 s (97-343): far more than 20%.
  Summary wide{4, 139, 97, 343};
  EXPECT_TRUE(spread_exceeds(wide, 0.2));
  // Exactly 20% is not "more than" 20%.
  Summary edge{2, 10, 9, 11};
  EXPECT_FALSE(spread_exceeds(edge, 0.2));
  EXPECT_TRUE(spread_exceeds(Summary{2, 10, 9, 11.01}, 0.2));
  EXPECT_EQ(relative_spread(Summary{1, 5, 5, 5}), 0);
  EXPECT_TRUE(std::isinf(relative_spread(Summary{2, 0, -1, 1})));
}

}  // namespace
}  // namespace kvgate::coldstart
