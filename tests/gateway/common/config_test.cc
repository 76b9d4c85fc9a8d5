#include "gateway/common/config.h"

#include <gtest/gtest.h>

namespace kvgate::gateway {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace config_test {

constexpr const char* kGood = R"(
listeners:
  - address: 127.0.0.1
    port: 0
timeouts:
  stream_ms: 120000
retries:
  max_attempts: 2
pools:
  main:
    block_size: 16
    router:
      policy: round-robin
    endpoints:
      - url: http://127.0.0.1:8001
        role: both
        zone: z1
        rack: r1
        labels: {gpu: h100}
      - http://127.0.0.1:8002
models:
  - name: Qwen/Qwen3-0.6B
    aliases: [qwen3]
    pool: main
)";

TEST(GatewayConfig, ParsesAFullConfig) {
  auto c = parse_gateway_config(kGood, "/etc/kvgate/fleet.yaml");
  ASSERT_TRUE(c) << c.error();
  ASSERT_EQ(c->listeners.size(), 1u);
  EXPECT_EQ(c->listeners[0].port, 0);
  EXPECT_EQ(c->timeouts.stream.count(), 120000);
  EXPECT_EQ(c->timeouts.drain.count(), 30000);  // default
  EXPECT_EQ(c->retries.max_attempts, 2);
  ASSERT_EQ(c->pools.size(), 1u);
  const PoolConfig& p = c->pools[0];
  EXPECT_EQ(p.router.policy.name, "round-robin");
  ASSERT_EQ(p.endpoints.size(), 2u);
  EXPECT_EQ(p.endpoints[0].zone, "z1");
  EXPECT_EQ(p.endpoints[0].rack, "r1");
  EXPECT_EQ(p.endpoints[0].label("gpu"), "h100");
  EXPECT_EQ(p.endpoints[1].url, "http://127.0.0.1:8002");
  ASSERT_NE(c->find_model("qwen3"), nullptr);
  EXPECT_EQ(c->find_model("qwen3")->name, "Qwen/Qwen3-0.6B");
  EXPECT_EQ(c->find_model("Qwen/Qwen3-0.6B")->served_name, "Qwen/Qwen3-0.6B");
  EXPECT_EQ(c->find_model("nope"), nullptr);
}

std::string error_of(const std::string& yaml) {
  auto c = parse_gateway_config(yaml, "f.yaml");
  return c ? std::string("OK") : c.error();
}

TEST(GatewayConfig, ErrorsNameFileLineAndField) {
  std::string bad_url = std::string(kGood);
  bad_url.replace(bad_url.find("http://127.0.0.1:8002"), 21, "127.0.0.1:8002");
  EXPECT_EQ(error_of(bad_url),
            "f.yaml:20:9: pools.main.endpoints[1]: expected http://host:port, got "
            "'127.0.0.1:8002'");

  std::string typo = std::string(kGood);
  typo.replace(typo.find("max_attempts"), 12, "max_atempts");
  EXPECT_EQ(error_of(typo), "f.yaml:8:3: retries.max_atempts: unknown field");

  std::string policy = std::string(kGood);
  policy.replace(policy.find("round-robin"), 11, "round-rbin");
  std::string e = error_of(policy);
  EXPECT_TRUE(e.starts_with("f.yaml:13:7: pools.main.router: ")) << e;

  std::string pool = std::string(kGood);
  pool.replace(pool.find("pool: main"), 10, "pool: other");
  EXPECT_EQ(error_of(pool), "f.yaml:24:11: models[0].pool: no pool named 'other'");

  std::string port = std::string(kGood);
  port.replace(port.find("port: 0"), 7, "port: 70000");
  EXPECT_EQ(error_of(port), "f.yaml:4:11: listeners[0].port: 70000 is outside [0, 65535]");

  EXPECT_TRUE(error_of("pools: [").starts_with("f.yaml:")) << error_of("pools: [");
  EXPECT_EQ(error_of("listeners: []\n"), "f.yaml:1:12: listeners: expected a non-empty list");
  EXPECT_EQ(error_of("- a\n"), "f.yaml: expected a YAML mapping");
}

// vLLM's --chat-template-content-format of the pool's engines.
TEST(GatewayConfig, ChatTemplateContentFormat) {
  using F = tokenizer::ChatRenderOptions::ContentFormat;
  auto defaults = parse_gateway_config(kGood, "f.yaml");
  ASSERT_TRUE(defaults) << defaults.error();
  EXPECT_EQ(defaults->pools[0].chat_template_content_format, F::kAuto);
  std::string with = std::string(kGood);
  with.replace(with.find("    block_size: 16"), 18,
               "    block_size: 16\n    chat_template_content_format: string");
  auto c = parse_gateway_config(with, "f.yaml");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->pools[0].chat_template_content_format, F::kString);
  with.replace(with.find("format: string"), 14, "format: parts");
  EXPECT_EQ(error_of(with),
            "f.yaml:12:35: pools.main.chat_template_content_format: expected auto, string or "
            "openai");
}

