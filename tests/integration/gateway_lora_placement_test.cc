// LoRA placement end to end: `kvgate serve` with `lora_placement:` in front of real
// `kvgate engine` processes started with --max-loras 1 and no adapter. A request for an
// adapter loaded nowhere waits while the gateway loads it on an engine (POST
// /v1/load_lora_adapter), then goes there, as do the next ones; a hot adapter gets a
// second endpoint (max_replicas 2), never a third; an idle one is unloaded.
#include <gtest/gtest.h>

#include <set>

#include "support/eventually.h"
#include "support/gateway_fixture.h"

namespace kvgate::testing {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace gateway_lora_placement_test {

const std::vector<std::string> kLora = {"--time-scale", "0.01",        "--model",
                                        "sim",          "--max-loras", "1"};

std::string yaml(const std::vector<std::string>& urls, const std::string& placement) {
  std::string y =
      "listeners:\n  - address: 127.0.0.1\n    port: 0\n"
      "timeouts: {header_ms: 2000, drain_ms: 2000, connect_ms: 1000}\n"
      "pools:\n  main:\n    block_size: 16\n    scrape_interval_ms: 50\n"
      "    router: {policy: load}\n"
      "    lora_placement: {" +
      placement + "}\n    endpoints: [";
  for (size_t i = 0; i < urls.size(); ++i) y += (i ? ", " : "") + urls[i];
  return y +
         "]\nmodels:\n  - name: sim\n    pool: main\n"
         "adapters:\n  - {name: sql, base: sim, source: /adapters/sql, max_replicas: 2}\n";
}

std::string completion(const std::string& model) {
  return R"({"model":")" + model + R"(","prompt":"select the rows","max_tokens":2})";
}

// Whether the engine at `url` lists `adapter` in GET /v1/models (it has it loaded).
bool lists(const std::string& url, const std::string& adapter) {
  boost::json::value v = get_json(url + "/v1/models");
  if (!v.is_object()) return false;
  for (const boost::json::value& m : v.at("data").as_array()) {
    if (m.at("id").as_string() == adapter) return true;
  }
  return false;
}

TEST(GatewayLoraPlacement, AnAdapterIsLoadedWhereItsRequestsGoAndAHotOneGetsASecondEndpoint) {
  EngineProcess a(kLora), b(kLora), c(kLora);
  ASSERT_FALSE(a.url.empty() || b.url.empty() || c.url.empty());
  GatewayProcess gw(
      yaml({a.url, b.url, c.url}, "interval_ms: 1000, replica_demand: 8, idle_unload_ms: 600000"));
  ASSERT_FALSE(gw.url.empty());
  auto holders = [&] {
    return int(lists(a.url, "sql")) + int(lists(b.url, "sql")) + int(lists(c.url, "sql"));
  };
  EXPECT_EQ(holders(), 0);

  // Loaded nowhere: the request waits for a load, then is served where it went.
  auto first = gw.post("/v1/completions", completion("sql"));
  ASSERT_EQ(first.status, 200) << first.body;
  const std::string* at = first.header("x-kvgate-endpoint");
  ASSERT_NE(at, nullptr);
  const std::string home = *at;
  EXPECT_TRUE(lists(home, "sql"));
  EXPECT_EQ(holders(), 1);
  EXPECT_EQ(
      gw.metric("kvgate_lora_adapter_loads_total",
                {{"pool", "main"}, {"endpoint", home}, {"adapter", "sql"}, {"outcome", "ok"}}),
      1);
  // The next ones go there, the one endpoint that has it (the base model goes anywhere);
  // a few requests in a second stay under replica_demand.
  for (int i = 0; i < 3; ++i) {
    auto r = gw.post("/v1/completions", completion("sql"));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(*r.header("x-kvgate-endpoint"), home);
  }
  EXPECT_EQ(gw.post("/v1/completions", completion("sim")).status, 200);

  // Hot: far more than 8 requests per second on one replica. A second endpoint loads it
  // (waited for by polling: the placement's rounds and the engines are other processes).
  std::set<std::string> served;
  ASSERT_TRUE(eventually(
      [&] {
        auto r = gw.post("/v1/completions", completion("sql"));
        EXPECT_EQ(r.status, 200) << r.body;
        if (const std::string* e = r.header("x-kvgate-endpoint")) served.insert(*e);
        return holders() == 2;
      },
      std::chrono::seconds(20), std::chrono::milliseconds(5)));
  // Its requests then reach both replicas, and max_replicas keeps it off the third.
  ASSERT_TRUE(eventually(
      [&] {
        auto r = gw.post("/v1/completions", completion("sql"));
        EXPECT_EQ(r.status, 200) << r.body;
        if (const std::string* e = r.header("x-kvgate-endpoint")) served.insert(*e);
        return served.size() == 2;
      },
      std::chrono::seconds(20), std::chrono::milliseconds(5)));
  EXPECT_EQ(holders(), 2);
  for (const std::string& e : served) EXPECT_TRUE(lists(e, "sql")) << e;
}

TEST(GatewayLoraPlacement, AnIdleAdapterIsUnloadedAndLoadedAgainWhenAskedFor) {
  EngineProcess a(kLora);
  ASSERT_FALSE(a.url.empty());
  GatewayProcess gw(yaml({a.url}, "interval_ms: 100, idle_unload_ms: 500"));
  ASSERT_FALSE(gw.url.empty());
  auto r = gw.post("/v1/completions", completion("sql"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(lists(a.url, "sql"));
  // Unused for idle_unload_ms: unloaded (the engine is another process: polled).
  ASSERT_TRUE(eventually([&] { return !lists(a.url, "sql"); }, std::chrono::seconds(10)));
  const metrics::Labels ok = {
      {"pool", "main"}, {"endpoint", a.url}, {"adapter", "sql"}, {"outcome", "ok"}};
  ASSERT_TRUE(eventually([&] { return gw.metric("kvgate_lora_adapter_unloads_total", ok) == 1; },
                         std::chrono::seconds(5)));
  r = gw.post("/v1/completions", completion("sql"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(lists(a.url, "sql"));
  EXPECT_EQ(gw.metric("kvgate_lora_adapter_loads_total", ok), 2);
}

}  // namespace gateway_lora_placement_test
}  // namespace kvgate::testing
