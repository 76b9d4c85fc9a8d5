#include "core/route/config.h"

#include <gtest/gtest.h>

namespace kvgate::route {
namespace {

using Entries = std::vector<std::pair<std::string, std::string>>;

TEST(RouterConfig, DefaultsAreValid) {
  RouterConfig c;
  EXPECT_TRUE(c.validate().ok());
  EXPECT_EQ(c.policy.name, "kv-cost");
  EXPECT_DOUBLE_EQ(c.saturation.queue_threshold, 5);
  EXPECT_DOUBLE_EQ(c.saturation.kv_threshold, 0.8);
  EXPECT_EQ(c.saturation.critical_max_waiting, 50u);
}

TEST(RouterConfig, ParsesDottedKeys) {
  auto c = parse_router_config(Entries{{"policy", "kv-cost"},
                                       {"policy.overlap_weight", "2"},
                                       {"policy.temperature", "0.5"},
                                       {"filters", "healthy, saturation"},
                                       {"overlap_source", "both"},
                                       {"record_decisions", "false"},
                                       {"block_size", "64"},
                                       {"prefill_tokens_per_second", "20000"},
                                       {"saturation.queue_threshold", "8"},
                                       {"saturation.kv_threshold", "0.9"},
                                       {"saturation.critical_max_waiting", "30"},
                                       {"saturation.shed", "false"},
                                       {"saturation.metrics_max_age", "1.5"},
                                       {"pd.mode", "on"},
                                       {"pd.locality_weight", "10"},
                                       {"pd.local_prefill_max_tokens", "256"},
                                       {"early_reject.enabled", "true"},
                                       {"early_reject.max_usage", "0.9"},
                                       {"early_reject.decode_seconds_per_token", "0.02"}});
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->policy.params, (Entries{{"overlap_weight", "2"}, {"temperature", "0.5"}}));
  ASSERT_EQ(c->filters.size(), 2u);
  EXPECT_EQ(c->filters[1].name, "saturation");
  EXPECT_EQ(c->overlap_source, OverlapSource::kBoth);
  EXPECT_FALSE(c->record_decisions);
  EXPECT_EQ(c->block_size, 64u);
  EXPECT_DOUBLE_EQ(c->prefill_tokens_per_second, 20000);
  EXPECT_DOUBLE_EQ(c->saturation.queue_threshold, 8);
  EXPECT_DOUBLE_EQ(c->saturation.kv_threshold, 0.9);
  EXPECT_EQ(c->saturation.critical_max_waiting, 30u);
  EXPECT_FALSE(c->saturation.shed);
  EXPECT_EQ(c->saturation.metrics_max_age, 1500 * kMillisecond);
  EXPECT_EQ(c->pd.mode, PdMode::kOn);
  EXPECT_DOUBLE_EQ(c->pd.locality_weight, 10);
  EXPECT_EQ(c->pd.local_prefill_max_tokens, 256u);
  EXPECT_TRUE(c->early_reject.enabled);
  EXPECT_DOUBLE_EQ(c->early_reject.max_usage, 0.9);
  EXPECT_DOUBLE_EQ(c->early_reject.decode_seconds_per_token, 0.02);
}

TEST(RouterConfig, EmptyFiltersMeansNone) {
  auto c = parse_router_config(Entries{{"filters", ""}});
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->filters.empty());
}

TEST(RouterConfig, RejectsBadEntries) {
  EXPECT_FALSE(parse_router_config(Entries{{"polcy", "random"}}).ok());
  EXPECT_FALSE(parse_router_config(Entries{{"block_size", "0"}}).ok());
  EXPECT_FALSE(parse_router_config(Entries{{"block_size", "1.5"}}).ok());
  EXPECT_FALSE(parse_router_config(Entries{{"block_size", "-4"}}).ok());
  EXPECT_FALSE(parse_router_config(Entries{{"overlap_source", "exact"}}).ok());
  EXPECT_FALSE(parse_router_config(Entries{{"pd.mode", "maybe"}}).ok());
  EXPECT_FALSE(parse_router_config(Entries{{"saturation.shed", "yes"}}).ok());
  EXPECT_FALSE(parse_router_config(Entries{{"saturation.kv_threshold", "0"}}).ok());
  EXPECT_FALSE(parse_router_config(Entries{{"prefill_tokens_per_second", "fast"}}).ok());
  auto e = parse_router_config(Entries{{"saturation.queue_treshold", "3"}});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().find("saturation.queue_treshold"), std::string::npos);
}

TEST(ParamReader, ReportsMalformedAndUnknown) {
  PolicyConfig pc{"p", {{"a", "1.5"}, {"b", "x"}}};
  ParamReader r(pc);
  EXPECT_DOUBLE_EQ(r.number("a", 0), 1.5);
  EXPECT_DOUBLE_EQ(r.number("b", 7), 7);  // malformed: fallback, error at finish
  EXPECT_FALSE(r.finish().ok());
  PolicyConfig unknown{"p", {{"zzz", "1"}}};
  ParamReader u(unknown);
  EXPECT_DOUBLE_EQ(u.number("a", 3), 3);
  Status s = u.finish();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("zzz"), std::string::npos);
}

}  // namespace
}  // namespace kvgate::route
