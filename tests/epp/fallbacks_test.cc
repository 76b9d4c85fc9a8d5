// The Endpoint Picker's fallback list (gateway::fallback_destinations): which of the
// router's runners-up the data plane may retry with the pick's headers, data-parallel
// ranks included.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "gateway/data/external.h"

namespace kvgate::gateway {
namespace fallbacks_test {

EndpointAddress at(const std::string& host, std::optional<uint32_t> rank = std::nullopt) {
  EndpointAddress e;
  e.host = host;
  e.port = 8000;
  e.dp_rank = rank;
  return e;
}

using List = std::vector<std::string>;

TEST(EppFallbacks, WithoutRanksTheRunnersUpInOrderUpToTheMax) {
  const EndpointAddress pick = at("10.0.0.1");
  const std::vector<EndpointAddress> runners = {at("10.0.0.2"), at("10.0.0.3"), at("10.0.0.4")};
  EXPECT_EQ(fallback_destinations(pick, std::nullopt, runners, 2),
            (List{"10.0.0.2:8000", "10.0.0.3:8000"}));
  EXPECT_EQ(fallback_destinations(pick, std::nullopt, runners, 0), List{});
}

TEST(EppFallbacks, AnotherRankOfThePicksEngineIsNotAFallback) {
  // Rank 0 of 10.0.0.1 picked: rank 1 of the same engine is the same destination, and a
  // retry there would carry rank 0 again.
  const EndpointAddress pick = at("10.0.0.1", 0);
  const std::vector<EndpointAddress> runners = {at("10.0.0.1", 1), at("10.0.0.2", 0)};
  EXPECT_EQ(fallback_destinations(pick, 0, runners, 2), List{"10.0.0.2:8000"});
}

TEST(EppFallbacks, WithARankHeaderOnlyRunnersUpOfThatRank) {
  const EndpointAddress pick = at("10.0.0.1", 1);
  const std::vector<EndpointAddress> runners = {
      at("10.0.0.2", 0),  // the header would name rank 1 there: not it
      at("10.0.0.3"),     // not data-parallel: rank 1 is out of its range
      at("10.0.0.4", 1),  // the same rank elsewhere: right
      at("10.0.0.5", 1)};
  EXPECT_EQ(fallback_destinations(pick, 1, runners, 4), (List{"10.0.0.4:8000", "10.0.0.5:8000"}));
  EXPECT_EQ(fallback_destinations(pick, 1, runners, 1), List{"10.0.0.4:8000"});
}

TEST(EppFallbacks, WithoutARankHeaderRanksElsewhereOnceEach) {
  // The pick names no rank: a data-parallel engine balances the request itself, so its
  // address is listed, once.
  const EndpointAddress pick = at("10.0.0.1");
  const std::vector<EndpointAddress> runners = {at("10.0.0.2", 0), at("10.0.0.2", 1),
                                                at("10.0.0.3")};
  EXPECT_EQ(fallback_destinations(pick, std::nullopt, runners, 4),
            (List{"10.0.0.2:8000", "10.0.0.3:8000"}));
}

TEST(EppFallbacks, TheCarriedRankIsTheDecodeRankWhenThePrefillHasTheSame) {
  // Aggregated: the endpoint's rank, or none.
  EXPECT_EQ(carried_rank(at("10.0.0.1", 2), nullptr), std::optional<uint32_t>(2));
  EXPECT_FALSE(carried_rank(at("10.0.0.1"), nullptr).has_value());
  // Disaggregated: a sidecar copies the request's headers to its prefill hop, so the rank
  // is named only when it is right for both engines.
  const EndpointAddress same = at("10.0.0.9", 2);
  const EndpointAddress other = at("10.0.0.9", 1);
  const EndpointAddress plain = at("10.0.0.9");
  EXPECT_EQ(carried_rank(at("10.0.0.1", 2), &same), std::optional<uint32_t>(2));
  EXPECT_FALSE(carried_rank(at("10.0.0.1", 2), &other).has_value());
  EXPECT_FALSE(carried_rank(at("10.0.0.1", 2), &plain).has_value());
  EXPECT_FALSE(carried_rank(at("10.0.0.1"), &other).has_value());
  EXPECT_FALSE(carried_rank(at("10.0.0.1"), &plain).has_value());
}

}  // namespace fallbacks_test
}  // namespace kvgate::gateway