// A LoRA adapter is a model of its base's pool, served under its own name.
TEST(GatewayConfig, AdaptersAreModelsOfTheirBasesPool) {
  auto c = parse_gateway_config(std::string(kGood) +
                                    "adapters:\n"
                                    "  - {name: sql, base: Qwen/Qwen3-0.6B, source: /a/sql, "
                                    "max_replicas: 3}\n"
                                    "  - {name: chat, base: Qwen/Qwen3-0.6B}\n",
                                "f.yaml");
  ASSERT_TRUE(c) << c.error();
  const ModelConfig* sql = c->find_model("sql");
  ASSERT_NE(sql, nullptr);
  EXPECT_EQ(sql->pool, "main");
  EXPECT_EQ(sql->served_name, "sql");
  EXPECT_EQ(sql->base, "Qwen/Qwen3-0.6B");
  EXPECT_EQ(sql->adapter_source, "/a/sql");
  EXPECT_EQ(sql->max_replicas, 3u);
  EXPECT_EQ(c->find_model("chat")->max_replicas, 1u);
  EXPECT_EQ(c->find_model("qwen3")->base, "");
  EXPECT_EQ(error_of(std::string(kGood) + "adapters:\n  - {name: sql, base: qwen3}\n"),
            "f.yaml:26:23: adapters[0].base: no model named 'qwen3' (an adapter's base is a "
            "model of `models:`)");
  EXPECT_EQ(error_of(std::string(kGood) + "adapters:\n  - {name: qwen3, base: Qwen/Qwen3-0.6B}\n"),
            "f.yaml:26:12: adapters[0].name: 'qwen3' is defined twice");
  EXPECT_EQ(error_of(std::string(kGood) + "adapters:\n  - {name: a, base: Qwen/Qwen3-0.6B, "
                                          "max_replicas: 0}\n"),
            "f.yaml:26:52: adapters[0].max_replicas: 0 is outside [1, 100000]");
}

// A pool's lora_placement: a section turns it on, with defaults for what it leaves out;
// without it the pool places nothing. Its adapters need a source to be loaded from.
TEST(GatewayConfig, LoraPlacementIsAPoolSection) {
  auto with = [](std::string section) {
    std::string yaml = kGood;
    const std::string at = "    block_size: 16\n";
    yaml.replace(yaml.find(at), at.size(), at + "    lora_placement: " + section + "\n");
    return yaml;
  };
  auto c = parse_gateway_config(kGood, "f.yaml");
  ASSERT_TRUE(c) << c.error();
  EXPECT_FALSE(c->pools[0].lora_placement.enabled);
  c = parse_gateway_config(with("{interval_ms: 500, idle_unload_ms: 60000, replica_demand: 2.5, "
                                "backoff_ms: 0, max_wait_ms: 2000, default_slots: 2}"),
                           "f.yaml");
  ASSERT_TRUE(c) << c.error();
  const route::LoraPlacementConfig& l = c->pools[0].lora_placement;
  EXPECT_TRUE(l.enabled);
  EXPECT_EQ(l.interval, 500 * kMillisecond);
  EXPECT_EQ(l.idle_unload, 60 * kSecond);
  EXPECT_EQ(l.replica_demand, 2.5);
  EXPECT_EQ(l.load_backoff, 0);
  EXPECT_EQ(l.max_wait, 2 * kSecond);
  EXPECT_EQ(l.default_slots, 2u);
  c = parse_gateway_config(with("{enabled: false}"), "f.yaml");
  ASSERT_TRUE(c) << c.error();
  EXPECT_FALSE(c->pools[0].lora_placement.enabled);
  EXPECT_EQ(c->pools[0].lora_placement.interval, kSecond);  // the default
  EXPECT_EQ(error_of(with("{replica_demand: 0}")),
            "f.yaml:12:38: pools.main.lora_placement.replica_demand: expected requests per "
            "second per replica, > 0");
  EXPECT_NE(error_of(with("{every_ms: 5}")).find("pools.main.lora_placement.every_ms"),
            std::string::npos);
  const std::string no_source =
      error_of(with("{}") + "adapters:\n  - {name: chat, base: Qwen/Qwen3-0.6B}\n");
  EXPECT_NE(no_source.find("adapters[0].source: missing: pool main places its adapters"),
            std::string::npos)
      << no_source;
  EXPECT_EQ(
      error_of(with("{enabled: false}") + "adapters:\n  - {name: chat, base: Qwen/Qwen3-0.6B}\n"),
      "OK");
}

