// `kvgate engine` with LoRA slots (--max-loras, --lora-load-ms): POST
// /v1/load_lora_adapter is answered once the adapter is loaded, --lora-load-ms of the
// model's time later, and it serves from then on; with one slot, loading a second adapter
// evicts the idle first one (still served: a request for it loads it again and waits for
// that), and a load while the only slot's adapter has a running request is refused (503).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "core/metrics/prometheus_text.h"
#include "support/engine_fixture.h"
#include "support/eventually.h"

namespace kvgate::testing {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace engine_lora_test {

using SteadyClock = std::chrono::steady_clock;

// Time scale 0.1: a load (2000 simulated ms) is 200 wall ms; a decode step of the 7B
// profile (about 6 simulated ms) is 0.6 wall ms.
const std::vector<std::string> kOneSlot = {"--time-scale", "0.1", "--model",        "sim",
                                           "--max-loras",  "1",   "--lora-load-ms", "2000"};
constexpr int64_t kLoadWallMs = 200;

std::string load_body(const std::string& name) {
  return R"({"lora_name":")" + name + R"(","lora_path":"/adapters/)" + name + R"("})";
}

std::string completion(const std::string& model, int max_tokens, bool stream = false) {
  return R"({"model":")" + model + R"(","prompt":"select the rows","max_tokens":)" +
         std::to_string(max_tokens) + (stream ? R"(,"stream":true})" : "}");
}

int64_t ms_since(SteadyClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - t).count();
}

// A sample of the engine's /metrics (-1 when it is missing).
double metric(EngineProcess& e, const std::string& name) {
  auto m = metrics::parse_prometheus_text(e.get("/metrics").body);
  if (!m) {
    ADD_FAILURE() << m.error();
    return -1;
  }
  return m->value(name, {{"model_name", "sim"}}).value_or(-1);
}

// Whether GET /v1/models lists `adapter`.
bool lists(EngineProcess& e, const std::string& adapter) {
  boost::json::value v = get_json(e.url + "/v1/models");
  if (!v.is_object()) return false;
  for (const boost::json::value& m : v.at("data").as_array()) {
    if (m.at("id").as_string() == adapter) return true;
  }
  return false;
}

TEST(EngineLora, ALoadIsAnsweredOnceLoadedAndServesFromThen) {
  EngineProcess e(kOneSlot);
  ASSERT_FALSE(e.url.empty());
  // Not loaded: vLLM's 404 for an unknown model.
  auto unknown = e.post("/v1/completions", completion("sql", 1));
  EXPECT_EQ(unknown.status, 404);
  EXPECT_NE(unknown.body.find("The model `sql` does not exist."), std::string::npos)
      << unknown.body;

  const auto t0 = SteadyClock::now();
  auto r = e.post("/v1/load_lora_adapter", load_body("sql"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "Success: LoRA adapter 'sql' added successfully.");
  // Not before the model has loaded it: --lora-load-ms of its time.
  EXPECT_GE(ms_since(t0), kLoadWallMs);
  EXPECT_TRUE(lists(e, "sql"));
  EXPECT_EQ(metric(e, "kvgate_engine_lora_loads_total"), 1);
  EXPECT_EQ(metric(e, "kvgate_engine_lora_evictions_total"), 0);

  // Served from its slot: the load is not charged again.
  auto c = e.post("/v1/completions", completion("sql", 2));
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(parse_json(c.body).at("model").as_string(), "sql");
  EXPECT_EQ(metric(e, "kvgate_engine_lora_loads_total"), 1);

  // Loaded already: vLLM's 400, unless in place (in its slot already: no load).
  auto again = e.post("/v1/load_lora_adapter", load_body("sql"));
  EXPECT_EQ(again.status, 400);
  EXPECT_NE(again.body.find("has already been loaded"), std::string::npos) << again.body;
  auto inplace = e.post("/v1/load_lora_adapter",
                        R"({"lora_name":"sql","lora_path":"/adapters/sql","load_inplace":true})");
  EXPECT_EQ(inplace.status, 200) << inplace.body;
  EXPECT_EQ(metric(e, "kvgate_engine_lora_loads_total"), 1);

  // Unloaded: gone from /v1/models and from the API; unknown or unnamed: 404, 400.
  auto gone = e.post("/v1/unload_lora_adapter", R"({"lora_name":"sql"})");
  EXPECT_EQ(gone.status, 200) << gone.body;
  EXPECT_EQ(gone.body, "Success: LoRA adapter 'sql' removed successfully.");
  EXPECT_FALSE(lists(e, "sql"));
  EXPECT_EQ(e.post("/v1/completions", completion("sql", 1)).status, 404);
  auto twice = e.post("/v1/unload_lora_adapter", R"({"lora_name":"sql"})");
  EXPECT_EQ(twice.status, 404);
  EXPECT_NE(twice.body.find("The lora adapter 'sql' cannot be found."), std::string::npos)
      << twice.body;
  EXPECT_EQ(e.post("/v1/unload_lora_adapter", "{}").status, 400);
  // The base model is as without adapters.
  EXPECT_EQ(e.post("/v1/completions", completion("sim", 2)).status, 200);
}

TEST(EngineLora, OneSlotEvictsTheIdleAdapterAndRefusesALoadWhileItsAdapterRuns) {
  EngineProcess e(kOneSlot);
  ASSERT_FALSE(e.url.empty());
  ASSERT_EQ(e.post("/v1/load_lora_adapter", load_body("sql")).status, 200);
  // The one slot holds sql, idle: chat takes it.
  auto chat = e.post("/v1/load_lora_adapter", load_body("chat"));
  ASSERT_EQ(chat.status, 200) << chat.body;
  EXPECT_EQ(metric(e, "kvgate_engine_lora_loads_total"), 2);
  EXPECT_EQ(metric(e, "kvgate_engine_lora_evictions_total"), 1);
  // Both are still served (vLLM's registered adapters): a request for sql loads it again,
  // in place of chat, and waits for that load.
  EXPECT_TRUE(lists(e, "sql"));
  EXPECT_TRUE(lists(e, "chat"));
  const auto t0 = SteadyClock::now();
  auto c = e.post("/v1/completions", completion("sql", 1));
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_GE(ms_since(t0), kLoadWallMs);
  EXPECT_EQ(metric(e, "kvgate_engine_lora_loads_total"), 3);
  EXPECT_EQ(metric(e, "kvgate_engine_lora_evictions_total"), 2);

  // A long request for sql runs (1500 tokens: about 0.9 wall s): its slot is busy, and a
  // load of another adapter finds no slot.
  std::atomic<bool> streaming{false};
  int status = 0;
  std::thread stream([&] {
    auto r = io::http_fetch_streaming("POST", e.url + "/v1/completions",
                                      completion("sql", 1500, true), {}, [&](std::string_view) {
                                        streaming = true;
                                        return true;
                                      });
    status = r ? r->status : -1;
  });
  // Not ASSERT: the thread is joined first either way.
  const bool running =
      eventually([&] { return streaming.load() && metric(e, "vllm:num_requests_running") == 1; },
                 std::chrono::seconds(10), std::chrono::milliseconds(5));
  EXPECT_TRUE(running);
  if (running) {
    auto refused = e.post("/v1/load_lora_adapter", load_body("code"));
    EXPECT_EQ(refused.status, 503) << refused.body;
    EXPECT_NE(refused.body.find("no LoRA slot is free"), std::string::npos) << refused.body;
    EXPECT_FALSE(lists(e, "code"));
  }
  stream.join();
  ASSERT_TRUE(running);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(metric(e, "kvgate_engine_lora_loads_total"), 3);
  // Its request done, sql is idle again: the load takes its slot.
  auto code = e.post("/v1/load_lora_adapter", load_body("code"));
  EXPECT_EQ(code.status, 200) << code.body;
  EXPECT_EQ(metric(e, "kvgate_engine_lora_loads_total"), 4);
  EXPECT_EQ(metric(e, "kvgate_engine_lora_evictions_total"), 3);
  // SIGTERM stops it cleanly (under ASan, a leak or error would give a non-zero status).
  EXPECT_EQ(e.proc->stop(), 0) << e.proc->errors();
}

// --lora-modules load through the same slots at start: more of them than slots, and the
// later evict the earlier; all are served.
TEST(EngineLora, LoraModulesLoadIntoTheSlotsAtStart) {
  std::vector<std::string> args = kOneSlot;
  for (const char* m : {"sql=/adapters/sql", "chat=/adapters/chat"}) {
    args.push_back("--lora-modules");
    args.push_back(m);
  }
  EngineProcess e(args);
  ASSERT_FALSE(e.url.empty());
  EXPECT_TRUE(lists(e, "sql"));
  EXPECT_TRUE(lists(e, "chat"));
  EXPECT_EQ(metric(e, "kvgate_engine_lora_loads_total"), 2);
  EXPECT_EQ(metric(e, "kvgate_engine_lora_evictions_total"), 1);
  auto c = e.post("/v1/completions", completion("chat", 2));
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(metric(e, "kvgate_engine_lora_loads_total"), 2);  // chat holds the slot
  auto m = metrics::parse_prometheus_text(e.get("/metrics").body);
  ASSERT_TRUE(m) << m.error();
  const metrics::Sample* info = m->find("vllm:lora_requests_info");
  ASSERT_NE(info, nullptr);
  ASSERT_NE(info->label("max_lora"), nullptr);
  EXPECT_EQ(*info->label("max_lora"), "1");
}

}  // namespace engine_lora_test
}  // namespace kvgate::testing
