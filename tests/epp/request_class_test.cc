// The Inference Extension's objective and fairness headers (epp/request_class.h), and
// their reading by the Exchange into the request the gateway routes.
#include "epp/request_class.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "epp/exchange.h"
#include "gateway/common/config.h"

namespace kvgate::epp {
namespace request_class_test {

namespace core_pb = ::envoy::config::core::v3;

TEST(EppRequestClasses, ObjectivesAreTheConfiguredNamesOnly) {
  RequestClasses c({{"premium", 100}, {"standard", 0}, {"batch", -1}}, 10);
  EXPECT_EQ(c.priority("premium"), 100);
  EXPECT_EQ(c.priority("standard"), 0);
  EXPECT_EQ(c.priority("batch"), -1);
  EXPECT_FALSE(c.priority("Premium").has_value());
  EXPECT_FALSE(c.priority("").has_value());
}

TEST(EppRequestClasses, FairnessIdsAreShortTokensUpToTheBound) {
  RequestClasses c({}, 2);
  EXPECT_EQ(c.fairness_id("team-a"), "team-a");
  EXPECT_EQ(c.fairness_id("ns/sa@cluster.local:1_x"), "ns/sa@cluster.local:1_x");
  EXPECT_EQ(c.ids(), 2u);
  EXPECT_EQ(c.fairness_id("team-b"), "");        // a third distinct id: past the bound
  EXPECT_EQ(c.fairness_id("team-a"), "team-a");  // a known one still counts
  EXPECT_EQ(c.ids(), 2u);
  RequestClasses d({}, 10);
  EXPECT_EQ(d.fairness_id(""), "");
  EXPECT_EQ(d.fairness_id("a b"), "");
  EXPECT_EQ(d.fairness_id("a\nb"), "");
  EXPECT_EQ(d.fairness_id(std::string(kMaxFairnessIdBytes + 1, 'x')), "");
  EXPECT_EQ(d.fairness_id(std::string(kMaxFairnessIdBytes, 'x')),
            std::string(kMaxFairnessIdBytes, 'x'));
  EXPECT_EQ(d.ids(), 1u);
  RequestClasses none({}, 0);
  EXPECT_EQ(none.fairness_id("team-a"), "");
}

struct RecordingPicker final : Picker {
  std::vector<gateway::ExternalRequest> asked;
  gateway::ExternalPick pick(gateway::ExternalRequest request,
                             const std::function<bool()>&) override {
    asked.push_back(std::move(request));
    gateway::ExternalPick p;
    p.answer = io::HttpResponse{503, "application/json", {}, "{}", {}};
    return p;
  }
  void done(gateway::ExternalPick, gateway::ExternalOutcome) override {}
  Nanos now() const override { return 0; }
};

pb::ProcessingRequest get_with(const std::vector<std::pair<std::string, std::string>>& extra) {
  pb::ProcessingRequest r;
  core_pb::HeaderMap* m = r.mutable_request_headers()->mutable_headers();
  auto add = [&](const std::string& k, const std::string& v) {
    core_pb::HeaderValue* h = m->add_headers();
    h->set_key(k);
    h->set_raw_value(v);
  };
  add(":method", "GET");
  add(":path", "/v1/models");
  for (const auto& [k, v] : extra) add(k, v);
  r.mutable_request_headers()->set_end_of_stream(true);
  return r;
}

const std::function<bool()> kNever = [] { return false; };

TEST(EppRequestClasses, TheExchangeReadsBothHeadersIntoTheRequest) {
  RecordingPicker picker;
  RequestClasses classes({{"premium", 100}, {"batch", -1}}, 10);
  const ExchangeOptions options{.max_body_bytes = 1 << 20, .classes = &classes};
  {
    Exchange x(picker, options);
    ASSERT_TRUE(x.on_request(get_with({{"x-gateway-inference-objective", "batch"},
                                       {"x-gateway-inference-fairness-id", "team-a"}}),
                             kNever));
  }
  {
    Exchange x(picker, options);
    ASSERT_TRUE(x.on_request(get_with({{"x-gateway-inference-objective", "unknown"}}), kNever));
  }
  {
    Exchange x(picker, options);
    ASSERT_TRUE(x.on_request(get_with({}), kNever));
  }
  {
    Exchange x(picker, 1 << 20);  // no classes: the headers are not read
    ASSERT_TRUE(x.on_request(get_with({{"x-gateway-inference-objective", "premium"},
                                       {"x-gateway-inference-fairness-id", "team-a"}}),
                             kNever));
  }
  ASSERT_EQ(picker.asked.size(), 4u);
  EXPECT_EQ(picker.asked[0].priority.value_or(99), -1);
  EXPECT_EQ(picker.asked[0].fairness_id, "team-a");
  EXPECT_FALSE(picker.asked[1].priority.has_value());
  EXPECT_EQ(picker.asked[1].fairness_id, "");
  EXPECT_FALSE(picker.asked[2].priority.has_value());
  EXPECT_EQ(picker.asked[2].fairness_id, "");
  EXPECT_FALSE(picker.asked[3].priority.has_value());
  EXPECT_EQ(picker.asked[3].fairness_id, "");
}

constexpr const char* kConfig = R"(
epp:
  port: 9002
  objectives: {premium: 100, standard: 0, batch: -1}
  max_fairness_ids: 50
pools:
  main:
    block_size: 16
    router: {policy: round-robin}
    endpoints: [http://127.0.0.1:8001]
models:
  - name: m
    pool: main
)";

TEST(EppRequestClasses, TheEppSectionListsObjectivesAndTheIdBound) {
  auto c = gateway::parse_gateway_config(kConfig, "fleet.yaml");
  ASSERT_TRUE(c) << c.error();
  ASSERT_TRUE(c->epp.has_value());
  EXPECT_EQ(c->epp->objectives, (std::map<std::string, int, std::less<>>{
                                    {"batch", -1}, {"premium", 100}, {"standard", 0}}));
  EXPECT_EQ(c->epp->max_fairness_ids, 50u);
  std::string bad = kConfig;
  bad.replace(bad.find("batch: -1"), 9, "batch: high");
  EXPECT_FALSE(gateway::parse_gateway_config(bad, "fleet.yaml"));
}

}  // namespace request_class_test
}  // namespace kvgate::epp
