// `kvgate serve` kept live: it scrapes the engines' /metrics and subscribes to their KV
// events (connect mode), so `overlap: precise` routes a prompt to the engine that cached
// its prefix, even when the gateway never saw the request that put it there; an engine
// killed and restarted on the same ports is resynced.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <thread>

#include "support/gateway_fixture.h"

namespace kvgate::testing {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace gateway_live_test {

std::string tokenizer_dir() { return source_dir() + "/.deps/fixtures/qwen3"; }

// One engine on fixed ports, so that it can be restarted where the gateway expects it.
// Its PUB binds (tcp://*:PORT, as vLLM binds a wildcard address and connects otherwise)
// and the gateway connects to it.
struct Engine {
  std::string http_port = std::to_string(free_port()), pub_port = std::to_string(free_port()),
              replay_port = std::to_string(free_port());
  std::string url = "http://127.0.0.1:" + http_port;
  std::unique_ptr<ChildProcess> proc;

  void start() {
    auto p = ChildProcess::spawn(
        kvgate_bin(),
        {"engine", "--port", http_port, "--time-scale", "0.01", "--model", "sim", "--tokenizer",
         tokenizer_dir(), "--block-size", "16", "--kv-events-endpoint", "tcp://*:" + pub_port,
         "--replay-endpoint", "tcp://127.0.0.1:" + replay_port});
    ASSERT_TRUE(p) << p.error();
    proc = std::move(*p);
    ASSERT_TRUE(proc->wait_for_url());
    ASSERT_TRUE(proc->wait_for_status(url + "/health", 200));
  }

  std::string yaml_entry() const {
    return "      - url: " + url + "\n        kv_events: {publisher: tcp://127.0.0.1:" + pub_port +
           ", replay: tcp://127.0.0.1:" + replay_port + "}\n";
  }

  void complete(const std::string& prompt) {
    auto r = io::http_fetch("POST", url + "/v1/completions",
                            R"({"model":"sim","prompt":")" + prompt + R"(","max_tokens":1})");
    ASSERT_TRUE(r && r->status == 200);
  }
};

std::string live_yaml(const std::vector<const Engine*>& engines) {
  std::string y =
      "listeners:\n  - address: 127.0.0.1\n    port: 0\n"
      "timeouts: {header_ms: 2000, drain_ms: 2000, connect_ms: 1000}\n"
      "pools:\n  sim:\n    block_size: 16\n    scrape_interval_ms: 50\n"
      "    tokenizer: " +
      tokenizer_dir() +
      "/tokenizer.json\n"
      "    router:\n      policy: kv-cost\n      overlap: precise\n    endpoints:\n";
  for (const Engine* e : engines) y += e->yaml_entry();
  return y + "models:\n  - name: sim\n    pool: sim\n";
}

// Polls the gateway's metric until `pred` holds (at most 10 s).
template <typename Pred>
bool wait_metric(GatewayProcess& gw, const std::string& name, const std::string& endpoint,
                 Pred pred, int polls = 500) {
  for (int i = 0; i < polls; ++i) {
    if (pred(gw.metric(name, {{"pool", "sim"}, {"endpoint", endpoint}}))) return true;
    // Waits for the kvgate serve child's metric to reach the state.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// Warms `engine` directly (the gateway never sees it), waits until the gateway applied
// the engine's events, then asks the gateway for a prompt sharing the prefix: it must go
// to that engine and hit its cache.
void expect_routed_by_events(GatewayProcess& gw, Engine& engine, const std::string& tag) {
  const std::string prefix = words_prompt(tag, 80);
  const double before =
      gw.metric("kvgate_kv_event_batches_total", {{"pool", "sim"}, {"endpoint", engine.url}});
  engine.complete(prefix + "first");
  ASSERT_TRUE(wait_metric(gw, "kvgate_kv_event_batches_total", engine.url,
                          [&](double v) { return v > before; }));
  // A fixed wait for the kvgate serve child: the counter is copied after the delivery was
  // posted to the router's strand, and nothing shows when it ran; one more scrape period
  // makes sure it ran before the next decision.
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  auto r = gw.post("/v1/completions",
                   R"({"model":"sim","prompt":")" + prefix + R"(second","max_tokens":2})");
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_NE(r.header("x-kvgate-endpoint"), nullptr);
  EXPECT_EQ(*r.header("x-kvgate-endpoint"), engine.url) << tag;
  auto cached =
      parse_json(r.body).at("usage").at("prompt_tokens_details").at("cached_tokens").as_int64();
  EXPECT_GE(cached, 64) << tag;
}

TEST(GatewayLive, PreciseRoutingFromKvEventsScrapedMetricsAndResyncAfterRestart) {
  Engine a, b;
  a.start();
  b.start();
  ASSERT_TRUE(a.proc && b.proc);
  GatewayProcess gw(live_yaml({&a, &b}));
  ASSERT_FALSE(gw.url.empty());

  // Scraped: both endpoints answered, their values are exported.
  for (const Engine* e : {&a, &b}) {
    ASSERT_TRUE(wait_metric(gw, "kvgate_scrapes_total", e->url, [](double v) { return v >= 2; }));
    EXPECT_EQ(gw.metric("kvgate_scrape_errors_total", {{"pool", "sim"}, {"endpoint", e->url}}), 0);
  }
  // ZeroMQ's slow joiner: until the SUB is connected, batches are lost. Warm both until
  // a batch arrives from each.
  for (Engine* e : {&a, &b}) {
    for (int i = 0; i < 100; ++i) {
      e->complete(words_prompt("join" + std::to_string(i), 20));
      if (wait_metric(
              gw, "kvgate_kv_event_batches_total", e->url, [](double v) { return v > 0; }, 10)) {
        break;
      }
    }
  }

  // Alternating engines, different prefixes: not luck.
  expect_routed_by_events(gw, a, "alpha");
  expect_routed_by_events(gw, b, "beta");
  expect_routed_by_events(gw, a, "gamma");
  expect_routed_by_events(gw, b, "delta");
  EXPECT_EQ(gw.metric("kvgate_kv_event_anomalies_total", {{"pool", "sim"}, {"endpoint", a.url}}),
            0);

  // Engine A dies and comes back on the same ports: the scraper sees it go and come
  // back, the gateway forgets what A held and subscribes afresh.
  a.proc->signal(SIGKILL);
  a.proc->stop();
  ASSERT_TRUE(wait_metric(gw, "kvgate_scrape_errors_total", a.url, [](double v) { return v > 0; }));
  a.start();
  ASSERT_TRUE(a.proc);
  ASSERT_TRUE(
      wait_metric(gw, "kvgate_kv_event_restarts_total", a.url, [](double v) { return v >= 1; }));
  const double before =
      gw.metric("kvgate_kv_event_batches_total", {{"pool", "sim"}, {"endpoint", a.url}});
  for (int i = 0; i < 100; ++i) {  // the new SUB connection joins late too
    a.complete(words_prompt("rejoin" + std::to_string(i), 20));
    if (wait_metric(
            gw, "kvgate_kv_event_batches_total", a.url, [&](double v) { return v > before; }, 10)) {
      break;
    }
  }
  expect_routed_by_events(gw, a, "epsilon");
  expect_routed_by_events(gw, b, "zeta");
}

}  // namespace gateway_live_test
}  // namespace kvgate::testing
