// `kvgate bench` against a real `kvgate engine`: every request streams through, the
// usage it reports is read, and repeated prefixes show up as cache hits.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "support/engine_fixture.h"

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
}  // namespace kvgate::testing
