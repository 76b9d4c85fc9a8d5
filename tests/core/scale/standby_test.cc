#include "core/scale/standby.h"

#include <gtest/gtest.h>

namespace kvgate::scale {
namespace {

TEST(PickStandby, TheYoungestReadyReplicasAreStandby) {
  const std::vector<Nanos> ready_at = {10, 40, 20, 30};
  EXPECT_EQ(pick_standby(ready_at, 2), (std::vector<bool>{false, true, false, true}));
  EXPECT_EQ(pick_standby(ready_at, 1), (std::vector<bool>{false, true, false, false}));
}

TEST(PickStandby, OneReplicaAlwaysKeepsRouting) {
  EXPECT_EQ(pick_standby(std::vector<Nanos>{5, 6, 7}, 9), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(pick_standby(std::vector<Nanos>{5}, 1), (std::vector<bool>{false}));
  EXPECT_TRUE(pick_standby(std::vector<Nanos>{}, 3).empty());
}

TEST(PickStandby, NoneWithoutACountAndTiesGoByIndex) {
  EXPECT_EQ(pick_standby(std::vector<Nanos>{1, 2}, 0), (std::vector<bool>{false, false}));
  EXPECT_EQ(pick_standby(std::vector<Nanos>{1, 2}, -1), (std::vector<bool>{false, false}));
  EXPECT_EQ(pick_standby(std::vector<Nanos>{7, 7, 7}, 1), (std::vector<bool>{false, false, true}));
}

}  // namespace
}  // namespace kvgate::scale
