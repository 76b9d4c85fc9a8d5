// `kvgate engine`'s /metrics, read back as the gateway's scraper reads it, gives the
// router what the simulator gives it from the same engine model (core/route/scrape.h):
// one definition of a scrape in all three.
#include "engine/engine_metrics_text.h"

#include <gtest/gtest.h>

#include <numeric>

#include "core/engine/profile.h"
#include "core/metrics/prometheus_text.h"
#include "core/route/scrape.h"

namespace kvgate::engine_server {
namespace {

engine::EngineRequest request(engine::RequestId id, uint32_t prompt_tokens) {
  engine::EngineRequest r;
  r.id = id;
  r.prompt.resize(prompt_tokens);
  std::iota(r.prompt.begin(), r.prompt.end(), static_cast<kv::TokenId>(id * 10'000));
  r.max_tokens = 8;
  return r;
}

void expect_scrape_matches_the_model(const engine::EngineModel& model) {
  const std::string text = render_engine_metrics(model, EngineServerOptions{}, 0);
  auto parsed = metrics::parse_prometheus_text(text);
  ASSERT_TRUE(parsed) << parsed.error();
  auto scraped = route::read_scrape(*parsed);
  ASSERT_TRUE(scraped) << scraped.error();
  const route::ScrapedMetrics direct = route::scrape_of(model.metrics());
  EXPECT_EQ(scraped->waiting, direct.waiting);
  EXPECT_EQ(scraped->running, direct.running);
  EXPECT_DOUBLE_EQ(scraped->kv_usage, direct.kv_usage);
}

TEST(EngineMetricsText, ScrapedAsTheSimulatorReadsTheModel) {
  auto profile = engine::builtin_profile("h100-qwen2.5-7b");
  ASSERT_TRUE(profile);
  engine::EngineConfig config;
  config.max_num_seqs = 2;
  engine::EngineModel model(config, *profile);
  for (engine::RequestId id = 1; id <= 5; ++id) ASSERT_TRUE(model.add(request(id, 600), 0).ok());
  // Just added: preprocessing, so "arriving"; the waiting gauge counts them.
  ASSERT_GT(model.metrics().num_requests_arriving, 0u);
  EXPECT_EQ(model.metrics().waiting_gauge(), 5u);
  expect_scrape_matches_the_model(model);
  // Stepped until two run and three wait in the scheduler's queue.
  Nanos now = 0;
  for (int i = 0; i < 100 && model.metrics().num_requests_running == 0; ++i) {
    now = model.next_step_time(now).value_or(now + kMillisecond);
    now = model.step(now).end();
  }
  EXPECT_EQ(model.metrics().num_requests_running, 2u);
  EXPECT_EQ(model.metrics().waiting_gauge(), 3u);
  EXPECT_GT(model.metrics().kv_cache_usage, 0);
  expect_scrape_matches_the_model(model);
}

TEST(ReadScrape, SumsEngineCoresAndFallsBackToTheOldKvName) {
  auto m = metrics::parse_prometheus_text(
      "vllm:num_requests_waiting{engine=\"0\"} 2\n"
      "vllm:num_requests_waiting{engine=\"1\"} 3\n"
      "vllm:num_requests_running{engine=\"0\"} 4\n"
      "vllm:num_requests_running{engine=\"1\"} 6\n"
      "vllm:gpu_cache_usage_perc{engine=\"0\"} 0.2\n"
      "vllm:gpu_cache_usage_perc{engine=\"1\"} 0.6\n");
  ASSERT_TRUE(m) << m.error();
  auto s = route::read_scrape(*m);
  ASSERT_TRUE(s) << s.error();
  EXPECT_EQ(s->waiting, 5u);
  EXPECT_EQ(s->running, 10u);
  EXPECT_DOUBLE_EQ(s->kv_usage, 0.4);
}

TEST(ReadScrape, AMissingGaugeIsAnError) {
  auto m = metrics::parse_prometheus_text("vllm:num_requests_waiting 1\n");
  ASSERT_TRUE(m) << m.error();
  EXPECT_FALSE(route::read_scrape(*m));
}

// With LoRA on (the model's max_loras), vllm:lora_requests_info names the adapters of the
// running and of the waiting requests (each once, comma-joined), with the time as its
// value, as vLLM does; kvgate_engine_lora_{loads,evictions}_total count the model's slot
// loads.
TEST(EngineMetricsText, LoraRequestsInfoNamesRunningAndWaitingAdapters) {
  auto profile = engine::builtin_profile("h100-qwen2.5-7b");
  ASSERT_TRUE(profile);
  engine::EngineConfig config;
  config.max_num_seqs = 2;
  config.max_loras = 4;
  engine::EngineModel model(config, *profile);
  const char* names[] = {"sql", "chat", "sql", "code"};
  for (engine::RequestId id = 1; id <= 4; ++id) {
    engine::EngineRequest r = request(id, 600);
    r.lora_id = id;
    r.lora_name = names[id - 1];
    ASSERT_TRUE(model.add(std::move(r), 0).ok());
  }
  ASSERT_TRUE(model.add(request(5, 600), 0).ok());  // the base model: no adapter
  Nanos now = 0;
  for (int i = 0; i < 100 && model.metrics().num_requests_running == 0; ++i) {
    now = model.next_step_time(now).value_or(now + kMillisecond);
    now = model.step(now).end();
  }
  const std::string text = render_engine_metrics(model, EngineServerOptions{}, 1767225600.5);
  EXPECT_NE(text.find("vllm:lora_requests_info{max_lora=\"4\",running_lora_adapters=\"sql,chat\","
                      "waiting_lora_adapters=\"sql,code\"} 1767225600.5"),
            std::string::npos)
      << text;
  // LoRA off: nothing of it.
  engine::EngineModel plain(engine::EngineConfig{}, *profile);
  EXPECT_EQ(render_engine_metrics(plain, EngineServerOptions{}, 0).find("lora"), std::string::npos);
  // Read back as the gateway's scraper reads it.
  auto parsed = metrics::parse_prometheus_text(text);
  ASSERT_TRUE(parsed) << parsed.error();
  // The two running adapters were loaded into free slots: no eviction.
  EXPECT_EQ(parsed->value("kvgate_engine_lora_loads_total"), 2);
  EXPECT_EQ(parsed->value("kvgate_engine_lora_evictions_total"), 0);
  EXPECT_EQ(parsed->type_of("kvgate_engine_lora_loads_total"), "counter");
  auto scraped = route::read_scrape(*parsed);
  ASSERT_TRUE(scraped) << scraped.error();
  EXPECT_EQ(scraped->lora.max_loras, 4u);
  EXPECT_EQ(scraped->lora.running, (std::vector<std::string>{"sql", "chat"}));
  EXPECT_EQ(scraped->lora.waiting, (std::vector<std::string>{"sql", "code"}));
  EXPECT_TRUE(scraped->lora.active("code"));
  EXPECT_FALSE(scraped->lora.active("other"));
  EXPECT_TRUE(scraped->lora.has_free_slot());  // sql, chat, code: 3 of 4
}

// vLLM keeps every label combination it has seen, each valued with the time it was last
// seen: the newest is the state; an endpoint without the gauge reports nothing.
TEST(EngineMetricsText, TheNewestLoraSeriesIsTheState) {
  const std::string text =
      "vllm:num_requests_waiting 0\nvllm:num_requests_running 1\n"
      "vllm:kv_cache_usage_perc 0.1\n"
      "vllm:lora_requests_info{max_lora=\"2\",running_lora_adapters=\"a,b\","
      "waiting_lora_adapters=\"\"} 1.7672256005e+09\n"
      "vllm:lora_requests_info{max_lora=\"2\",running_lora_adapters=\"a\","
      "waiting_lora_adapters=\"c\"} 1.7672256e+09\n";
  auto parsed = metrics::parse_prometheus_text(text);
  ASSERT_TRUE(parsed) << parsed.error();
  auto scraped = route::read_scrape(*parsed);
  ASSERT_TRUE(scraped) << scraped.error();
  EXPECT_EQ(scraped->lora.running, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(scraped->lora.waiting.empty());
  EXPECT_FALSE(scraped->lora.has_free_slot());  // a and b fill both slots
  EXPECT_TRUE(scraped->lora.active("b"));
  auto none = metrics::parse_prometheus_text(
      "vllm:num_requests_waiting 0\nvllm:num_requests_running 0\nvllm:kv_cache_usage_perc 0\n");
  ASSERT_TRUE(none);
  EXPECT_EQ(route::read_scrape(*none)->lora.max_loras, 0u);
  EXPECT_TRUE(route::read_scrape(*none)->lora.has_free_slot());
}

}  // namespace
}  // namespace kvgate::engine_server