TEST(GatewayConfig, DuplicateModelNamesAndMissingFilesAreErrors) {
  std::string dup = std::string(kGood) + "  - name: qwen3\n    pool: main\n";
  EXPECT_EQ(error_of(dup), "f.yaml:25:11: models[1].name: 'qwen3' is defined twice");
  std::string tok = std::string(kGood);
  tok.replace(tok.find("block_size: 16"), 14, "tokenizer: nowhere/tokenizer.json");
  EXPECT_EQ(error_of(tok),
            "f.yaml:11:16: pools.main.tokenizer: no such file: nowhere/tokenizer.json");
}

}  // namespace config_test
}  // namespace kvgate::gateway

namespace kvgate::gateway {
namespace config_test {

TEST(GatewayConfig, RateLimitsSection) {
  auto defaults = parse_gateway_config(kGood, "f.yaml");
  ASSERT_TRUE(defaults) << defaults.error();
  EXPECT_EQ(defaults->rate_limits.store, RateLimitConfig::Store::kMemory);
  EXPECT_FALSE(defaults->rate_limits.fail_closed);

  std::string redis =
      "rate_limits:\n  store: redis\n  redis: {host: 10.0.0.5, port: 6380, "
      "password: s3cret}\n  on_store_failure: fail-closed\n" +
      std::string(kGood);
  auto c = parse_gateway_config(redis, "f.yaml");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->rate_limits.store, RateLimitConfig::Store::kRedis);
  EXPECT_EQ(c->rate_limits.redis.host, "10.0.0.5");
  EXPECT_EQ(c->rate_limits.redis.port, 6380);
  EXPECT_EQ(c->rate_limits.redis.password, "s3cret");
  EXPECT_TRUE(c->rate_limits.fail_closed);

