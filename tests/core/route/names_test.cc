// The small vocabularies config and logs use: roles, criticalities, priorities,
// overlap sources, P/D modes, rejection reasons.
#include <gtest/gtest.h>

#include "core/route/config.h"
#include "core/route/decision.h"
#include "core/route/endpoint.h"
#include "core/route/request.h"

namespace kvgate::route {
namespace {

TEST(Names, RolesRoundTrip) {
  for (Role r : {Role::kBoth, Role::kPrefill, Role::kDecode}) {
    EXPECT_EQ(parse_role(to_string(r)), r);
  }
  EXPECT_EQ(parse_role("aggregated"), Role::kBoth);
  EXPECT_FALSE(parse_role("Prefill").has_value());
  EXPECT_TRUE(can_prefill(Role::kBoth) && can_decode(Role::kBoth));
  EXPECT_FALSE(can_decode(Role::kPrefill));
  EXPECT_FALSE(can_prefill(Role::kDecode));
}

TEST(Names, CriticalityAndPriority) {
  for (Criticality c : {Criticality::kCritical, Criticality::kStandard, Criticality::kSheddable}) {
    EXPECT_EQ(parse_criticality(to_string(c)), c);
  }
  EXPECT_FALSE(parse_criticality("urgent").has_value());
  EXPECT_EQ(criticality_from_priority(3), Criticality::kCritical);
  EXPECT_EQ(criticality_from_priority(0), Criticality::kStandard);
  EXPECT_EQ(criticality_from_priority(-1), Criticality::kSheddable);
}

TEST(Names, SourcesAndModes) {
  for (OverlapSource s : {OverlapSource::kNone, OverlapSource::kPrecise, OverlapSource::kApprox,
                          OverlapSource::kBoth}) {
    EXPECT_EQ(parse_overlap_source(to_string(s)), s);
  }
  EXPECT_EQ(parse_pd_mode("auto"), PdMode::kAuto);
  EXPECT_EQ(parse_pd_mode("off"), PdMode::kOff);
  EXPECT_EQ(parse_pd_mode("on"), PdMode::kOn);
  EXPECT_FALSE(parse_pd_mode("yes").has_value());
}

TEST(Names, EveryRejectionHasACodeAndAStatus) {
  const std::pair<RejectReason, std::pair<const char*, int>> want[] = {
      {RejectReason::kNone, {"ok", 200}},
      {RejectReason::kNoEndpoints, {"no_endpoints", 503}},
      {RejectReason::kNoHealthyEndpoints, {"no_healthy_endpoints", 503}},
      {RejectReason::kSaturated, {"saturated", 429}},
      {RejectReason::kNoPrefillEndpoint, {"no_prefill_endpoint", 503}},
      {RejectReason::kNoDecodeEndpoint, {"no_decode_endpoint", 503}},
      {RejectReason::kDecodeFull, {"decode_full", 429}},
      {RejectReason::kDuplicateRequest, {"duplicate_request", 409}},
      {RejectReason::kSloUnattainable, {"slo_unattainable", 429}},
  };
  for (const auto& [reason, expect] : want) {
    EXPECT_EQ(to_string(reason), expect.first);
    EXPECT_EQ(http_status(reason), expect.second) << expect.first;
  }
}

TEST(Names, LabelsByKey) {
  EndpointSpec spec{.url = "u", .labels = {{"gpu", "h100"}, {"pool", "a"}}};
  EXPECT_EQ(spec.label("gpu"), "h100");
  EXPECT_EQ(spec.label("pool"), "a");
  EXPECT_EQ(spec.label("nope"), "");
}

}  // namespace
}  // namespace kvgate::route
