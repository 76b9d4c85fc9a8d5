// Latency targets end to end (issue #43): `kvgate serve` with latency_targets on (action
// reject, and a prior so slow that any prompt is predicted to take seconds) in front of a
// real `kvgate engine`. The targets' headers (kvgate's and llm-d's names) reach the
// router: an unreachable target is refused 429 slo_unattainable before the engine sees
// it; a bad value is a 400 naming the header; a request without targets, or with a
// generous one, is served. The predictor learns TTFT and TPOT from a stream, and the
// metrics count the predictions, the samples and the outcomes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/fault_fixture.h"

namespace kvgate::testing {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace gateway_latency_targets_test {

const std::vector<std::string> kFast = {"--time-scale", "0.01", "--model", "sim"};

// One pool "main" over `url`, latency targets on: 1 prompt token a second before any
// sample, so that every prompt is predicted far above a 1 s target.
std::string targets_yaml(const std::string& url) {
  return "listeners:\n  - address: 127.0.0.1\n    port: 0\n"
         "timeouts: {header_ms: 2000, drain_ms: 20000, connect_ms: 1000}\n"
         "pools:\n  main:\n    block_size: 16\n    router:\n      policy: kv-cost\n"
         "      latency_targets: {enabled: true, action: reject, "
         "prior_prefill_tokens_per_second: 1}\n"
         "    endpoints:\n      - " +
         url + "\nmodels:\n  - name: sim\n    pool: main\n";
}

io::HttpClientResponse ask(GatewayProcess& gw, std::vector<io::HttpHeader> headers,
                           bool stream = false) {
  return gw.post("/v1/chat/completions",
                 chat_body("a prompt long enough to be predicted slowly", 8, stream),
                 std::move(headers));
}

TEST(GatewayLatencyTargets, HeadersReachTheRouterAndOutcomesAreCounted) {
  EngineProcess e(kFast);
  ASSERT_FALSE(e.url.empty());
  GatewayProcess gw(targets_yaml(e.url));
  ASSERT_FALSE(gw.url.empty());

  // Bad values: a 400 naming the header, whichever name it came under.
  for (const auto& [name, value] :
       std::vector<std::pair<std::string, std::string>>{{"x-kvgate-ttft-ms", "abc"},
                                                        {"x-kvgate-tpot-ms", "0"},
                                                        {"x-slo-ttft-ms", "-5"},
                                                        {"x-slo-tpot-ms", "1.5"}}) {
    auto r = ask(gw, {{name, value}});
    EXPECT_EQ(r.status, 400) << name << ": " << r.body;
    EXPECT_NE(r.body.find(name + ": expected a positive integer"), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("invalid_header"), std::string::npos) << r.body;
  }

  // Unreachable targets, kvgate's name and llm-d's: refused before any work.
  for (const char* name : {"x-kvgate-ttft-ms", "x-slo-ttft-ms"}) {
    auto r = ask(gw, {{name, "1000"}});
    EXPECT_EQ(r.status, 429) << name << ": " << r.body;
    const std::string* reason = r.header("x-kvgate-reject-reason");
    ASSERT_NE(reason, nullptr) << name;
    EXPECT_EQ(*reason, "slo_unattainable");
  }
  // Without targets: served as ever.
  EXPECT_EQ(ask(gw, {}).status, 200);
  // A generous target (10 minutes), streamed: served and met; the stream teaches TTFT
  // (its first token) and TPOT (its end).
  auto streamed = ask(gw, {{"x-kvgate-ttft-ms", "600000"}}, /*stream=*/true);
  EXPECT_EQ(streamed.status, 200) << streamed.body;

  const metrics::Labels main = {{"pool", "main"}};
  EXPECT_TRUE(eventually([&] {
    return gw.metric("kvgate_slo_requests_total", {{"pool", "main"}, {"outcome", "met"}}) == 1;
  }));
  EXPECT_EQ(gw.metric("kvgate_slo_requests_total", {{"pool", "main"}, {"outcome", "rejected"}}), 2);
  EXPECT_EQ(gw.metric("kvgate_slo_requests_total", {{"pool", "main"}, {"outcome", "missed"}}), 0);
  EXPECT_GE(gw.metric("kvgate_predictor_predictions_total", main), 2);
  EXPECT_TRUE(eventually([&] {
    return gw.metric("kvgate_predictor_samples_total", {{"pool", "main"}, {"kind", "tpot"}}) == 1;
  }));
  EXPECT_EQ(gw.metric("kvgate_predictor_samples_total", {{"pool", "main"}, {"kind", "ttft"}}), 1);
  EXPECT_GT(gw.metric("kvgate_predictor_ttft_mape", main), 0);
  EXPECT_EQ(gw.proc->stop(), 0) << gw.proc->errors();
}

}  // namespace gateway_latency_targets_test
}  // namespace kvgate::testing
