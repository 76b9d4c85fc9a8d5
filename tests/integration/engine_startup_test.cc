// `kvgate engine --startup cold`: /health is 503 through the (time-scaled) startup
// phases, then 200; requests before that get 503.
#include <gtest/gtest.h>

#include <chrono>

#include "support/engine_fixture.h"

namespace kvgate::testing {
namespace {

TEST(EngineStartup, HealthIs503ThenOkAcrossAColdStart) {
  // The 7B cold start takes about 200 s; at time scale 0.01 about 2 s.
  const auto t0 = std::chrono::steady_clock::now();
  EngineProcess e({"--startup", "cold", "--time-scale", "0.01"}, /*wait_healthy=*/false);
  ASSERT_FALSE(e.url.empty());
  auto h = e.get("/health");
  EXPECT_EQ(h.status, 503) << h.body;
  EXPECT_EQ(e.post("/v1/completions", R"({"prompt":"a","max_tokens":1})").status, 503);
  Status ok = e.proc->wait_for_status(e.url + "/health", 200, std::chrono::seconds(30));
  ASSERT_TRUE(ok) << ok.error();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GT(took, 1.7);  // every phase elapses: the fastest possible 7B cold draw is 182 s
  EXPECT_TRUE(e.proc->wait_for_line("kvgate engine ready"));
  EXPECT_NE(e.proc->errors().find("startup phase weight_load done"), std::string::npos)
      << e.proc->errors();
  EXPECT_EQ(e.post("/v1/completions", R"({"prompt":"a","max_tokens":1})").status, 200);
}

}  // namespace
}  // namespace kvgate::testing
