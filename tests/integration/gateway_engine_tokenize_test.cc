// The engine fallback for precise routing (`tokenize: engine`, docs/tokenizer.md): a
// `kvgate serve` whose pool has no tokenizer of its own asks its `kvgate engine`s (the
// Qwen3 tokenizer and chat template) for the ids (POST /tokenize), so `overlap: precise`
// matches the engines' KV events and a follow-up goes to the engine holding its
// conversation, even one the gateway never saw; the answers are cached per conversation
// prefix; a slow or failing engine routes the request approximately with a counted reason.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "support/kv_engine.h"

namespace kvgate::testing {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace gateway_engine_tokenize_test {

using Clock = std::chrono::steady_clock;

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

double batches(GatewayProcess& gw, const KvEngine& e) {
  return gw.metric("kvgate_kv_event_batches_total", {{"pool", "main"}, {"endpoint", e.url}});
}

// Sends `body` to `engine` directly and waits until the gateway applied its KV events.
void warm_directly(GatewayProcess& gw, KvEngine& engine, const std::string& body) {
  const double before = batches(gw, engine);
  auto r = engine.post("/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_TRUE(eventually([&] { return batches(gw, engine) > before; }));
  // A fixed wait for the kvgate serve child: the count is copied after the delivery was
  // posted to the router's strand, and nothing shows when it ran; a little more makes
  // sure it ran before the next decision.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

// Sends `body` through the gateway: it must go to `engine` and hit its prefix cache.
void expect_routed_to(GatewayProcess& gw, const KvEngine& engine, const std::string& body,
                      const std::string& what) {
  auto r = gw.post("/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_NE(r.header("x-kvgate-endpoint"), nullptr);
  EXPECT_EQ(*r.header("x-kvgate-endpoint"), engine.url) << what;
  const auto cached =
      parse_json(r.body).at("usage").at("prompt_tokens_details").at("cached_tokens").as_int64();
  EXPECT_GE(cached, 48) << what;
}

TEST(GatewayEngineTokenize, PreciseRoutingOnTheEnginesIdsCachedPerConversationPrefix) {
  if (source_dir().empty() || !std::ifstream(fixture_tokenizer_dir() + "/tokenizer.json")) {
    GTEST_SKIP() << "no Qwen3 tokenizer fixture (run scripts/bootstrap)";
  }
  KvEngine a({"--time-scale", "0.01"});
  KvEngine b({"--time-scale", "0.01"});
  ASSERT_FALSE(a.url.empty() || b.url.empty());
  std::string yaml =
      precise_pool_yaml({&a, &b}, "    tokenize: {mode: engine, timeout_ms: 5000}\n");
  // No tokenizer of the gateway's own: a matching block key can only come from the
  // engines' ids.
  const size_t t = yaml.find("    tokenizer: ");
  ASSERT_NE(t, std::string::npos);
  yaml.erase(t, yaml.find('\n', t) + 1 - t);
  AdminGateway gw(yaml);
  ASSERT_FALSE(gw.admin_url.empty());
  // The admin route view gets its ids as requests do: matched blocks show the engines' ids.
  join_kv_events(gw, {&a, &b});
  EXPECT_GT(tokenize_metric(gw.gw, "main", "engine"), 0);

  int conversation = 0;
  for (KvEngine* e : {&a, &b, &a, &b}) {
    const std::string tag = "conv" + std::to_string(conversation++) + "w";
    // The first turn reaches the engine without the gateway: only its KV events tell the
    // gateway where it is, in the engine's own token ids.
    warm_directly(gw.gw, *e, chat_body(tag, 1));
    // The second turn: nothing cached in the gateway, so it asks an engine for the ids.
    const double asked = tokenize_metric(gw.gw, "main", "engine");
    expect_routed_to(gw.gw, *e, chat_body(tag, 2), tag + " turn 2");
    EXPECT_EQ(tokenize_metric(gw.gw, "main", "engine"), asked + 1);
    // The third turn: routed at once on the second turn's ids (cached), its new messages
    // as pseudo-tokens; the whole is fetched in the background for the next turn.
    const double prefix = tokenize_metric(gw.gw, "main", "prefix");
    expect_routed_to(gw.gw, *e, chat_body(tag, 3), tag + " turn 3");
    EXPECT_EQ(tokenize_metric(gw.gw, "main", "prefix"), prefix + 1);
  }
  ASSERT_TRUE(eventually([&] {
    return gw.gw.metric("kvgate_engine_tokenize_background_total",
                        {{"pool", "main"}, {"result", "stored"}}) >= 4;
  }));
  // The whole third turn is cached now: the same request needs no engine.
  const double hits = tokenize_metric(gw.gw, "main", "hit");
  const double engine_calls = tokenize_metric(gw.gw, "main", "engine");
  expect_routed_to(gw.gw, b, chat_body("conv3w", 3), "repeated");
  EXPECT_EQ(tokenize_metric(gw.gw, "main", "hit"), hits + 1);
  EXPECT_EQ(tokenize_metric(gw.gw, "main", "engine"), engine_calls);
  // The admin view says so too.
  auto view =
      io::http_fetch("POST", gw.admin_url + "/admin/pools/main/route", chat_body("conv2w", 3));
  ASSERT_TRUE(view && view->status == 200);
  EXPECT_EQ(parse_json(view->body).at("engine_tokenize").as_string(), "hit") << view->body;
  for (const char* reason : {"timeout", "engine_error", "refused", "no_endpoint", "bad_response"}) {
    EXPECT_EQ(tokenize_metric(gw.gw, "main", reason), 0) << reason;
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

}  // namespace gateway_engine_tokenize_test
}  // namespace kvgate::testing