  EXPECT_EQ(error_of("rate_limits:\n  store: disk\n" + std::string(kGood)),
            "f.yaml:2:10: rate_limits.store: expected memory or redis, got 'disk'");
  EXPECT_EQ(error_of("rate_limits:\n  on_store_failure: open\n" + std::string(kGood)),
            "f.yaml:2:21: rate_limits.on_store_failure: expected fail-open or fail-closed, got "
            "'open'");
  EXPECT_EQ(error_of("rate_limits:\n  redis: {prt: 1}\n" + std::string(kGood)),
            "f.yaml:2:11: rate_limits.redis.prt: unknown field");
  EXPECT_EQ(error_of("rate_limits:\n  redis: {port: 0}\n" + std::string(kGood)),
            "f.yaml:2:17: rate_limits.redis.port: 0 is outside [1, 65535]");
}

TEST(GatewayConfig, ClusterSection) {
  auto defaults = parse_gateway_config(kGood, "f.yaml");
  ASSERT_TRUE(defaults) << defaults.error();
  EXPECT_FALSE(defaults->cluster);
  auto c = parse_gateway_config(
      "cluster:\n  redis: {host: 10.0.0.6, port: 6390, timeout_ms: 80}\n  replica_id: gw-a\n"
      "  sync: off\n  flush_ms: 3\n  max_len: 5000\n" +
          std::string(kGood),
      "f.yaml");
  ASSERT_TRUE(c) << c.error();
  ASSERT_TRUE(c->cluster);
  EXPECT_EQ(c->cluster->redis.host, "10.0.0.6");
  EXPECT_EQ(c->cluster->redis.port, 6390);
  EXPECT_EQ(c->cluster->redis.timeout, std::chrono::milliseconds(80));
  EXPECT_EQ(c->cluster->replica_id, "gw-a");
  EXPECT_FALSE(c->cluster->sync);
  EXPECT_EQ(c->cluster->flush, std::chrono::milliseconds(3));
  EXPECT_EQ(c->cluster->flush_max, std::chrono::milliseconds(25));  // the default
  EXPECT_EQ(c->cluster->flush_batch, 8u);
  EXPECT_EQ(c->cluster->max_len, 5000);
  auto on = parse_gateway_config("cluster: {sync: on}\n" + std::string(kGood), "f.yaml");
  ASSERT_TRUE(on) << on.error();
  EXPECT_TRUE(on->cluster->sync);
  EXPECT_EQ(on->cluster->poll, std::chrono::milliseconds(5));
  EXPECT_TRUE(on->cluster->fleet_fairness);  // the default
  // poll_ms 0: the next read follows a reply with entries at once.
  auto at_once = parse_gateway_config("cluster: {poll_ms: 0}\n" + std::string(kGood), "f.yaml");
  ASSERT_TRUE(at_once) << at_once.error();
  EXPECT_EQ(at_once->cluster->poll, std::chrono::milliseconds(0));
  EXPECT_EQ(error_of("cluster: {poll_ms: -1}\n" + std::string(kGood)),
            "f.yaml:1:20: cluster.poll_ms: -1 is outside [0, 86400000]");
  auto own =
      parse_gateway_config("cluster: {fleet_fairness: off}\n" + std::string(kGood), "f.yaml");
  ASSERT_TRUE(own) << own.error();
  EXPECT_FALSE(own->cluster->fleet_fairness);
  EXPECT_EQ(error_of("cluster: {fleet_fairness: some}\n" + std::string(kGood)),
            "f.yaml:1:27: cluster.fleet_fairness: expected on or off, got 'some'");
  EXPECT_EQ(error_of("cluster: {sync: maybe}\n" + std::string(kGood)),
            "f.yaml:1:17: cluster.sync: expected on or off, got 'maybe'");
  EXPECT_EQ(error_of("cluster: {replicas: 3}\n" + std::string(kGood)),
            "f.yaml:1:11: cluster.replicas: unknown field");
  EXPECT_EQ(error_of("cluster:\n  redis: {port: 70000}\n" + std::string(kGood)),
            "f.yaml:2:17: cluster.redis.port: 70000 is outside [1, 65535]");
}

// The flush rule's fields: flush_batch requests or flush_max_ms of waiting, checked every
// flush_ms; flush_max_ms at least flush_ms, and a config without it keeps a longer
// flush_ms valid.
TEST(GatewayConfig, ClusterFlushRule) {
  auto defaults = parse_gateway_config("cluster: {sync: on}\n" + std::string(kGood), "f.yaml");
  ASSERT_TRUE(defaults) << defaults.error();
  EXPECT_EQ(defaults->cluster->flush, std::chrono::milliseconds(5));
  EXPECT_EQ(defaults->cluster->flush_max, std::chrono::milliseconds(25));
  EXPECT_EQ(defaults->cluster->flush_batch, 8u);

  auto set = parse_gateway_config(
      "cluster: {flush_ms: 2, flush_max_ms: 40, flush_batch: 32}\n" + std::string(kGood), "f.yaml");
  ASSERT_TRUE(set) << set.error();
  EXPECT_EQ(set->cluster->flush, std::chrono::milliseconds(2));
  EXPECT_EQ(set->cluster->flush_max, std::chrono::milliseconds(40));
  EXPECT_EQ(set->cluster->flush_batch, 32u);

  // flush_max_ms equal to flush_ms: every check publishes (the rule before batching).
  auto every = parse_gateway_config(
      "cluster: {flush_ms: 5, flush_max_ms: 5}\n" + std::string(kGood), "f.yaml");
  ASSERT_TRUE(every) << every.error();
  EXPECT_EQ(every->cluster->flush_max, std::chrono::milliseconds(5));

  // An older config with a flush_ms above the default flush_max_ms stays valid: its events
  // wait one flush_ms, as they did.
  auto old = parse_gateway_config("cluster: {flush_ms: 50}\n" + std::string(kGood), "f.yaml");
  ASSERT_TRUE(old) << old.error();
  EXPECT_EQ(old->cluster->flush_max, std::chrono::milliseconds(50));

  EXPECT_EQ(error_of("cluster: {flush_ms: 10, flush_max_ms: 5}\n" + std::string(kGood)),
            "f.yaml:1:39: cluster.flush_max_ms: must be at least flush_ms (10)");
  EXPECT_EQ(error_of("cluster: {flush_max_ms: 0}\n" + std::string(kGood)),
            "f.yaml:1:25: cluster.flush_max_ms: 0 is outside [1, 86400000]");
  EXPECT_EQ(error_of("cluster: {flush_batch: 0}\n" + std::string(kGood)),
            "f.yaml:1:24: cluster.flush_batch: 0 is outside [1, 1000000]");
  EXPECT_EQ(error_of("cluster: {flush_batch: -3}\n" + std::string(kGood)),
            "f.yaml:1:24: cluster.flush_batch: -3 is outside [1, 1000000]");
}

// sync_mode: cycle (the default) or blocking; cycle_idle_max_ms bounds the idle wait of
// cycle mode, at least flush_max_ms, and left out follows a larger flush_max_ms.
TEST(GatewayConfig, ClusterSyncMode) {
  auto defaults = parse_gateway_config("cluster: {sync: on}\n" + std::string(kGood), "f.yaml");
  ASSERT_TRUE(defaults) << defaults.error();
  EXPECT_EQ(defaults->cluster->sync_mode, ClusterConfig::SyncMode::kCycle);
  EXPECT_EQ(defaults->cluster->cycle_idle_max, std::chrono::milliseconds(100));

  auto cycle = parse_gateway_config(
      "cluster: {sync_mode: cycle, cycle_idle_max_ms: 400}\n" + std::string(kGood), "f.yaml");
  ASSERT_TRUE(cycle) << cycle.error();
  EXPECT_EQ(cycle->cluster->sync_mode, ClusterConfig::SyncMode::kCycle);
  EXPECT_EQ(cycle->cluster->cycle_idle_max, std::chrono::milliseconds(400));

  auto blocking =
      parse_gateway_config("cluster: {sync_mode: blocking}\n" + std::string(kGood), "f.yaml");
  ASSERT_TRUE(blocking) << blocking.error();
  EXPECT_EQ(blocking->cluster->sync_mode, ClusterConfig::SyncMode::kBlocking);

  // Equal to flush_max_ms: the wait never lengthens. Left out with a flush_max_ms above
  // 100: the flush_max_ms.
  auto fixed = parse_gateway_config(
      "cluster: {sync_mode: cycle, cycle_idle_max_ms: 25}\n" + std::string(kGood), "f.yaml");
  ASSERT_TRUE(fixed) << fixed.error();
  EXPECT_EQ(fixed->cluster->cycle_idle_max, std::chrono::milliseconds(25));
  auto slow = parse_gateway_config("cluster: {flush_max_ms: 300}\n" + std::string(kGood), "f.yaml");
  ASSERT_TRUE(slow) << slow.error();
  EXPECT_EQ(slow->cluster->cycle_idle_max, std::chrono::milliseconds(300));

  // A cycle's replies: read as they come by default, or deferred to the next cycle.
  EXPECT_EQ(defaults->cluster->cycle_replies, ClusterConfig::CycleReplies::kPrompt);
  auto prompt =
      parse_gateway_config("cluster: {cycle_replies: prompt}\n" + std::string(kGood), "f.yaml");
  ASSERT_TRUE(prompt) << prompt.error();
  EXPECT_EQ(prompt->cluster->cycle_replies, ClusterConfig::CycleReplies::kPrompt);
  auto deferred =
      parse_gateway_config("cluster: {cycle_replies: deferred}\n" + std::string(kGood), "f.yaml");
  ASSERT_TRUE(deferred) << deferred.error();
  EXPECT_EQ(deferred->cluster->cycle_replies, ClusterConfig::CycleReplies::kDeferred);
  EXPECT_EQ(error_of("cluster: {cycle_replies: later}\n" + std::string(kGood)),
            "f.yaml:1:26: cluster.cycle_replies: expected deferred or prompt, got 'later'");

  EXPECT_EQ(error_of("cluster: {sync_mode: polling}\n" + std::string(kGood)),
            "f.yaml:1:22: cluster.sync_mode: expected blocking or cycle, got 'polling'");
  EXPECT_EQ(error_of("cluster: {cycle_idle_max_ms: 10}\n" + std::string(kGood)),
            "f.yaml:1:30: cluster.cycle_idle_max_ms: must be at least flush_max_ms (25)");
  EXPECT_EQ(error_of("cluster: {cycle_idle_max_ms: 0}\n" + std::string(kGood)),
            "f.yaml:1:30: cluster.cycle_idle_max_ms: 0 is outside [1, 86400000]");
}

constexpr const char* kLive = R"(
pools:
  main:
    scrape_interval_ms: 100
    endpoints:
      - url: http://127.0.0.1:8001
        kv_events: {publisher: tcp://127.0.0.1:5557, replay: tcp://127.0.0.1:5558}
      - http://127.0.0.1:8002
models:
  - name: m
    pool: main
)";

std::string live_error(const std::string& yaml) {
  auto c = parse_gateway_config(yaml, "f.yaml");
  return c ? std::string() : c.error();
}

TEST(GatewayConfigLive, KvEventsAndScrapeInterval) {
  auto c = parse_gateway_config(kLive, "f.yaml");
  ASSERT_TRUE(c) << c.error();
  const PoolConfig& p = c->pools[0];
  EXPECT_EQ(p.scrape_interval, std::chrono::milliseconds(100));
  ASSERT_EQ(p.kv_events.size(), 2u);
  ASSERT_TRUE(p.kv_events[0]);
  EXPECT_EQ(p.kv_events[0]->publisher, "tcp://127.0.0.1:5557");
  EXPECT_EQ(p.kv_events[0]->replay, "tcp://127.0.0.1:5558");
  EXPECT_FALSE(p.kv_events[1]);
  EXPECT_TRUE(p.kv_events_bind.empty());

  std::string slow = kLive;
  slow.replace(slow.find("100"), 3, "5000");
  EXPECT_EQ(live_error(slow),
            "f.yaml:4:25: pools.main.scrape_interval_ms: 5000 is outside [50, 1000]");
  std::string bad = kLive;
  bad.replace(bad.find("tcp://127.0.0.1:5557"), 20, "127.0.0.1:5557");
  EXPECT_EQ(live_error(bad),
            "f.yaml:7:32: pools.main.endpoints[0].kv_events.publisher: expected tcp://host:port");
  std::string typo = kLive;
  typo.replace(typo.find("replay"), 6, "replya");
  EXPECT_EQ(live_error(typo),
            "f.yaml:7:54: pools.main.endpoints[0].kv_events.replya: unknown field");
}

TEST(GatewayConfigLive, BindModeNeedsDistinctTopicsAndNoPublisher) {
  std::string bind = kLive;
  bind.replace(bind.find("    endpoints:"), 0, "    kv_events_bind: tcp://*:5557\n");
  EXPECT_EQ(live_error(bind),
            "f.yaml:8:32: pools.main.endpoints[0].kv_events.publisher: not used with the pool's "
            "kv_events_bind (engines connect to the gateway)");
  std::string topics = bind;
  const std::string sources = "{publisher: tcp://127.0.0.1:5557, replay: tcp://127.0.0.1:5558}";
  topics.replace(topics.find(sources), sources.size(), "{topic: a}");
  topics.replace(topics.find("- http://127.0.0.1:8002"), 23,
                 "- url: http://127.0.0.1:8002\n        kv_events: {topic: a}");
  EXPECT_TRUE(live_error(topics).starts_with(
      "f.yaml:10:20: pools.main.endpoints[1].kv_events.topic: topic 'a' used twice"))
      << live_error(topics);
  topics.replace(topics.rfind("{topic: a}"), 10, "{topic: b}");
  auto c = parse_gateway_config(topics, "f.yaml");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->pools[0].kv_events_bind, "tcp://*:5557");
  EXPECT_EQ(c->pools[0].kv_events[1]->topic, "b");
}

