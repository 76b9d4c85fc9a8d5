// Warm-up before traffic, end to end: the gateway (the same Gateway `kvgate serve` runs)
// learns the pool's shared system prompts from the requests it routes; an engine started
// later and added to the pool at run time (PoolRuntime::add_endpoint, what the admin API
// and the autoscaler call) is warmed with them before it is routed to. With warm-up on,
// its first real requests find their system prompt in its prefix cache; with it off they
// do not.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <thread>

#include "gateway/common/config.h"
#include "gateway/data/pool_runtime.h"
#include "gateway/gateway.h"
#include "support/engine_fixture.h"
#include "support/gateway_fixture.h"

namespace kvgate::testing {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace gateway_warmup_test {

std::string tokenizer_dir() { return source_dir() + "/.deps/fixtures/qwen3"; }

std::unique_ptr<EngineProcess> start_engine() {
  return std::make_unique<EngineProcess>(
      std::vector<std::string>{"--time-scale", "0.01", "--model", "sim", "--tokenizer",
                               tokenizer_dir(), "--block-size", "16"});
}

std::string warmup_yaml(const std::string& engine_url, bool warmup) {
  std::string y =
      "listeners:\n  - address: 127.0.0.1\n    port: 0\n"
      "timeouts: {header_ms: 2000, drain_ms: 2000, connect_ms: 1000}\n"
      "pools:\n  sim:\n    block_size: 16\n    scrape_interval_ms: 50\n"
      "    tokenizer: " +
      tokenizer_dir() + "/tokenizer.json\n    router: {policy: load}\n";
  if (warmup) y += "    warmup: {prefixes: 8, budget_ms: 10000, concurrency: 2}\n";
  return y + "    endpoints: [" + engine_url + "]\nmodels:\n  - name: sim\n    pool: sim\n";
}

struct Answer {
  std::string endpoint;
  int64_t cached_tokens = -1;
};

Answer complete(uint16_t port, const std::string& prompt) {
  auto r = io::http_fetch("POST", "http://127.0.0.1:" + std::to_string(port) + "/v1/completions",
                          R"({"model":"sim","prompt":")" + prompt + R"(","max_tokens":2})",
                          {{"Content-Type", "application/json"}}, std::chrono::seconds(30));
  if (!r || r->status != 200) {
    ADD_FAILURE() << (r ? r->body : r.error());
    return {};
  }
  Answer a;
  if (const std::string* e = r->header("x-kvgate-endpoint")) a.endpoint = *e;
  a.cached_tokens =
      parse_json(r->body).at("usage").at("prompt_tokens_details").at("cached_tokens").as_int64();
  return a;
}

double metric(uint16_t port, const std::string& name, const metrics::Labels& labels) {
  auto r = io::http_fetch("GET", "http://127.0.0.1:" + std::to_string(port) + "/metrics");
  if (!r) return -1;
  auto m = metrics::parse_prometheus_text(r->body);
  return m ? m->value(name, labels).value_or(0) : -1;
}

// Three customers, each with a long system prompt (~200 tokens: 12 full blocks) that
// shares nothing with the others.
std::string system_prompt(int customer) {
  return words_prompt("customer" + std::to_string(customer) + "rule", 60);
}

// Runs the scenario; returns the cached tokens of the first request of each customer that
// the new engine served.
std::vector<int64_t> run(bool warmup) {
  auto old_engine = start_engine();
  auto cfg = gateway::parse_gateway_config(warmup_yaml(old_engine->url, warmup), "warmup.yaml");
  EXPECT_TRUE(cfg) << cfg.error();
  if (!cfg) return {};
  auto gw = gateway::Gateway::start(std::move(*cfg));
  EXPECT_TRUE(gw) << gw.error();
  if (!gw) return {};
  const uint16_t port = (*gw)->ports()[0];
  gateway::PoolRuntime* pool = (*gw)->pool("sim");

  // Traffic the gateway learns the hot prefixes from: each system prompt three times.
  for (int q = 0; q < 3; ++q) {
    for (int c = 0; c < 3; ++c) {
      Answer a = complete(port, system_prompt(c) + "question" + std::to_string(q));
      EXPECT_EQ(a.endpoint, old_engine->url);
    }
  }

  // A new engine, added at run time.
  auto new_engine = start_engine();
  auto id = pool->add_endpoint_sync({.url = new_engine->url}, std::nullopt);
  EXPECT_TRUE(id) << id.error();
  if (warmup) {
    // Admitted once its warm-up is over (the status and metrics say so).
    const metrics::Labels done{{"pool", "sim"}, {"outcome", "complete"}};
    for (int i = 0; i < 500 && metric(port, "kvgate_warmups_total", done) < 1; ++i) {
      // Waits for the warm-up's requests to the new kvgate engine child to be answered.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_EQ(metric(port, "kvgate_warmups_total", done), 1);
    EXPECT_EQ(metric(port, "kvgate_warmup_requests_total", {{"pool", "sim"}, {"result", "ok"}}),
              3);  // the three system prompts, nothing else was shared
    EXPECT_GE(metric(port, "kvgate_warmup_prompt_tokens_total", {{"pool", "sim"}}), 3 * 160);
    auto status = parse_json((*gw)->warmup_status_json());
    const auto& runs = status.at("pools").at(0).at("runs").as_array();
    EXPECT_EQ(runs.size(), 1u);
    if (!runs.empty()) {
      EXPECT_EQ(runs[0].at("url").as_string(), new_engine->url);
      EXPECT_EQ(runs[0].at("state").as_string(), "complete");
      EXPECT_EQ(runs[0].at("planned").as_int64(), 3);
    }
  } else {
    EXPECT_EQ(metric(port, "kvgate_warmups_total", {{"pool", "sim"}, {"outcome", "complete"}}), 0);
  }

  // The old engine leaves (drained and removed): the new one serves everything now.
  auto removed = pool->remove_endpoint_sync(0, std::chrono::seconds(5));
  EXPECT_TRUE(removed && *removed);
  std::vector<int64_t> cached;
  for (int c = 0; c < 3; ++c) {
    Answer a = complete(port, system_prompt(c) + "a brand new question");
    EXPECT_EQ(a.endpoint, new_engine->url);
    cached.push_back(a.cached_tokens);
  }
  return cached;
}

TEST(GatewayWarmup, ANewEngineHitsItsPrefixCacheOnItsFirstRequestsWithWarmupOn) {
  for (int64_t cached : run(/*warmup=*/true)) EXPECT_GE(cached, 160);
}

TEST(GatewayWarmup, ANewEngineStartsColdWithWarmupOff) {
  for (int64_t cached : run(/*warmup=*/false)) EXPECT_EQ(cached, 0);
}

}  // namespace gateway_warmup_test
}  // namespace kvgate::testing
