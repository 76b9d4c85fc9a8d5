// EngineModel with LoRA slots (EngineConfig::max_loras): the batch limit on distinct
// adapters, LRU loading and eviction, load_adapter's wait, the mixed-adapter step cost,
// and that an engine without adapters steps exactly as before.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/engine/engine_model.h"
#include "engine_test_support.h"

namespace kvgate::engine {
namespace {

using testing::Driver;
using testing::request;
using testing::simple_profile;
using testing::tokens;

EngineConfig lora_config(uint32_t max_loras, Nanos load_time = 0, double step_cost = 0.05) {
  EngineConfig c;
  c.block_size = 16;
  c.max_loras = max_loras;
  c.lora_load_time = load_time;
  c.lora_step_cost = step_cost;
  return c;
}

// A request of 32 prompt tokens (distinct per id) for `adapter` ("" for the base model).
EngineRequest with_adapter(RequestId id, const std::string& adapter, uint32_t max_tokens) {
  EngineRequest r = request(id, tokens(32, 1000 + static_cast<uint32_t>(id) * 100), max_tokens);
  if (!adapter.empty()) r.lora_name = adapter;
  return r;
}

TEST(EngineLoraTest, AtMostMaxLorasDistinctAdaptersRunAndOthersAreSkippedNotWaitedFor) {
  EngineModel engine(lora_config(2), simple_profile(1000));
  Driver d(engine);
  ASSERT_TRUE(engine.add(with_adapter(1, "a", 4), 0).ok());
  ASSERT_TRUE(engine.add(with_adapter(2, "b", 4), 0).ok());
  ASSERT_TRUE(engine.add(with_adapter(3, "c", 4), 0).ok());  // a third adapter: skipped
  ASSERT_TRUE(engine.add(with_adapter(4, "a", 4), 0).ok());  // behind it, but "a" runs
  ASSERT_TRUE(engine.add(with_adapter(5, "", 4), 0).ok());   // the base model: no limit
  ASSERT_TRUE(d.step_once());
  EXPECT_EQ(d.last.scheduled_seqs, 4u);
  EXPECT_EQ(d.last.lora_adapters, 2u);
  std::vector<std::string> running, waiting;
  engine.lora_adapters(running, waiting);
  EXPECT_EQ(running, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(waiting, (std::vector<std::string>{"c"}));
  EXPECT_EQ(engine.metrics().num_requests_waiting, 1u);

  d.run_until_idle();
  // "c" starts once "a" and "b" have no running request left.
  EXPECT_GE(d.ttft.at(3), d.finished_at.at(1));  // all arrived at 0
  EXPECT_GE(d.ttft.at(3), d.finished_at.at(2));
  EXPECT_LT(d.ttft.at(4), d.ttft.at(3));
  EXPECT_EQ(engine.metrics().requests_finished, 5u);
  EXPECT_EQ(engine.metrics().lora_loads, 3u);
  EXPECT_EQ(engine.metrics().lora_evictions, 1u);  // "c" took a slot of "a" or "b"
}

TEST(EngineLoraTest, LoadsOnFirstUseAndEvictsTheLeastRecentlyUsedAdapterNotInUse) {
  const Nanos load = 10 * kMillisecond;
  const Profile profile = simple_profile(1000);
  EngineModel engine(lora_config(2, load), profile);
  Driver d(engine);
  auto run = [&](RequestId id, const std::string& adapter) {
    EXPECT_TRUE(engine.add(with_adapter(id, adapter, 1), d.now).ok());
    d.run_until_idle();
    return d.steps.back();
  };
  const StepResult base = run(1, "");
  EXPECT_EQ(base.lora_loads, 0u);

  const StepResult a = run(2, "a");  // loaded: the step waits for it
  EXPECT_EQ(a.lora_loads, 1u);
  EXPECT_EQ(a.duration, base.duration + load);
  run(3, "b");
  EXPECT_EQ(engine.loaded_adapters(), (std::vector<std::string>{"a", "b"}));

  const StepResult again = run(4, "a");  // in its slot: no load
  EXPECT_EQ(again.lora_loads, 0u);
  EXPECT_EQ(again.duration, base.duration);
  EXPECT_EQ(engine.loaded_adapters(), (std::vector<std::string>{"b", "a"}));

  run(5, "c");  // both slots full: "b" is the least recently used
  EXPECT_EQ(engine.loaded_adapters(), (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(engine.metrics().lora_loads, 3u);
  EXPECT_EQ(engine.metrics().lora_evictions, 1u);
}

TEST(EngineLoraTest, AnAdapterInUseIsNeverEvicted) {
  EngineModel engine(lora_config(1), simple_profile(1000));
  Driver d(engine);
  ASSERT_TRUE(engine.add(with_adapter(1, "a", 50), 0).ok());
  ASSERT_TRUE(d.step_once());
  const Nanos b_at = d.now;
  ASSERT_TRUE(engine.add(with_adapter(2, "b", 1), b_at).ok());
  // The one slot runs "a": no load, no unload, and "b" waits for "a" to finish.
  EXPECT_FALSE(engine.load_adapter("b", d.now).ok());
  EXPECT_FALSE(engine.unload_adapter("a"));
  d.run_until_idle();
  EXPECT_GE(b_at + d.ttft.at(2), d.finished_at.at(1));
  EXPECT_EQ(engine.loaded_adapters(), (std::vector<std::string>{"b"}));
  EXPECT_TRUE(engine.unload_adapter("b"));
  EXPECT_TRUE(engine.loaded_adapters().empty());
  EXPECT_FALSE(engine.unload_adapter("b"));
}

TEST(EngineLoraTest, LoadAdapterMakesTheNextStepWaitForTheLoad) {
  const Nanos load = 20 * kMillisecond;
  EngineModel off(lora_config(0), simple_profile(1000));
  EXPECT_FALSE(off.load_adapter("a", 0).ok());

  EngineModel engine(lora_config(2, load), simple_profile(1000));
  Result<Nanos> ready = engine.load_adapter("a", 0);
  ASSERT_TRUE(ready.ok());
  EXPECT_EQ(*ready, load);
  Result<Nanos> again = engine.load_adapter("a", 5 * kMillisecond);  // already there
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, 5 * kMillisecond);
  EXPECT_EQ(engine.metrics().lora_loads, 1u);

  // A request at 5 ms: its step waits until the load ends at 20 ms, then computes.
  EngineModel plain(lora_config(2), simple_profile(1000));
  ASSERT_TRUE(plain.add(with_adapter(1, "", 1), 5 * kMillisecond).ok());
  const StepResult p = plain.step(5 * kMillisecond);
  ASSERT_TRUE(engine.add(with_adapter(1, "a", 1), 5 * kMillisecond).ok());
  const StepResult r = engine.step(5 * kMillisecond);
  EXPECT_EQ(r.lora_loads, 0u);
  EXPECT_EQ(r.end(), load + p.duration);

  // Long after the load: no wait.
  ASSERT_TRUE(engine.add(with_adapter(2, "a", 1), kSecond).ok());
  EXPECT_EQ(engine.step(kSecond).duration, p.duration);
}

TEST(EngineLoraTest, EachExtraDistinctAdapterInTheBatchCostsLoraStepCost) {
  const Profile profile = simple_profile(1000);
  auto first_step = [&](std::vector<std::string> adapters, double cost) {
    EngineModel engine(lora_config(4, 0, cost), profile);
    RequestId id = 1;
    for (const std::string& a : adapters) EXPECT_TRUE(engine.add(with_adapter(id++, a, 2), 0).ok());
    return engine.step(0);
  };
  const StepResult one = first_step({"a", "a", "a"}, 0.05);
  const StepResult two = first_step({"a", "b", "a"}, 0.05);
  const StepResult three = first_step({"a", "b", "c"}, 0.05);
  const StepResult with_base = first_step({"a", "", ""}, 0.05);
  EXPECT_EQ(one.lora_adapters, 1u);
  EXPECT_EQ(two.lora_adapters, 2u);
  EXPECT_EQ(three.lora_adapters, 3u);
  EXPECT_EQ(with_base.lora_adapters, 1u);
  EXPECT_EQ(with_base.duration, one.duration);  // base-model rows cost no adapter
  EXPECT_EQ(two.duration, std::llround(static_cast<double>(one.duration) * 1.05));
  EXPECT_EQ(three.duration, std::llround(static_cast<double>(one.duration) * 1.10));
  EXPECT_EQ(first_step({"a", "b", "c"}, 0).duration, one.duration);
}

TEST(EngineLoraTest, WithoutAdaptersSlotsChangeNothing) {
  // The same base-model workload on an engine without LoRA and one with 4 slots: every
  // step and every update the same.
  const Profile profile = *builtin_profile("h100-qwen2.5-7b");
  EngineConfig plain_config;
  plain_config.max_num_seqs = 8;
  plain_config.max_num_batched_tokens = 512;
  plain_config.num_gpu_blocks = 200;
  EngineConfig lora = plain_config;
  lora.max_loras = 4;
  lora.lora_load_time = 50 * kMillisecond;
  EngineModel a(plain_config, profile), b(lora, profile);
  for (RequestId id = 0; id < 40; ++id) {
    const uint32_t len = 100 + static_cast<uint32_t>(id * 37 % 400);
    const Nanos at = static_cast<Nanos>(id) * 3 * kMillisecond;
    ASSERT_TRUE(a.add(request(id, tokens(len, static_cast<uint32_t>(id % 5) * 7), 20), at).ok());
    ASSERT_TRUE(b.add(request(id, tokens(len, static_cast<uint32_t>(id % 5) * 7), 20), at).ok());
  }
  StepResult ra, rb;
  Nanos now = 0;
  size_t steps = 0;
  while (testing::step_both(a, b, now, ra, rb)) {
    testing::expect_same_step_shape(ra, rb);
    ASSERT_EQ(ra.updates.size(), rb.updates.size());
    for (size_t i = 0; i < ra.updates.size(); ++i) {
      testing::expect_same_update(ra.updates[i], rb.updates[i]);
    }
    EXPECT_EQ(rb.lora_adapters, 0u);
    now = ra.end();
    ASSERT_LT(++steps, 100'000u);
  }
  EXPECT_EQ(a.metrics().requests_finished, 40u);
  EXPECT_EQ(b.metrics().lora_loads, 0u);
}

}  // namespace
}  // namespace kvgate::engine