TEST(GatewayConfig, RouterSaturationThresholds) {
  std::string y = std::string(kGood);
  y.replace(y.find("      policy: round-robin\n"), 26,
            "      policy: round-robin\n      saturation: {queue_threshold: 3, kv_threshold: 0.9, "
            "critical_max_waiting: 20, shed: false, metrics_max_age: 1500ms}\n");
  auto c = parse_gateway_config(y, "f.yaml");
  ASSERT_TRUE(c) << c.error();
  const route::SaturationConfig& s = c->pools[0].router.saturation;
  EXPECT_EQ(s.queue_threshold, 3);
  EXPECT_EQ(s.kv_threshold, 0.9);
  EXPECT_EQ(s.critical_max_waiting, 20u);
  EXPECT_FALSE(s.shed);
  EXPECT_EQ(s.metrics_max_age, 1500 * kMillisecond);

  std::string bad = std::string(kGood);
  bad.replace(bad.find("      policy: round-robin\n"), 26,
              "      policy: round-robin\n      saturation: {queue_threshold: 0}\n");
  EXPECT_NE(error_of(bad).find("saturation.queue_threshold must be > 0"), std::string::npos)
      << error_of(bad);
  std::string typo = std::string(kGood);
  typo.replace(typo.find("      policy: round-robin\n"), 26,
               "      policy: round-robin\n      saturation: {queue_treshold: 3}\n");
  EXPECT_NE(error_of(typo).find("pools.main.router.saturation.queue_treshold: unknown field"),
            std::string::npos)
      << error_of(typo);
}

}  // namespace config_test
}  // namespace kvgate::gateway

