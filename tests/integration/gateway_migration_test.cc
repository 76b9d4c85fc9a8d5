// Stream migration with real processes: the engine serving a stream is SIGKILLed
// mid-stream and the gateway continues the answer on another engine (a token-id
// continuation through /v1/completions), so the client sees one uninterrupted answer:
// continuous text, the right token count and usage, and at temperature 0 exactly the
// answer an engine gives without interruption. The continuation is placed by the router
// like any request: on a prefix-aware pool it goes to the replica that holds the prompt's
// prefix.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>

#include "support/fault_fixture.h"
#include "support/kv_engine.h"

namespace kvgate::testing {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace gateway_migration_test {

namespace json = boost::json;

// ~5 ms of wall time per token: a 120-token answer takes long enough to kill its engine
// half-way.
const std::vector<std::string> kEngine = {"--time-scale", "0.3", "--model", "sim"};
const std::string kMigration = "    migration: {max_migrations: 2}\n";

// gateway_yaml with `pool_extra` lines inside pool "main".
std::string yaml_with_pool_extra(const std::vector<std::string>& urls,
                                 const std::string& pool_extra) {
  std::string y = gateway_yaml(urls, "round-robin");
  const std::string anchor = "    block_size: 16\n";
  y.insert(y.find(anchor) + anchor.size(), pool_extra);
  return y;
}

struct Answer {
  std::string text;
  std::vector<json::object> chunks;  // the JSON events before [DONE]
  bool done = false;
  std::string endpoint;  // x-kvgate-endpoint
};

// Sends `body` as a stream, SIGKILLs the engine serving it once `kill_after` token chunks
// came (0: never) by calling `kill` with its URL, and reads the answer to its end.
Answer stream_and_kill(GatewayProcess& gw, const std::function<void(const std::string&)>& kill,
                       const std::string& path, const std::string& body, int kill_after) {
  Answer a;
  RawClient c(gw.url);
  EXPECT_TRUE(c.send(raw_post(path, body)));
  EXPECT_TRUE(c.read_until("\r\n\r\n"));
  a.endpoint = response_header(c.received(), "x-kvgate-endpoint");
  if (kill_after > 0) {
    // Role chunk (chats) plus kill_after token chunks.
    const std::string marker = path.find("chat") != std::string::npos ? "\"delta\":" : "\"text\":";
    const int want = kill_after + (marker == "\"delta\":" ? 1 : 0);
    EXPECT_TRUE(eventually(
        [&] {
          c.read_some(std::chrono::milliseconds(50));
          size_t n = 0, pos = 0;
          while ((pos = c.received().find(marker, pos)) != std::string::npos) ++n, ++pos;
          return static_cast<int>(n) >= want;
        },
        std::chrono::seconds(10)));
    kill(a.endpoint);
  }
  EXPECT_TRUE(c.read_until("data: [DONE]", std::chrono::seconds(30))) << c.received();
  for (const std::string& e : sse_events(response_body(c.received()))) {
    if (e == "[DONE]") {
      a.done = true;
      break;
    }
    json::value v = parse_json(e);
    if (!v.is_object()) continue;
    a.chunks.push_back(v.as_object());
    const json::value* choices = v.as_object().if_contains("choices");
    if (!choices || choices->as_array().empty()) continue;
    const json::object& ch = choices->as_array()[0].as_object();
    if (const json::value* d = ch.if_contains("delta")) {
      if (const json::value* t = d->as_object().if_contains("content")) {
        a.text += std::string(t->as_string());
      }
    } else if (const json::value* t = ch.if_contains("text")) {
      a.text += std::string(t->as_string());
    }
  }
  return a;
}

// The same, SIGKILLing whichever of `engines` serves the stream.
Answer stream_and_kill(GatewayProcess& gw, std::vector<EngineProcess*> engines,
                       const std::string& path, const std::string& body, int kill_after) {
  return stream_and_kill(
      gw,
      [&](const std::string& url) {
        for (EngineProcess* e : engines) {
          if (e->url == url) e->proc->signal(SIGKILL);
        }
      },
      path, body, kill_after);
}

int token_chunks(const Answer& a) {
  int n = 0;
  for (const json::object& c : a.chunks) {
    const json::array& ch = c.at("choices").as_array();
    if (ch.empty()) continue;
    const json::object& choice = ch[0].as_object();
    const json::value* d = choice.if_contains("delta");
    if (d && d->as_object().contains("role")) continue;  // the role chunk
    ++n;
  }
  return n;
}

TEST(GatewayMigration, ChatStreamSurvivesItsEngineBeingKilledAndEqualsAnUninterruptedAnswer) {
  EngineProcess a(kEngine), b(kEngine);
  ASSERT_FALSE(a.url.empty() || b.url.empty());
  GatewayProcess gw(yaml_with_pool_extra({a.url, b.url}, kMigration));
  ASSERT_FALSE(gw.url.empty());
  const std::string body = chat_body("tell me a long story", 120, true,
                                     R"(,"temperature":0,"stream_options":{"include_usage":true})");
  // The uninterrupted answer, from an engine directly (whole, same parameters).
  auto ref = b.post("/v1/chat/completions",
                    chat_body("tell me a long story", 120, false, R"(,"temperature":0)"));
  ASSERT_EQ(ref.status, 200) << ref.body;
  const json::value reference = parse_json(ref.body);
  const std::string expected(reference.at("choices").at(0).at("message").at("content").as_string());

  Answer got = stream_and_kill(gw, {&a, &b}, "/v1/chat/completions", body, 25);
  ASSERT_TRUE(got.done);
  EXPECT_EQ(got.text, expected);
  EXPECT_EQ(token_chunks(got), 120);
  // One answer: every chunk has the first chunk's id, object, created and model; no error
  // event and none of the token ids the gateway asked for.
  ASSERT_FALSE(got.chunks.empty());
  const json::object& first = got.chunks.front();
  for (const json::object& c : got.chunks) {
    EXPECT_FALSE(c.contains("error")) << json::serialize(c);
    EXPECT_EQ(c.at("id"), first.at("id"));
    EXPECT_EQ(c.at("object"), "chat.completion.chunk");
    EXPECT_EQ(c.at("created"), first.at("created"));
    EXPECT_EQ(c.at("model"), first.at("model"));
    EXPECT_FALSE(c.contains("prompt_token_ids"));
    if (!c.at("choices").as_array().empty()) {
      EXPECT_FALSE(c.at("choices").at(0).as_object().contains("token_ids"));
    }
  }
  // The usage of the whole answer, as the uninterrupted one has it.
  const json::object& usage = got.chunks.back().at("usage").as_object();
  EXPECT_EQ(usage.at("completion_tokens").as_int64(), 120);
  EXPECT_EQ(usage.at("prompt_tokens"), reference.at("usage").at("prompt_tokens"));
  EXPECT_EQ(usage.at("total_tokens").as_int64(),
            reference.at("usage").at("total_tokens").as_int64());
  EXPECT_EQ(gw.metric("kvgate_stream_migrations_total", {{"outcome", "resumed"}}), 1);
  EXPECT_GE(gw.metric("kvgate_stream_migrated_tokens_total", {{"pool", "main"}}), 25);
  EXPECT_EQ(gw.metric("kvgate_completion_tokens_total", {{"model", "sim"}}), 120);
  EXPECT_EQ(gw.proc->stop(), 0) << gw.proc->errors();
}

TEST(GatewayMigration, CompletionStreamMigratesTwiceAndStopsAtMaxMigrations) {
  EngineProcess a(kEngine), b(kEngine), c(kEngine);
  ASSERT_FALSE(a.url.empty() || b.url.empty() || c.url.empty());
  GatewayProcess gw(yaml_with_pool_extra({a.url, b.url, c.url}, kMigration));
  ASSERT_FALSE(gw.url.empty());
  const std::string prompt = words_prompt("w", 40);
  const std::string body = R"({"model":"sim","prompt":")" + prompt +
                           R"(","max_tokens":150,"temperature":0,"stream":true})";
  auto ref = a.post("/v1/completions", R"({"model":"sim","prompt":")" + prompt +
                                           R"(","max_tokens":150,"temperature":0})");
  ASSERT_EQ(ref.status, 200);
  const std::string expected(parse_json(ref.body).at("choices").at(0).at("text").as_string());

  // Kill the first engine after 20 tokens, then whichever continues after 30 more.
  RawClient cl(gw.url);
  ASSERT_TRUE(cl.send(raw_post("/v1/completions", body)));
  ASSERT_TRUE(cl.read_until("\r\n\r\n"));
  std::vector<EngineProcess*> engines = {&a, &b, &c};
  auto count = [&] {
    cl.read_some(std::chrono::milliseconds(50));
    size_t n = 0, pos = 0;
    while ((pos = cl.received().find("\"text\":", pos)) != std::string::npos) ++n, ++pos;
    return static_cast<int>(n);
  };
  auto kill_serving = [&](const std::string& url) {
    for (EngineProcess* e : engines) {
      if (e->url == url) e->proc->signal(SIGKILL);
    }
  };
  ASSERT_TRUE(eventually([&] { return count() >= 20; }));
  kill_serving(response_header(cl.received(), "x-kvgate-endpoint"));
  ASSERT_TRUE(eventually([&] {
    return gw.metric("kvgate_stream_migrations_total", {{"outcome", "resumed"}}) == 1;
  }));
  ASSERT_TRUE(eventually([&] { return count() >= 50; }));
  // The second leg's engine: the one of the two survivors whose running count is 1.
  for (EngineProcess* e : engines) {
    if (e->proc->running() && metric_at(e->url, "vllm:num_requests_running") == 1) {
      e->proc->signal(SIGKILL);
    }
  }
  ASSERT_TRUE(cl.read_until("data: [DONE]", std::chrono::seconds(30)));
  std::string text;
  int chunks = 0;
  for (const std::string& e : sse_events(response_body(cl.received()))) {
    if (e == "[DONE]") break;
    json::value v = parse_json(e);
    EXPECT_FALSE(v.as_object().contains("error")) << e;
    EXPECT_EQ(v.at("object"), "text_completion");
    text += std::string(v.at("choices").at(0).at("text").as_string());
    ++chunks;
  }
  EXPECT_EQ(text, expected);
  EXPECT_EQ(chunks, 150);
  EXPECT_EQ(gw.metric("kvgate_stream_migrations_total", {{"outcome", "resumed"}}), 2);

  // A third failure on the same request is past max_migrations: a clean error event.
  // (Only one engine is left; kill it mid-stream on a fresh request twice over is not
  // possible, so a fresh request on a pool of one shows the "failed" outcome instead.)
  EngineProcess* last = nullptr;
  for (EngineProcess* e : engines) {
    if (e->proc->running()) last = e;
  }
  ASSERT_NE(last, nullptr);
  Answer lone = stream_and_kill(gw, {last}, "/v1/completions", body, 10);
  ASSERT_TRUE(lone.done);
  ASSERT_FALSE(lone.chunks.empty());
  EXPECT_EQ(lone.chunks.back().at("error").at("code"), "upstream_error");
  EXPECT_EQ(gw.metric("kvgate_stream_migrations_total", {{"outcome", "failed"}}), 1);
  EXPECT_EQ(gw.proc->stop(), 0) << gw.proc->errors();
}

