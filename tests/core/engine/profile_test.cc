// The built-in profiles reproduce their calibration points (seed document, llm-d), and
// user profiles parse from YAML.
#include "core/engine/profile.h"

#include <gtest/gtest.h>

#include "core/engine/engine_model.h"
#include "engine_test_support.h"

namespace kvgate::engine {
namespace {

using testing::Driver;
using testing::request;
using testing::tokens;

Profile builtin(std::string_view name) {
  Result<Profile> p = builtin_profile(name);
  EXPECT_TRUE(p.ok()) << p.error();
  return *p;
}

// TTFT of a 30,000-token prompt sent twice to the same engine, one after the other.
std::pair<double, double> ttft_cold_and_cached(const Profile& profile) {
  EngineModel engine(EngineConfig{}, profile);
  Driver d(engine);
  EXPECT_TRUE(engine.add(request(1, tokens(30000), 1), d.now).ok());
  d.run_until_idle();
  EXPECT_TRUE(engine.add(request(2, tokens(30000), 1), d.now).ok());
  d.run_until_idle();
  return {to_seconds(d.ttft.at(1)), to_seconds(d.ttft.at(2))};
}

TEST(ProfileTest, Qwen7bLongPromptTtftColdAndCached) {
  auto [cold, cached] = ttft_cold_and_cached(builtin("h100-qwen2.5-7b"));
  EXPECT_NEAR(cold, 1.03, 1.03 * 0.05);
  EXPECT_NEAR(cached, 0.09, 0.09 * 0.05);
}

TEST(ProfileTest, Qwen7bSingleUserDecodesAbout166TokensPerSecond) {
  EngineModel engine(EngineConfig{}, builtin("h100-qwen2.5-7b"));
  Driver d(engine);
  ASSERT_TRUE(engine.add(request(1, tokens(300), 513), 0).ok());
  d.run_until_idle();
  // Decode rate: 512 tokens after the first one.
  const double decode_s = to_seconds(d.finished_at.at(1) - d.ttft.at(1));
  EXPECT_NEAR(512 / decode_s, 166.0, 166.0 * 0.05);
}

TEST(ProfileTest, Qwen32bCapacityAndScaling) {
  const Profile p7 = builtin("h100-qwen2.5-7b");
  const Profile p32 = builtin("2xh100-qwen3-32b");
  EXPECT_EQ(uint64_t{p32.num_gpu_blocks} * p32.block_size, 307328u);
  EngineModel engine(EngineConfig{}, p32);
  EXPECT_EQ(engine.config().num_gpu_blocks, 19208u);
  // Scaled by size and TP: decode slower than the 7B (weights per GPU 2.15x, plus
  // all-reduces), prefill ~2.6x slower per token (4.8x the FLOPs on 2 GPUs at 90%).
  StepShape one_decode{0, 0, 1, 512};
  const double r = static_cast<double>(p32.step_time(one_decode)) / p7.step_time(one_decode);
  EXPECT_GT(r, 1.9);
  EXPECT_LT(r, 2.4);
  StepShape prefill{8192, 8192.0 * 4096, 0, 0};
  const double rp = static_cast<double>(p32.step_time(prefill)) / p7.step_time(prefill);
  EXPECT_GT(rp, 2.3);
  EXPECT_LT(rp, 3.2);
  EXPECT_EQ(p32.startup, &startup_table_32b());
}

TEST(ProfileTest, StepTimeFollowsTheModel) {
  Profile p;
  p.step_overhead_s = 0.001;
  p.weight_read_s = 0.004;
  p.linear_s_per_token = 1e-5;
  p.attention_s_per_token_ctx = 1e-9;
  p.decode_s_per_ctx_token = 1e-8;
  EXPECT_EQ(p.step_time({}), 0);
  // Small batch: weight-read bound.
  EXPECT_EQ(p.step_time({0, 0, 10, 1000}), seconds(0.001 + 0.004 + 1000 * 1e-8));
  // Large batch: compute bound.
  EXPECT_EQ(p.step_time({1000, 1e6, 0, 0}), seconds(0.001 + 1000 * 1e-5 + 1e6 * 1e-9));
}

TEST(ProfileTest, ParsesYamlWithBaseAndOverrides) {
  Result<Profile> p = parse_profile_yaml(R"(
name: my-gpu
base: 2xh100-qwen3-32b
step_overhead_s: 0.002
num_gpu_blocks: 1000
block_size: 32
startup: 7b
)");
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->name, "my-gpu");
  EXPECT_DOUBLE_EQ(p->step_overhead_s, 0.002);
  EXPECT_EQ(p->num_gpu_blocks, 1000u);
  EXPECT_EQ(p->block_size, 32u);
  EXPECT_EQ(p->startup, &startup_table_7b());
  EXPECT_DOUBLE_EQ(p->weight_read_s, builtin("2xh100-qwen3-32b").weight_read_s);
}

TEST(ProfileTest, RejectsBadYaml) {
  EXPECT_FALSE(parse_profile_yaml("a: [1").ok());
  EXPECT_FALSE(parse_profile_yaml("- 1\n- 2").ok());
  Result<Profile> unknown = parse_profile_yaml("bogus: 1");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().find("bogus"), std::string::npos);
  EXPECT_FALSE(parse_profile_yaml("step_overhead_s: -1").ok());
  EXPECT_FALSE(parse_profile_yaml("step_overhead_s: fast").ok());
  EXPECT_FALSE(parse_profile_yaml("num_gpu_blocks: 0").ok());
  EXPECT_FALSE(parse_profile_yaml("base: nope").ok());
  EXPECT_FALSE(parse_profile_yaml("startup: 70b").ok());
}

TEST(ProfileTest, ResolvesNamesAndYaml) {
  EXPECT_EQ(resolve_profile("h100-qwen2.5-7b")->name, "h100-qwen2.5-7b");
  EXPECT_EQ(resolve_profile("name: x\nnum_gpu_blocks: 5")->num_gpu_blocks, 5u);
  Result<Profile> bad = resolve_profile("a100");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("h100-qwen2.5-7b"), std::string::npos);
}

}  // namespace
}  // namespace kvgate::engine
