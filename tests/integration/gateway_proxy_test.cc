// `kvgate serve` in front of real `kvgate engine` processes: streaming and whole
// responses, usage and cached tokens, retries when an engine is gone before the first
// byte, a clean error event when one dies mid-stream, drain with streams in flight.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "support/gateway_fixture.h"

namespace kvgate::testing {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace gateway_proxy_test {

const std::vector<std::string> kFast = {"--time-scale", "0.01", "--model", "sim"};

std::string chat(const std::string& content, int max_tokens, bool stream,
                 bool include_usage = false) {
  std::string b = R"({"model":"sim","messages":[{"role":"user","content":")" + content +
                  R"("}],"max_tokens":)" + std::to_string(max_tokens);
  if (stream) b += R"(,"stream":true)";
  if (include_usage) b += R"(,"stream_options":{"include_usage":true})";
  return b + "}";
}

TEST(GatewayProxy, WholeAndStreamedResponsesWithUsageAndCachedTokens) {
  EngineProcess a(kFast), b(kFast);
  ASSERT_FALSE(a.url.empty() || b.url.empty());
  GatewayProcess gw(gateway_yaml({a.url, b.url}, "kv-cost"));
  ASSERT_FALSE(gw.url.empty());

  const std::string prompt = words_prompt("p", 100);
  auto first =
      gw.post("/v1/completions", R"({"model":"sim","prompt":")" + prompt + R"(","max_tokens":5})");
  ASSERT_EQ(first.status, 200) << first.body;
  auto u1 = parse_json(first.body).at("usage").as_object();
  EXPECT_EQ(u1.at("prompt_tokens").as_int64(), 100);
  EXPECT_EQ(u1.at("completion_tokens").as_int64(), 5);
  // The same prompt again: the router's history sends it to the engine that holds it.
  auto second = gw.post("/v1/completions",
                        R"({"model":"sim-alias","prompt":")" + prompt + R"(","max_tokens":5})");
  ASSERT_EQ(second.status, 200);
  EXPECT_EQ(*second.header("x-kvgate-endpoint"), *first.header("x-kvgate-endpoint"));
  EXPECT_EQ(parse_json(second.body).at("usage").at("prompt_tokens_details").at("cached_tokens"),
            96);
  EXPECT_EQ(gw.metric("kvgate_cached_tokens_total", {{"model", "sim"}}), 96);

  // A stream without include_usage: the engine's usage chunk (which the gateway asked
  // for) does not reach the client, but the gateway counted it.
  auto s = gw.post("/v1/chat/completions", chat("hello there", 6, true));
  ASSERT_EQ(s.status, 200);
  auto events = sse_events(s.body);
  ASSERT_EQ(events.size(), 8u) << s.body;  // role, 6 tokens, [DONE]
  EXPECT_EQ(events.back(), "[DONE]");
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    EXPECT_FALSE(parse_json(events[i]).at("choices").as_array().empty()) << events[i];
  }
  EXPECT_EQ(gw.metric("kvgate_completion_tokens_total", {{"model", "sim"}}), 5 + 5 + 6);
  // With include_usage the client gets it.
  auto su = gw.post("/v1/chat/completions", chat("hello there", 6, true, true));
  auto ue = sse_events(su.body);
  ASSERT_EQ(ue.size(), 9u) << su.body;
  EXPECT_EQ(parse_json(ue[7]).at("usage").at("completion_tokens").as_int64(), 6);
  EXPECT_EQ(gw.metric("kvgate_time_to_first_token_seconds_count", {{"model", "sim"}}), 4);
  EXPECT_GT(gw.metric("kvgate_inter_token_latency_seconds_count", {{"model", "sim"}}), 10);
  EXPECT_EQ(gw.proc->stop(), 0) << gw.proc->errors();
}

