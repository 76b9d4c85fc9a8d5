#include "gateway/data/response_affinity.h"

#include <gtest/gtest.h>

namespace kvgate::gateway {
namespace response_affinity_test {

TEST(ResponseAffinity, RemembersTheLatestIdsAndForgetsTheOldestFirst) {
  ResponseAffinity a(/*capacity=*/2);
  a.remember("resp_1", 3);
  a.remember("", 4);  // an answer without an id: nothing to remember
  EXPECT_EQ(a.size(), 1u);
  EXPECT_EQ(a.find("resp_1"), 3u);
  EXPECT_EQ(a.find("resp_2"), std::nullopt);
  a.remember("resp_2", 5);
  a.remember("resp_1", 6);  // answered again elsewhere: the newer endpoint, same place in line
  EXPECT_EQ(a.find("resp_1"), 6u);
  a.remember("resp_3", 7);  // over capacity: resp_1, the oldest, goes
  EXPECT_EQ(a.size(), 2u);
  EXPECT_EQ(a.find("resp_1"), std::nullopt);
  EXPECT_EQ(a.find("resp_2"), 5u);
  EXPECT_EQ(a.find("resp_3"), 7u);
}

}  // namespace response_affinity_test
}  // namespace kvgate::gateway
