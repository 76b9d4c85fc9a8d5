// Startup phases are drawn within the seed document's ranges, around its medians.
#include "core/engine/startup.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace kvgate::engine {
namespace {

void expect_within_table(const std::array<PhaseStats, kNumStartupPhases>& stats, StartupMode mode,
                         const StartupTable& table) {
  Rng rng(7);
  constexpr int kDraws = 2001;
  std::vector<std::vector<double>> draws(kNumStartupPhases);
  for (int i = 0; i < kDraws; ++i) {
    std::vector<StartupPhase> phases = sample_startup(table, mode, rng);
    ASSERT_EQ(phases.size(), kNumStartupPhases);
    for (size_t p = 0; p < phases.size(); ++p) {
      EXPECT_EQ(phases[p].name, stats[p].name);
      const double s = to_seconds(phases[p].duration);
      EXPECT_GE(s, stats[p].min_s - 1e-9);
      EXPECT_LE(s, stats[p].max_s + 1e-9);
      draws[p].push_back(s);
    }
  }
  for (size_t p = 0; p < kNumStartupPhases; ++p) {
    std::nth_element(draws[p].begin(), draws[p].begin() + kDraws / 2, draws[p].end());
    const double median = draws[p][kDraws / 2];
    const double spread = stats[p].max_s - stats[p].min_s;
    EXPECT_NEAR(median, stats[p].median_s, 0.05 * spread + 1e-6) << stats[p].name;
  }
}

TEST(StartupTest, ColdAndCachesKeptStayInTheSeedRanges) {
  for (const StartupTable* t : {&startup_table_7b(), &startup_table_32b()}) {
    expect_within_table(t->cold, StartupMode::kCold, *t);
    expect_within_table(t->caches_kept, StartupMode::kCachesKept, *t);
  }
}

TEST(StartupTest, TotalsMatchTheSeedOrderOfMagnitude) {
  // Seed: time to /health 200 s (189-204) for the 7B cold, 68 s (68-75) caches kept.
  Rng rng(1);
  const Nanos cold = total_duration(sample_startup(startup_table_7b(), StartupMode::kCold, rng));
  const Nanos kept =
      total_duration(sample_startup(startup_table_7b(), StartupMode::kCachesKept, rng));
  EXPECT_GT(to_seconds(cold), 181);
  EXPECT_LT(to_seconds(cold), 217);
  EXPECT_GT(to_seconds(kept), 56);
  EXPECT_LT(to_seconds(kept), 84);
}

TEST(StartupTest, NoneIsInstantAndModesParse) {
  Rng rng(1);
  EXPECT_TRUE(sample_startup(startup_table_7b(), StartupMode::kNone, rng).empty());
  EXPECT_EQ(parse_startup_mode("cold"), StartupMode::kCold);
  EXPECT_EQ(parse_startup_mode("caches-kept"), StartupMode::kCachesKept);
  EXPECT_EQ(parse_startup_mode("none"), StartupMode::kNone);
  EXPECT_FALSE(parse_startup_mode("warm").has_value());
  EXPECT_EQ(startup_mode_name(StartupMode::kCachesKept), "caches-kept");
  EXPECT_EQ(startup_table("32b"), &startup_table_32b());
  EXPECT_EQ(startup_table("70b"), nullptr);
}

TEST(StartupTest, SameSeedSameDraws) {
  Rng a(99), b(99);
  auto pa = sample_startup(startup_table_32b(), StartupMode::kCold, a);
  auto pb = sample_startup(startup_table_32b(), StartupMode::kCold, b);
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_EQ(pa[i].duration, pb[i].duration);
}

}  // namespace
}  // namespace kvgate::engine