TEST(GatewayProxy, RetriesOnAnotherEndpointWhenOneIsKilledBeforeTheFirstByte) {
  EngineProcess a(kFast), b(kFast);
  ASSERT_FALSE(a.url.empty() || b.url.empty());
  GatewayProcess gw(gateway_yaml({a.url, b.url}, "round-robin"));
  ASSERT_FALSE(gw.url.empty());
  ASSERT_EQ(gw.post("/v1/chat/completions", chat("warm", 2, false)).status, 200);
  a.proc->signal(SIGKILL);
  a.proc->stop();
  for (int i = 0; i < 6; ++i) {
    auto r = gw.post("/v1/chat/completions", chat("after kill " + std::to_string(i), 3, i % 2));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(*r.header("x-kvgate-endpoint"), b.url);
  }
  EXPECT_GE(gw.metric("kvgate_upstream_retries_total", {{"pool", "main"}}), 1);
  EXPECT_GE(gw.metric("kvgate_upstream_errors_total", {{"kind", "connect"}}), 1);
  EXPECT_EQ(gw.proc->stop(), 0) << gw.proc->errors();
}

TEST(GatewayProxy, EngineDyingMidStreamEndsWithAnErrorEvent) {
  std::vector<std::string> args = kFast;
  args.insert(args.end(), {"--abort-after-tokens", "3"});
  EngineProcess a(args);
  ASSERT_FALSE(a.url.empty());
  GatewayProcess gw(gateway_yaml({a.url}));
  ASSERT_FALSE(gw.url.empty());
  auto r = gw.post("/v1/chat/completions", chat("die please", 10, true));
  ASSERT_EQ(r.status, 200);
  auto events = sse_events(r.body);
  ASSERT_GE(events.size(), 3u) << r.body;
  EXPECT_EQ(events.back(), "[DONE]");
  auto err = parse_json(events[events.size() - 2]);
  EXPECT_EQ(err.at("error").at("code").as_string(), "upstream_error") << r.body;
  EXPECT_EQ(err.at("error").at("type").as_string(), "server_error");
  EXPECT_GE(gw.metric("kvgate_upstream_errors_total", {{"kind", "closed"}}), 1);
  // The gateway is fine afterwards.
  EXPECT_EQ(io::http_fetch("GET", gw.url + "/health")->status, 200);
  EXPECT_EQ(gw.proc->stop(), 0) << gw.proc->errors();
}

