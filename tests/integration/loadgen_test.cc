// `kvgate bench` against a real `kvgate engine`: every request streams through, the
// usage it reports is read, and repeated prefixes show up as cache hits.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "loadgen/load_generator.h"
#include "support/eventually.h"
#include "support/gateway_fixture.h"

namespace kvgate::testing {
namespace {

constexpr const char* kScenario = R"(name: loadgen-test
seed: 3
cluster: {engines: 1, profile: h100-qwen2.5-7b}
gateway: {model: test-model}
policies: [{name: random, policy: random, overlap: none}]
workload:
  kind: shared_prefix
  shared_prefix: {groups: 2, prompts_per_group: 3, system_prompt_tokens: 256,
                  question_tokens: 32, output_tokens: 12}
  arrivals:
    kind: poisson
    stages: [{qps: 4, duration_s: 3}]
)";

TEST(Loadgen, BenchStreamsAWorkloadThroughAnEngine) {
  EngineProcess engine({"--model", "test-model", "--time-scale", "0.1"});
  ASSERT_FALSE(engine.url.empty());
  auto dir =
      std::filesystem::temp_directory_path() / ("kvgate-loadgen-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "scenario.yaml") << kScenario;
  auto bench = ChildProcess::spawn(
      kvgate_bin(), {"bench", (dir / "scenario.yaml").string(), "--url", engine.url, "--time-scale",
                     "0.1", "--no-progress", "--out", (dir / "out").string()});
  ASSERT_TRUE(bench) << bench.error();
  auto line = (*bench)->wait_for_line("wrote", std::chrono::seconds(60));
  ASSERT_TRUE(line) << line.error() << (*bench)->errors();
  for (int i = 0; i < 200 && (*bench)->running(); ++i) {
    // Waits for the kvgate bench child to exit by itself.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ((*bench)->stop(), 0) << (*bench)->errors();
  const std::string out = (*bench)->output();
  EXPECT_NE(out.find("live"), std::string::npos) << out;

  std::ifstream csv(dir / "out" / "requests.csv");
  std::string header, row;
  std::getline(csv, header);
  int rows = 0, hits = 0;
  while (std::getline(csv, row)) {
    ++rows;
    // policy,request,stage,endpoint,arrival_s,ttft_s,e2e_s,prompt_tokens,cached_tokens,
    // output_tokens,rejected,tenant,queue_wait_s
    std::vector<std::string> f;
    std::stringstream ss(row);
    for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
    ASSERT_EQ(f.size(), 13u) << row;
    EXPECT_GT(std::stod(f[5]), 0) << row;  // a first token came
    EXPECT_EQ(f[7], "288") << row;         // prompt tokens, as the engine counted
    EXPECT_EQ(f[9], "12") << row;          // exactly max_tokens
    if (std::stoi(f[8]) > 0) ++hits;
  }
  EXPECT_GE(rows, 4);
  EXPECT_GT(hits, 0);  // prompts of one group share 256 tokens: the engine's cache hits
  std::filesystem::remove_all(dir);
}

}  // namespace

namespace loadgen_test {

constexpr const char* kTargetsScenario = R"(name: loadgen-targets
seed: 5
cluster: {engines: 1, profile: h100-qwen2.5-7b}
gateway: {model: sim}
policies: [{name: random, policy: random, overlap: none}]
workload:
  kind: shared_prefix
  shared_prefix: {groups: 2, prompts_per_group: 3, system_prompt_tokens: 128,
                  question_tokens: 16, output_tokens: 6}
  targets: {fraction: 1, ttft_ms: 600000, tpot_ms: 600000}
  arrivals:
    kind: poisson
    stages: [{qps: 4, duration_s: 2}]
)";

// summary.csv's one row, by column name (its policy name, "live", holds no comma: plain
// splitting is enough here).
std::map<std::string, std::string> summary_row(const std::filesystem::path& file) {
  auto split = [](const std::string& line) {
    std::vector<std::string> out;
    std::stringstream ss(line);
    for (std::string field; std::getline(ss, field, ',');) out.push_back(field);
    if (!line.empty() && line.back() == ',') out.emplace_back();  // a trailing empty field
    return out;
  };
  std::ifstream in(file);
  std::string header, row;
  std::getline(in, header);
  std::getline(in, row);
  const std::vector<std::string> names = split(header), values = split(row);
  std::map<std::string, std::string> out;
  for (size_t i = 0; i < names.size() && i < values.size(); ++i) out[names[i]] = values[i];
  return out;
}

int run_bench(const std::vector<std::string>& args) {
  auto bench = ChildProcess::spawn(kvgate_bin(), args);
  if (!bench) {
    ADD_FAILURE() << bench.error();
    return -1;
  }
  auto line = (*bench)->wait_for_line("wrote", std::chrono::seconds(60));
  EXPECT_TRUE(line) << line.error() << (*bench)->errors();
  for (int i = 0; i < 200 && (*bench)->running(); ++i) {
    // Waits for the kvgate bench child to exit by itself.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return (*bench)->stop();
}

TEST(Loadgen, TargetHeadersInRealMillisecondsUnderEitherName) {
  workload::WorkloadRequest r;
  r.ttft_target = 500 * kMillisecond;
  r.tpot_target = 40 * kMillisecond + 1;  // rounded up, never tighter than asked
  using H = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(loadgen::target_headers(r, loadgen::TargetHeaders::kKvgate, 1),
            (H{{"x-kvgate-ttft-ms", "500"}, {"x-kvgate-tpot-ms", "41"}}));
  // Engines slowed down 10 times (--time-scale 10): the real targets are 10 times longer.
  EXPECT_EQ(loadgen::target_headers(r, loadgen::TargetHeaders::kLlmd, 10),
            (H{{"x-slo-ttft-ms", "5000"}, {"x-slo-tpot-ms", "401"}}));
  EXPECT_TRUE(loadgen::target_headers(r, loadgen::TargetHeaders::kNone, 1).empty());
  r.tpot_target = 0;
  r.ttft_target = 10'000;  // 10 us: at least 1 ms
  EXPECT_EQ(loadgen::target_headers(r, loadgen::TargetHeaders::kKvgate, 0.1),
            (H{{"x-kvgate-ttft-ms", "1"}}));
  r.ttft_target = 0;
  EXPECT_TRUE(loadgen::target_headers(r, loadgen::TargetHeaders::kKvgate, 1).empty());
}

TEST(Loadgen, BenchSendsTheWorkloadsTargetsAndReportsTheirAttainment) {
  // Through `kvgate serve`: every request carries generous targets, so the gateway counts
  // each as met (kvgate_slo_requests_total) and the report says 100% of each target met.
  EngineProcess engine({"--model", "sim", "--time-scale", "0.1"});
  ASSERT_FALSE(engine.url.empty());
  GatewayProcess gw(gateway_yaml({engine.url}, "kv-cost"));
  ASSERT_FALSE(gw.url.empty());
  auto dir = std::filesystem::temp_directory_path() /
             ("kvgate-loadgen-targets-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "scenario.yaml") << kTargetsScenario;
  const std::string scenario = (dir / "scenario.yaml").string();
  ASSERT_EQ(run_bench({"bench", scenario, "--url", gw.url, "--time-scale", "0.1", "--no-progress",
                       "--out", (dir / "sent").string()}),
            0);
  auto sent = summary_row(dir / "sent" / "summary.csv");
  const double requests = std::stod(sent.at("requests"));
  ASSERT_GE(requests, 2);
  EXPECT_EQ(sent.at("targeted"), sent.at("requests"));
  EXPECT_EQ(sent.at("ttft_target_met"), "1.0000");
  EXPECT_EQ(sent.at("tpot_target_met"), "1.0000");
  EXPECT_EQ(sent.at("slo_met"), "1.0000");
  EXPECT_EQ(sent.at("predictor_ttft_mape"), "");  // the gateway's, not the client's
  const metrics::Labels met = {{"pool", "main"}, {"outcome", "met"}};
  EXPECT_TRUE(eventually([&] { return gw.metric("kvgate_slo_requests_total", met) == requests; }))
      << gw.metric("kvgate_slo_requests_total", met) << " of " << requests;

  // --target-headers none: the gateway hears of no target, the report still measures them.
  ASSERT_EQ(run_bench({"bench", scenario, "--url", gw.url, "--time-scale", "0.1", "--no-progress",
                       "--target-headers", "none", "--out", (dir / "unsent").string()}),
            0);
  auto unsent = summary_row(dir / "unsent" / "summary.csv");
  EXPECT_EQ(unsent.at("targeted"), unsent.at("requests"));
  EXPECT_EQ(unsent.at("ttft_target_met"), "1.0000");
  EXPECT_EQ(gw.metric("kvgate_slo_requests_total", met), requests);
  std::filesystem::remove_all(dir);
}

}  // namespace loadgen_test
}  // namespace kvgate::testing