namespace kvgate::gateway {
namespace config_test {

TEST(GatewayConfig, RouterPdSection) {
  std::string yaml = kGood;
  const std::string at = "      policy: round-robin\n";
  yaml.replace(yaml.find(at), at.size(),
               at + "      pd: {mode: on, locality_weight: 32, local_prefill_max_tokens: 256}\n");
  auto c = parse_gateway_config(yaml, "f.yaml");
  ASSERT_TRUE(c) << c.error();
  const route::PdConfig& pd = c->pools[0].router.pd;
  EXPECT_EQ(pd.mode, route::PdMode::kOn);
  EXPECT_EQ(pd.locality_weight, 32);
  EXPECT_EQ(pd.local_prefill_max_tokens, 256u);
  // Defaults without the section.
  auto d = parse_gateway_config(kGood, "f.yaml");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->pools[0].router.pd.mode, route::PdMode::kAuto);

  std::string bad = kGood;
  bad.replace(bad.find(at), at.size(), at + "      pd: {mode: sometimes}\n");
  EXPECT_NE(error_of(bad).find("pools.main.router.pd.mode: expected auto, off or on"),
            std::string::npos)
      << error_of(bad);
  bad = kGood;
  bad.replace(bad.find(at), at.size(), at + "      pd: {locality: 3}\n");
  EXPECT_NE(error_of(bad).find("pools.main.router.pd.locality: unknown field"), std::string::npos)
      << error_of(bad);
}

std::string with_pool_extra(const std::string& extra) {
  return std::string(R"(
pools:
  main:
)") + extra +
         R"(
    endpoints: [http://127.0.0.1:8001]
models:
  - {name: m, pool: main}
)";
}

TEST(GatewayConfigWarmup, OffByDefaultOnWithASectionAndValidated) {
  auto off = parse_gateway_config(with_pool_extra(""), "f.yaml");
  ASSERT_TRUE(off) << off.error();
  EXPECT_FALSE(off->pools[0].warmup.enabled);

  auto on = parse_gateway_config(
      with_pool_extra("    warmup: {prefixes: 32, budget_ms: 5000, concurrency: 8, "
                      "ready_timeout_ms: 60000}"),
      "f.yaml");
  ASSERT_TRUE(on) << on.error();
  const kv::WarmupConfig& w = on->pools[0].warmup;
  EXPECT_TRUE(w.enabled);
  EXPECT_EQ(w.prefixes, 32u);
  EXPECT_EQ(w.budget, 5 * kSecond);
  EXPECT_EQ(w.concurrency, 8u);
  EXPECT_EQ(on->pools[0].warmup_ready_timeout.count(), 60000);

  auto disabled = parse_gateway_config(with_pool_extra("    warmup: {enabled: false}"), "f.yaml");
  ASSERT_TRUE(disabled) << disabled.error();
  EXPECT_FALSE(disabled->pools[0].warmup.enabled);

  auto bad = parse_gateway_config(with_pool_extra("    warmup: {concurrency: 0}"), "f.yaml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("pools.main.warmup.concurrency"), std::string::npos) << bad.error();
  auto typo = parse_gateway_config(with_pool_extra("    warmup: {prefixs: 3}"), "f.yaml");
  ASSERT_FALSE(typo);
  EXPECT_NE(typo.error().find("prefixs"), std::string::npos) << typo.error();
}

TEST(GatewayConfigTokenize, ModeAloneOrWithTheCallsBudgetAndCache) {
  auto def = parse_gateway_config(with_pool_extra(""), "f.yaml");
  ASSERT_TRUE(def) << def.error();
  EXPECT_EQ(def->pools[0].tokenize.mode, TokenizeMode::kAuto);
  EXPECT_EQ(def->pools[0].tokenize.timeout.count(), 50);
  EXPECT_EQ(def->pools[0].tokenize.cache_bytes, size_t{64} << 20);

  auto engine = parse_gateway_config(with_pool_extra("    tokenize: engine"), "f.yaml");
  ASSERT_TRUE(engine) << engine.error();
  EXPECT_EQ(engine->pools[0].tokenize.mode, TokenizeMode::kEngine);

  auto full = parse_gateway_config(
      with_pool_extra("    tokenize: {mode: local, timeout_ms: 120, cache_mb: 8}"), "f.yaml");
  ASSERT_TRUE(full) << full.error();
  EXPECT_EQ(full->pools[0].tokenize.mode, TokenizeMode::kLocal);
  EXPECT_EQ(full->pools[0].tokenize.timeout.count(), 120);
  EXPECT_EQ(full->pools[0].tokenize.cache_bytes, size_t{8} << 20);
  EXPECT_EQ(to_string(TokenizeMode::kEngine), "engine");

  for (const auto& [extra, field] : std::vector<std::pair<std::string, std::string>>{
           {"    tokenize: remote", "pools.main.tokenize"},
           {"    tokenize: {mode: nope}", "pools.main.tokenize.mode"},
           {"    tokenize: {timeout_ms: 0}", "pools.main.tokenize.timeout_ms"},
           {"    tokenize: {timeout: 5}", "timeout"},
           {"    tokenize: [engine]", "pools.main.tokenize"}}) {
    auto bad = parse_gateway_config(with_pool_extra(extra), "f.yaml");
    ASSERT_FALSE(bad) << extra;
    EXPECT_NE(bad.error().find(field), std::string::npos) << bad.error();
  }
}

TEST(GatewayConfig, TracingSection) {
  auto defaults = parse_gateway_config(kGood, "f.yaml");
  ASSERT_TRUE(defaults) << defaults.error();
  EXPECT_FALSE(defaults->tracing);  // off by default
  auto c = parse_gateway_config(
      "tracing:\n  ratio: 0.25\n  collector: http://127.0.0.1:4318/v1/traces\n"
      "  service_name: gw\n  batch_size: 64\n  max_queue: 128\n  flush_ms: 200\n" +
          std::string(kGood),
      "f.yaml");
  ASSERT_TRUE(c) << c.error();
  ASSERT_TRUE(c->tracing);
  EXPECT_DOUBLE_EQ(c->tracing->ratio, 0.25);
  EXPECT_EQ(c->tracing->collector, "http://127.0.0.1:4318/v1/traces");
  EXPECT_EQ(c->tracing->service_name, "gw");
  EXPECT_EQ(c->tracing->batch_size, 64u);
  EXPECT_EQ(c->tracing->max_queue, 128u);
  EXPECT_EQ(c->tracing->flush, std::chrono::milliseconds(200));
  auto minimal = parse_gateway_config(
      "tracing: {collector: http://c:4318/v1/traces}\n" + std::string(kGood), "f.yaml");
  ASSERT_TRUE(minimal) << minimal.error();
  EXPECT_DOUBLE_EQ(minimal->tracing->ratio, 0.0);
  EXPECT_EQ(minimal->tracing->service_name, "kvgate");
  auto has = [](const std::string& error, std::string_view part) {
    return error.find(part) != std::string::npos;
  };
  const std::string c1 = "tracing: {collector: http://c:4318/v1/traces, ratio: 1.5}\n";
  EXPECT_TRUE(has(error_of(c1 + kGood), "f.yaml:1:"));
  EXPECT_TRUE(has(error_of(c1 + kGood), "tracing.ratio: expected 0.0 to 1.0"));
  EXPECT_TRUE(
      has(error_of("tracing: {ratio: 1}\n" + std::string(kGood)), "tracing.collector: missing"));
  EXPECT_TRUE(has(error_of("tracing: {collector: https://c/v1/traces}\n" + std::string(kGood)),
                  "tracing.collector: expected http://host:port/v1/traces"));
  EXPECT_TRUE(
      has(error_of("tracing: {collector: http://c/v1/traces, level: 3}\n" + std::string(kGood)),
          "tracing.level: unknown field"));
  EXPECT_TRUE(has(error_of("tracing: {collector: http://c/v1/traces, batch_size: 100, "
                           "max_queue: 10}\n" +
                           std::string(kGood)),
                  "tracing.max_queue: must be at least batch_size"));
}

TEST(GatewayConfig, ADataParallelEngineIsOneEndpointPerRank) {
  auto c = parse_gateway_config(R"(
listeners:
  - {address: 127.0.0.1, port: 0}
pools:
  main:
    block_size: 16
    endpoints:
      - url: http://10.0.0.9:8000
        data_parallel_size: 2
        kv_events: {publisher: tcp://10.0.0.9:5557, replay: tcp://10.0.0.9:5600}
      - url: http://10.0.0.10:8000#dp3
      - http://10.0.0.11:8000
models:
  - {name: m, pool: main}
)",
                                "f.yaml");
  ASSERT_TRUE(c) << c.error();
  const PoolConfig& p = c->pools[0];
  ASSERT_EQ(p.endpoints.size(), 4u);
  ASSERT_EQ(p.kv_events.size(), 4u);
  EXPECT_EQ(p.endpoints[0].url, "http://10.0.0.9:8000#dp0");
  EXPECT_EQ(p.endpoints[1].url, "http://10.0.0.9:8000#dp1");
  ASSERT_TRUE(p.kv_events[0] && p.kv_events[1]);
  EXPECT_EQ(p.kv_events[0]->publisher, "tcp://10.0.0.9:5557");
  EXPECT_EQ(p.kv_events[1]->publisher, "tcp://10.0.0.9:5558");
  EXPECT_EQ(p.kv_events[1]->replay, "tcp://10.0.0.9:5601");
  EXPECT_EQ(p.endpoints[2].url, "http://10.0.0.10:8000#dp3");
  EXPECT_FALSE(p.kv_events[2]);
  EXPECT_EQ(p.endpoints[3].url, "http://10.0.0.11:8000");
}

}  // namespace config_test
}  // namespace kvgate::gateway