TEST(GatewayMigration, ContinuationIsRoutedToTheReplicaHoldingThePromptsPrefix) {
  // Three engines publishing KV events; the pool routes on them (kv-cost, precise). B runs
  // at a third of A's and C's speed so that a request it serves lasts (below).
  KvEngine a({"--time-scale", "0.3"}), b({"--time-scale", "1"}), c({"--time-scale", "0.3"});
  ASSERT_FALSE(a.url.empty() || b.url.empty() || c.url.empty());
  AdminGateway gw(precise_pool_yaml({&a, &b, &c}, kMigration));
  ASSERT_FALSE(gw.admin_url.empty());
  join_kv_events(gw, {&a, &b, &c});
  if (HasFatalFailure()) return;

  // A holds the whole prompt (its uninterrupted answer is the reference), B its first
  // half, C nothing of it.
  const std::string prompt = words_prompt("migr", 160);
  auto ref = a.complete(prompt, 120);
  ASSERT_EQ(ref.status, 200) << ref.body;
  const std::string expected(parse_json(ref.body).at("choices").at(0).at("text").as_string());
  ASSERT_EQ(b.complete(words_prompt("migr", 80)).status, 200);
  // B is also busy with a request of its own (a prompt only B holds, so the router sends
  // it there): on load alone the idle C would take the continuation, so only the prefix
  // can bring it to B.
  const std::string busy_prompt = words_prompt("busy", 8);
  ASSERT_EQ(b.complete(busy_prompt).status, 200);
  int64_t on_a = 0, on_b = 0;
  ASSERT_TRUE(eventually([&] {
    on_a = gw.matched_blocks(prompt, a.url);
    on_b = gw.matched_blocks(prompt, b.url);
    return on_a > on_b && on_b >= 12 && gw.matched_blocks(busy_prompt, b.url) == 1;
  })) << "A "
      << on_a << " blocks, B " << on_b;
  EXPECT_EQ(gw.matched_blocks(prompt, c.url), 0);
  const metrics::Labels finished = {{"finished_reason", "length"}};
  const double b_done = metric_at(b.url, "vllm:request_success_total", finished);
  const double b_hits = metric_at(b.url, "vllm:prefix_cache_hits_total");
  const double c_done = metric_at(c.url, "vllm:request_success_total", finished);
  const double c_prompt = metric_at(c.url, "vllm:prompt_tokens_total");
  RawClient busy(gw.gw.url);
  ASSERT_TRUE(busy.send(raw_post("/v1/completions", R"({"model":"sim","prompt":")" + busy_prompt +
                                                        R"(","max_tokens":100,"stream":true})")));
  ASSERT_TRUE(busy.read_until("\r\n\r\n"));
  ASSERT_EQ(response_header(busy.received(), "x-kvgate-endpoint"), b.url);

  // The stream goes to A (all of the prompt); A is killed after 20 tokens, and the
  // continuation, routed on the prompt's blocks with A excluded, goes to B.
  const std::string body = R"({"model":"sim","prompt":")" + prompt +
                           R"(","max_tokens":120,"temperature":0,"stream":true})";
  bool busy_when_killed = false;
  Answer got = stream_and_kill(
      gw.gw,
      [&](const std::string& url) {
        busy.read_some(std::chrono::milliseconds(1));
        busy_when_killed = busy.received().find("[DONE]") == std::string::npos;
        for (KvEngine* e : {&a, &b, &c}) {
          if (e->url == url) e->proc->signal(SIGKILL);
        }
      },
      "/v1/completions", body, 20);
  ASSERT_EQ(got.endpoint, a.url);  // the longest prefix
  ASSERT_TRUE(busy_when_killed) << "B's own request ended before the migration";
  ASSERT_TRUE(got.done);
  EXPECT_EQ(got.text, expected);
  EXPECT_EQ(token_chunks(got), 120);
  EXPECT_EQ(gw.gw.metric("kvgate_stream_migrations_total", {{"outcome", "resumed"}}), 1);

  // The continuation ran on B (its own request and the continuation finished there), from
  // B's cached half of the prompt; C was never asked.
  EXPECT_TRUE(busy.read_until("data: [DONE]", std::chrono::seconds(30)));
  ASSERT_TRUE(eventually(
      [&] { return metric_at(b.url, "vllm:request_success_total", finished) == b_done + 2; }));
  EXPECT_GE(metric_at(b.url, "vllm:prefix_cache_hits_total") - b_hits, 16.0 * on_b);
  EXPECT_EQ(metric_at(c.url, "vllm:request_success_total", finished), c_done);
  EXPECT_EQ(metric_at(c.url, "vllm:prompt_tokens_total"), c_prompt);
  EXPECT_EQ(gw.gw.proc->stop(), 0) << gw.gw.proc->errors();
}

}  // namespace gateway_migration_test
}  // namespace kvgate::testing
