#include "core/route/config.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "core/route/config_yaml.h"

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

Result<RouterConfig> read(std::string_view yaml, RouterConfig base = {}) {
  if (Status s = read_router_section(YAML::Load(std::string(yaml)), "router", base); !s) {
    return Error(s.error());
  }
  return base;
}

TEST(RouterConfig, ReadsEveryKey) {
  auto c = read(R"(
policy: kv-cost
params: {overlap_weight: 2, temperature: 0.5}
filters: [healthy, {name: saturation}]
overlap: both
record_decisions: false
prefill_tokens_per_second: 20000
saturation: {queue_threshold: 8, kv_threshold: 0.9, critical_max_waiting: 30, shed: false,
             metrics_max_age: 1500ms}
pd: {mode: on, locality_weight: 10, local_prefill_max_tokens: 256}
early_reject: {enabled: true, max_usage: 0.9, decode_seconds_per_token: 0.02, predict: false}
)");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->policy.params, (Entries{{"overlap_weight", "2"}, {"temperature", "0.5"}}));
  ASSERT_EQ(c->filters.size(), 2u);
  EXPECT_EQ(c->filters[1].name, "saturation");
  EXPECT_EQ(c->overlap_source, OverlapSource::kBoth);
  EXPECT_FALSE(c->record_decisions);
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
  EXPECT_FALSE(c->early_reject.predict);
}

TEST(RouterConfig, DottedKeysEqualNestedOnes) {
  auto dotted = read(
      "policy.overlap_weight: 2\nsaturation.shed: false\nsaturation.metrics_max_age: 2\n"
      "pd.mode: off\nearly_reject.enabled: true\nparams.temperature: 0.1\n");
  auto nested = read(
      "params: {overlap_weight: 2, temperature: 0.1}\nsaturation: {shed: false, "
      "metrics_max_age: 2s}\npd: {mode: off}\nearly_reject: {enabled: true}\n");
  ASSERT_TRUE(dotted.ok()) << dotted.error();
  ASSERT_TRUE(nested.ok()) << nested.error();
  EXPECT_EQ(dotted->policy.params, nested->policy.params);
  EXPECT_EQ(dotted->saturation.shed, nested->saturation.shed);
  EXPECT_EQ(dotted->saturation.metrics_max_age, 2 * kSecond);
  EXPECT_EQ(nested->saturation.metrics_max_age, 2 * kSecond);
  EXPECT_EQ(dotted->pd.mode, PdMode::kOff);
  EXPECT_TRUE(dotted->early_reject.enabled);
}

TEST(RouterConfig, AbsentKeysKeepTheDefaults) {
  auto c = read("{}");
  ASSERT_TRUE(c.ok());
  RouterConfig d;
  EXPECT_EQ(c->overlap_source, OverlapSource::kApprox);
  EXPECT_EQ(c->policy.name, d.policy.name);
  EXPECT_FALSE(c->early_reject.enabled);  // a section does not enable itself
  auto e = read("early_reject: {max_usage: 0.5}");
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE(e->early_reject.enabled);
}

TEST(RouterConfig, EmptyFiltersMeansNone) {
  auto c = read("filters: []");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->filters.empty());
}

TEST(RouterConfig, ANewPolicyStartsFromItsDefaultsAndNullRemovesAParam) {
  RouterConfig base;
  base.policy = {"kv-cost", {{"overlap_weight", "2"}, {"temperature", "1"}}};
  auto same = read("params: {temperature: null}\npolicy: kv-cost", base);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->policy.params, (Entries{{"overlap_weight", "2"}}));
  // The policy is read first whatever the order of the keys.
  auto other = read("params: {threshold: 3}\npolicy: approx-prefix", base);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->policy.name, "approx-prefix");
  EXPECT_EQ(other->policy.params, (Entries{{"threshold", "3"}}));
}

TEST(RouterConfig, ShellKeysAreSkippedOthersRejected) {
  RouterConfig c;
  YAML::Node n = YAML::Load("name: a\npolicy: random\nwarmup: {}\n");
  EXPECT_TRUE(read_router_section(n, "policies[0]", c, {"name", "warmup"}).ok());
  EXPECT_EQ(c.policy.name, "random");
  Status s = read_router_section(n, "policies[0]", c, {"name"});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error(), "3:1: policies[0].warmup: unknown field");
}