TEST(GatewayProxy, DrainWithStreamsInFlightLosesNone) {
  // Slow enough that streams are in flight when SIGTERM arrives (~20 ms per token).
  EngineProcess a({"--time-scale", "0.5", "--model", "sim"});
  ASSERT_FALSE(a.url.empty());
  GatewayProcess gw(gateway_yaml({a.url}));
  ASSERT_FALSE(gw.url.empty());
  constexpr int kStreams = 6;
  std::vector<std::future<io::HttpClientResponse>> streams;
  for (int i = 0; i < kStreams; ++i) {
    streams.push_back(std::async(std::launch::async, [&gw, i] {
      return gw.post("/v1/chat/completions", chat("drain " + std::to_string(i), 40, true));
    }));
  }
  for (int i = 0; i < 400 && gw.metric("kvgate_active_streams") < kStreams; ++i) {
    // Waits for the kvgate serve child to have all the streams open.
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(gw.metric("kvgate_active_streams"), kStreams);
  gw.proc->signal(SIGTERM);
  for (auto& f : streams) {
    auto r = f.get();
    EXPECT_EQ(r.status, 200);
    auto events = sse_events(r.body);
    ASSERT_EQ(events.size(), 42u) << r.body;  // role, 40 tokens, [DONE]
    EXPECT_EQ(events.back(), "[DONE]");
  }
  EXPECT_EQ(gw.proc->stop(std::chrono::seconds(20)), 0) << gw.proc->errors();
}

TEST(GatewayProxy, BadInputOverTheWire) {
  EngineProcess a(kFast);
  ASSERT_FALSE(a.url.empty());
  GatewayProcess gw(gateway_yaml({a.url}));
  ASSERT_FALSE(gw.url.empty());
  struct Case {
    std::string body;
    int status;
  };
  for (const Case& c : std::vector<Case>{
           {"{", 400},
           {R"({"model":"sim","messages":"x"})", 400},
           {R"({"messages":[{"role":"user","content":"x"}]})", 400},
           {R"({"model":"nope","messages":[{"role":"user","content":"x"}]})", 404},
           {R"({"model":"sim","messages":[]})", 400},
           {std::string(100 * 1024, ' '), 413},
       }) {
    auto r = gw.post("/v1/chat/completions", c.body);
    EXPECT_EQ(r.status, c.status) << c.body.substr(0, 80);
    EXPECT_TRUE(parse_json(r.body).as_object().contains("error")) << r.body;
  }
  EXPECT_EQ(io::http_fetch("PUT", gw.url + "/v1/models")->status, 405);
  EXPECT_EQ(io::http_fetch("GET", gw.url + "/v2")->status, 404);
  EXPECT_EQ(gw.proc->stop(), 0) << gw.proc->errors();
}

TEST(GatewayProxy, CheckReportsConfigErrorsWithLocation) {
  std::string bad = write_temp_file("bad.yaml", gateway_yaml({"127.0.0.1:1"}));
  auto p = ChildProcess::spawn(kvgate_bin(), {"serve", "--check", bad});
  ASSERT_TRUE(p);
  for (int i = 0; i < 1000 && (*p)->running(); ++i) {
    // Waits for the kvgate serve --check child to exit by itself.
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ((*p)->stop(), 2);
  EXPECT_NE((*p)->errors().find(":13:9: pools.main.endpoints[0]: expected http://host:port"),
            std::string::npos)
      << (*p)->errors();
}

// The exit code and stderr of `kvgate ARGS...` run to its end (a refused config exits at
// once; one that would run is stopped after 10 s, and its code then says so).
std::pair<int, std::string> run_to_exit(const std::vector<std::string>& args) {
  auto p = ChildProcess::spawn(kvgate_bin(), args);
  if (!p) return {-1000, "cannot spawn kvgate: " + p.error()};
  // Waits for the process to exit on its own.
  for (int i = 0; i < 1000 && (*p)->running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const int code = (*p)->stop();
  return {code, (*p)->errors()};
}

std::string config_with_source(const std::string& name, const std::string& source) {
  return write_temp_file(name,
                         "listeners:\n  - {address: 127.0.0.1, port: 0}\n"
                         "pools:\n  main:\n    discovery:\n      sources:\n"
                         "        - " +
                             source + "\nmodels:\n  - {name: sim, pool: main}\n");
}

// One rule: what `serve` refuses, `serve --check` refuses, with the same exit code and
// message: a config error exits 2 (a file discovery source whose directory does not
// exist), a config that cannot start exits 1 (a Kubernetes source whose kubeconfig cannot
// be read: serve fails to start the source, --check tries what start would).
TEST(GatewayProxy, CheckRefusesWhatServeRefusesWithTheSameMessage) {
  const std::string kubeconfig =
      ::testing::TempDir() + "/no-such-kubeconfig." + std::to_string(::getpid());
  struct Case {
    std::string source;
    int exit_code;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"{kind: file, path: /no/such/kvgate/dir/endpoints.yaml}", 2,
            ":7:30: pools.main.discovery.sources[0].path: directory /no/such/kvgate/dir does "
            "not exist"},
           {"{kind: kubernetes, selector: app=vllm, kubeconfig: '" + kubeconfig + "'}", 1,
            "kvgate serve: pool main: discovery source kubernetes: " + kubeconfig + ": "},
       }) {
    SCOPED_TRACE(c.source);
    const std::string config = config_with_source("refused.yaml", c.source);
    const auto checked = run_to_exit({"serve", "--check", config});
    const auto served = run_to_exit({"serve", config});
    EXPECT_EQ(checked.first, c.exit_code) << checked.second;
    EXPECT_EQ(served.first, c.exit_code) << served.second;
    EXPECT_EQ(checked.second, served.second);
    EXPECT_NE(checked.second.find(c.message), std::string::npos) << checked.second;
  }
}

// A file source whose file is not there yet is not refused (serve starts the pool empty
// and waits for it, docs/discovery.md): --check says ok.
TEST(GatewayProxy, CheckAcceptsAFileSourceWhoseFileIsNotWrittenYet) {
  const std::string endpoints =
      ::testing::TempDir() + "/not-written-yet." + std::to_string(::getpid()) + ".yaml";
  const std::string config =
      config_with_source("waiting.yaml", "{kind: file, path: '" + endpoints + "'}");
  const auto checked = run_to_exit({"serve", "--check", config});
  EXPECT_EQ(checked.first, 0) << checked.second;
}

}  // namespace gateway_proxy_test
}  // namespace kvgate::testing
