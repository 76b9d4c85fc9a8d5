// The engine fallback for precise routing (`tokenize: engine`, docs/tokenizer.md): a
// `kvgate serve` whose pool has no tokenizer asks its `kvgate engine` processes for the
// ids (POST /tokenize), so `overlap: precise` matches the engines' KV events and a
// follow-up goes to the engine holding its conversation, even one the gateway never saw;
// a slow or failing engine routes the request approximately with a counted reason.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "support/gateway_fixture.h"

namespace kvgate::testing {
namespace {

using Clock = std::chrono::steady_clock;

// An engine (the word codec: no tokenizer anywhere) whose KV events the gateway reads.
struct Engine {
  std::string pub_port = std::to_string(free_port());
  std::unique_ptr<EngineProcess> proc;
  std::string url;

  explicit Engine(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--time-scale",
                                     "0.01",
                                     "--model",
                                     "sim",
                                     "--block-size",
                                     "16",
                                     "--kv-events-endpoint",
                                     "tcp://*:" + pub_port};
    args.insert(args.end(), extra.begin(), extra.end());
    proc = std::make_unique<EngineProcess>(args);
    url = proc->url;
  }

  std::string yaml_entry() const {
    return "      - url: " + url + "\n        kv_events: {publisher: tcp://127.0.0.1:" + pub_port +
           "}\n";
  }
};

// A conversation: a long system prompt (tag words), then user/assistant turns.
std::string chat_body(const std::string& tag, int turns, int max_tokens = 1) {
  std::string m = R"({"model":"sim","max_tokens":)" + std::to_string(max_tokens) +
                  R"(,"messages":[{"role":"system","content":")" + words_prompt(tag, 60) + R"("})";
  for (int t = 0; t < turns; ++t) {
    if (t) m += R"(,{"role":"assistant","content":"answer )" + std::to_string(t) + R"("})";
    m += R"(,{"role":"user","content":"question )" + tag + " " + std::to_string(t) + R"("})";
  }
  return m + "]}";
}

double tokenize_metric(GatewayProcess& gw, const std::string& pool, const std::string& result) {
  return gw.metric("kvgate_engine_tokenize_total", {{"pool", pool}, {"result", result}});
}

// Polls until `pred()` holds (at most ~10 s).
template <typename Pred>
bool eventually(Pred pred, int polls = 500) {
  for (int i = 0; i < polls; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

double batches(GatewayProcess& gw, const Engine& e) {
  return gw.metric("kvgate_kv_event_batches_total", {{"pool", "sim"}, {"endpoint", e.url}});
}

// Sends `body` to `engine` directly and waits until the gateway applied its KV events.
void warm_directly(GatewayProcess& gw, Engine& engine, const std::string& body) {
  const double before = batches(gw, engine);
  auto r = engine.proc->post("/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_TRUE(eventually([&] { return batches(gw, engine) > before; }));
  // The count is copied after the delivery was posted to the router's strand; one more
  // scrape period makes sure it ran before the next decision.
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
}

// Sends `body` through the gateway: it must go to `engine` and hit its cache.
void expect_routed_to(GatewayProcess& gw, const Engine& engine, const std::string& body,
                      const std::string& what) {
  auto r = gw.post("/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_NE(r.header("x-kvgate-endpoint"), nullptr);
  EXPECT_EQ(*r.header("x-kvgate-endpoint"), engine.url) << what;
  const auto cached =
      parse_json(r.body).at("usage").at("prompt_tokens_details").at("cached_tokens").as_int64();
  EXPECT_GE(cached, 48) << what;
}

TEST(GatewayEngineTokenize, PreciseRoutingOfFollowUpsThroughTheEnginesIds) {
  Engine a, b;
  ASSERT_FALSE(a.url.empty() || b.url.empty());
  std::string yaml =
      "listeners:\n  - address: 127.0.0.1\n    port: 0\n"
      "timeouts: {header_ms: 2000, drain_ms: 2000, connect_ms: 1000}\n"
      "pools:\n  sim:\n    block_size: 16\n    scrape_interval_ms: 50\n"
      "    tokenize: {mode: engine, timeout_ms: 2000}\n"
      "    router:\n      policy: kv-cost\n      overlap: precise\n    endpoints:\n" +
      a.yaml_entry() + b.yaml_entry() + "models:\n  - name: sim\n    pool: sim\n";
  GatewayProcess gw(yaml);
  ASSERT_FALSE(gw.url.empty());
  // ZeroMQ's slow joiner: warm each engine until one of its batches arrives.
  for (Engine* e : {&a, &b}) {
    ASSERT_TRUE(eventually(
        [&] {
          (void)e->proc->post("/v1/completions",
                              R"({"model":"sim","max_tokens":1,"prompt":"join words"})");
          return batches(gw, *e) > 0;
        },
        100));
  }

  int turn = 0;
  for (Engine* e : {&a, &b, &a, &b}) {
    const std::string tag = "conv" + std::to_string(turn++) + "w";
    // The conversation's first turn reaches the engine without the gateway: only its KV
    // events tell the gateway where it is, in the engine's own token ids.
    warm_directly(gw, *e, chat_body(tag, 1));
    const double asked = tokenize_metric(gw, "sim", "engine");
    // The second turn: nothing cached in the gateway, so it asks an engine for the ids.
    expect_routed_to(gw, *e, chat_body(tag, 2), tag + " turn 2");
    EXPECT_EQ(tokenize_metric(gw, "sim", "engine"), asked + 1);
    // The third turn: routed at once on the second turn's ids (cached), its new messages
    // as pseudo-tokens; the whole is fetched in the background for the next turn.
    const double prefix = tokenize_metric(gw, "sim", "prefix");
    expect_routed_to(gw, *e, chat_body(tag, 3), tag + " turn 3");
    EXPECT_EQ(tokenize_metric(gw, "sim", "prefix"), prefix + 1);
  }
  ASSERT_TRUE(eventually([&] {
    return gw.metric("kvgate_engine_tokenize_background_total",
                     {{"pool", "sim"}, {"result", "stored"}}) >= 4;
  }));
  // The whole third turn is cached now: the same request needs no engine.
  const double hits = tokenize_metric(gw, "sim", "hit");
  expect_routed_to(gw, b, chat_body("conv3w", 3), "repeated");
  EXPECT_EQ(tokenize_metric(gw, "sim", "hit"), hits + 1);
  // Completions too (the prompt form of /tokenize).
  const std::string prompt = words_prompt("plain", 80);
  auto warm = a.proc->post("/v1/completions",
                           R"({"model":"sim","max_tokens":1,"prompt":")" + prompt + R"("})");
  ASSERT_EQ(warm.status, 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto r = gw.post("/v1/completions",
                   R"({"model":"sim","max_tokens":1,"prompt":")" + prompt + R"(more"})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(*r.header("x-kvgate-endpoint"), a.url);
  for (const char* reason : {"timeout", "engine_error", "no_endpoint", "bad_response"}) {
    EXPECT_EQ(tokenize_metric(gw, "sim", reason), 0) << reason;
  }
}

TEST(GatewayEngineTokenize, SlowOrFailingEnginesRouteApproximatelyWithACountedReason) {
  EngineProcess slow({"--time-scale", "0.01", "--model", "sim", "--tokenize-delay-ms", "3000"});
  EngineProcess broken({"--time-scale", "0.01", "--model", "sim", "--tokenize-fail"});
  ASSERT_FALSE(slow.url.empty() || broken.url.empty());
  const std::string yaml =
      "listeners:\n  - address: 127.0.0.1\n    port: 0\n"
      "timeouts: {header_ms: 2000, drain_ms: 2000, connect_ms: 1000}\n"
      "pools:\n"
      "  slow:\n    tokenize: {mode: engine, timeout_ms: 200}\n"
      "    endpoints: [" +
      slow.url +
      "]\n"
      "  broken:\n    tokenize: engine\n    endpoints: [" +
      broken.url +
      "]\n"
      "models:\n  - name: sim\n    pool: slow\n  - name: sim-broken\n    pool: broken\n"
      "    served_name: sim\n";
  GatewayProcess gw(yaml);
  ASSERT_FALSE(gw.url.empty());

  // The engine does not answer in time: the request is served all the same, routed on
  // pseudo-tokens, without waiting for it.
  auto t0 = Clock::now();
  auto r = gw.post("/v1/chat/completions", chat_body("slow", 1));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(2000));
  EXPECT_EQ(tokenize_metric(gw, "slow", "timeout"), 1);
  // For a second that engine is not asked again: no engine to ask, at once.
  t0 = Clock::now();
  r = gw.post("/v1/chat/completions", chat_body("slow2", 1));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(2000));
  EXPECT_EQ(tokenize_metric(gw, "slow", "no_endpoint"), 1);

  // An engine error (500 from /tokenize): approximate, counted; the request is served.
  r = gw.post("/v1/completions", R"({"model":"sim-broken","max_tokens":2,"prompt":"hello"})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(tokenize_metric(gw, "broken", "engine_error"), 1);
  // A request the gateway cannot build a call for (several prompts): counted too.
  r = gw.post("/v1/completions", R"({"model":"sim-broken","max_tokens":2,"prompt":["a","b"]})");
  EXPECT_EQ(tokenize_metric(gw, "broken", "batched_prompt"), 1);
  for (const char* pool : {"slow", "broken"}) {
    EXPECT_EQ(tokenize_metric(gw, pool, "engine"), 0) << pool;
  }
}

}  // namespace
}  // namespace kvgate::testing