TEST(RouterConfig, ErrorsNameTheFieldAndItsPlace) {
  auto err = [](std::string_view yaml) {
    auto r = read(yaml);
    return r ? std::string("(ok)") : r.error();
  };
  EXPECT_EQ(err("polcy: random"), "1:1: router.polcy: unknown field");
  EXPECT_EQ(err("overlap: exact"), "1:10: router.overlap: expected none, precise, approx or both");
  EXPECT_EQ(err("pd: {mode: maybe}"), "1:12: router.pd.mode: expected auto, off or on");
  EXPECT_EQ(err("saturation: {shed: 3}"), "1:20: router.saturation.shed: expected true or false");
  EXPECT_EQ(err("saturation: {kv_threshold: 0}"),
            "1:1: router: saturation.kv_threshold must be > 0");
  EXPECT_EQ(err("prefill_tokens_per_second: fast"),
            "1:28: router.prefill_tokens_per_second: expected a number");
  EXPECT_EQ(err("saturation.queue_treshold: 3"),
            "1:28: router.saturation.queue_treshold: unknown field");
  EXPECT_EQ(err("saturation: {critical_max_waiting: 1.5}"),
            "1:36: router.saturation.critical_max_waiting: expected a whole number");
  EXPECT_EQ(err("saturation: {metrics_max_age: soon}"),
            "1:31: router.saturation.metrics_max_age: 'soon' is not a duration (e.g. 200ms, 15s, "
            "5m, 24h)");
  EXPECT_EQ(err("filters: saturation"), "1:10: router.filters: expected a list of filter names");
  EXPECT_EQ(err("[1, 2]"), "1:1: router: expected a mapping");
}

TEST(RouterConfig, SessionAffinityIsOnWhenItsSectionIsThere) {
  auto off = read("policy: kv-cost");
  ASSERT_TRUE(off.ok()) << off.error();
  EXPECT_FALSE(off->session_affinity.enabled);
  EXPECT_EQ(off->session_affinity.header, "x-session-id");
  EXPECT_EQ(off->session_affinity.capacity, 100'000u);
  auto on = read("session_affinity: true");
  ASSERT_TRUE(on.ok()) << on.error();
  EXPECT_TRUE(on->session_affinity.enabled);
  auto c = read(
      "session_affinity: {header: x-conversation, capacity: 5000, idle_ttl: 10m,"
      " max_extra_requests: 2, max_load_ratio: 3}");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_TRUE(c->session_affinity.enabled);
  EXPECT_EQ(c->session_affinity.header, "x-conversation");
  EXPECT_EQ(c->session_affinity.capacity, 5000u);
  EXPECT_EQ(c->session_affinity.idle_ttl, 600 * kSecond);
  EXPECT_DOUBLE_EQ(c->session_affinity.max_extra_requests, 2);
  EXPECT_DOUBLE_EQ(c->session_affinity.max_load_ratio, 3);
  auto dotted = read("session_affinity.idle_ttl: 5m");
  ASSERT_TRUE(dotted.ok()) << dotted.error();
  EXPECT_TRUE(dotted->session_affinity.enabled);
  EXPECT_EQ(dotted->session_affinity.idle_ttl, 300 * kSecond);
  auto disabled = read("session_affinity: {enabled: false, capacity: 10}");
  ASSERT_TRUE(disabled.ok()) << disabled.error();
  EXPECT_FALSE(disabled->session_affinity.enabled);
  EXPECT_EQ(disabled->session_affinity.capacity, 10u);
}

TEST(RouterConfig, SessionAffinityErrorsNameTheField) {
  auto err = [](std::string_view yaml) {
    auto r = read(yaml);
    return r ? std::string("(ok)") : r.error();
  };
  EXPECT_EQ(err("session_affinity: {capacity: 1.5}"),
            "1:30: router.session_affinity.capacity: expected a whole number");
  EXPECT_EQ(err("session_affinity: {speed: 2}"),
            "1:27: router.session_affinity.speed: unknown field");
  EXPECT_EQ(err("session_affinity: {max_load_ratio: 0.5}"),
            "1:1: router: session_affinity.max_load_ratio must be >= 1");
  EXPECT_EQ(err("session_affinity: {capacity: 0}"),
            "1:1: router: session_affinity.capacity must be > 0");
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
