// The fault matrix, engine side (ctest label `faults`, `make faults`): real `kvgate
// engine`s killed, stopped and continued under a real `kvgate serve`, and a fault
// injector that answers garbage, a truncated chunked body or a never-ending stream.
// Each case counts what was lost; the target is nothing that was not already in flight
// on the failed part.
#include <gtest/gtest.h>

#include <future>

#include "support/fault_fixture.h"
#include "support/faulty_upstream.h"

namespace kvgate::testing {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace faults_engine_test {

const std::vector<std::string> kFast = {"--time-scale", "0.01", "--model", "sim"};

// Counts of a batch of streams read to their end.
struct StreamOutcome {
  int complete = 0;     // [DONE] after all their tokens
  int error_event = 0;  // an error event, then [DONE]
  int cut = 0;          // neither: the connection ended without [DONE]
};

StreamOutcome classify(const std::vector<std::string>& bodies, size_t tokens) {
  StreamOutcome o;
  for (const std::string& b : bodies) {
    auto events = sse_events(b);
    if (events.empty() || events.back() != "[DONE]") {
      ++o.cut;
    } else if (b.find("\"error\"") != std::string::npos) {
      ++o.error_event;
    } else if (events.size() == tokens + 2) {  // role chunk, tokens, [DONE]
      ++o.complete;
    } else {
      ++o.cut;
    }
  }
  return o;
}

TEST(Faults, EngineKilledBeforeTheFirstByteIsRetriedElsewhereNothingLost) {
  // Engine a holds every request 10 s before answering (no byte of the answer yet).
  std::vector<std::string> stalled = kFast;
  stalled.insert(stalled.end(), {"--stall-ms", "10000", "--stall-rate", "1"});
  EngineProcess a(stalled), b(kFast);
  ASSERT_FALSE(a.url.empty() || b.url.empty());
  GatewayProcess gw(gateway_yaml({a.url, b.url}, "round-robin"));
  ASSERT_FALSE(gw.url.empty());
  constexpr int kRequests = 8;
  std::vector<std::future<io::HttpClientResponse>> rs;
  for (int i = 0; i < kRequests; ++i) {
    rs.push_back(std::async(std::launch::async, [&gw, i] {
      return gw.post("/v1/chat/completions", chat_body("k" + std::to_string(i), 4, i % 2 == 1));
    }));
  }
  // Half are answered by b; the other half are held by a when it dies.
  ASSERT_TRUE(eventually([&] {
    return gw.metric("kvgate_requests_total", {{"status", "200"}}) == kRequests / 2 &&
           gw.metric("kvgate_active_requests") == kRequests / 2;
  }));
  a.proc->signal(SIGKILL);
  int ok = 0;
  for (auto& f : rs) {
    auto r = f.get();
    ok += r.status == 200 && r.body.find("\"error\"") == std::string::npos;
    EXPECT_EQ(*r.header("x-kvgate-endpoint"), b.url) << r.body;
  }
  EXPECT_EQ(ok, kRequests) << "lost " << kRequests - ok << " requests";
  EXPECT_GE(gw.metric("kvgate_upstream_retries_total", {{"pool", "main"}}), kRequests / 2);
  EXPECT_EQ(gw.proc->stop(), 0) << gw.proc->errors();
}

TEST(Faults, EngineKilledMidStreamEndsItsStreamsWithAnErrorEventOthersComplete) {
  const std::vector<std::string> slow = {"--time-scale", "0.3", "--model", "sim"};
  EngineProcess a(slow), b(slow);
  ASSERT_FALSE(a.url.empty() || b.url.empty());
  GatewayProcess gw(gateway_yaml({a.url, b.url}, "round-robin"));  // migration off
  ASSERT_FALSE(gw.url.empty());
  constexpr int kStreams = 8;
  constexpr int kTokens = 200;
  std::vector<RawClient> clients;
  for (int i = 0; i < kStreams; ++i) {
    clients.emplace_back(gw.url);
    ASSERT_TRUE(clients.back().send(
        raw_post("/v1/chat/completions", chat_body("m" + std::to_string(i), kTokens, true))));
  }
  for (RawClient& c : clients)
    ASSERT_TRUE(c.read_until("\"content\":\"", std::chrono::seconds(10)));
  int on_a = 0;
  for (RawClient& c : clients) on_a += response_header(c.received(), "x-kvgate-endpoint") == a.url;
  a.proc->signal(SIGKILL);
  std::vector<std::string> bodies;
  for (RawClient& c : clients) {
    c.read_until("data: [DONE]", std::chrono::seconds(20));
    bodies.push_back(response_body(c.received()));
  }
  const StreamOutcome o = classify(bodies, kTokens);
  EXPECT_EQ(o.cut, 0);
  EXPECT_EQ(o.error_event, on_a);  // lost: exactly the streams in flight on the dead engine
  EXPECT_EQ(o.complete, kStreams - on_a);
  // The next requests are all served, by b.
  for (int i = 0; i < 4; ++i) {
    auto r = gw.post("/v1/chat/completions", chat_body("after", 3, false));
    EXPECT_EQ(r.status, 200) << r.body;
  }
  std::printf(
      "[ faults ] SIGKILL mid-stream: %d of %d streams in flight on the engine ended with "
      "an error event, %d complete, 0 cut\n",
      o.error_event, kStreams, o.complete);
  EXPECT_EQ(gw.proc->stop(), 0) << gw.proc->errors();
}

TEST(Faults, StoppedEngineTimesOutIsTakenOutAndComesBackAfterSigcont) {
  const std::vector<std::string> slow = {"--time-scale", "0.3", "--model", "sim"};
  EngineProcess a(slow), b(slow);
  ASSERT_FALSE(a.url.empty() || b.url.empty());
  GatewayProcess gw(fault_yaml({a.url, b.url},
                               "header_ms: 2000, drain_ms: 5000, connect_ms: 500, "
                               "upstream_header_ms: 400, stream_idle_ms: 400",
                               "circuit_breaker: {failures: 2, open_ms: 1000}\n"));
  ASSERT_FALSE(gw.url.empty());
  // One stream on each engine, then a stops (a failing GPU that hangs, not crashes).
  RawClient s1(gw.url), s2(gw.url);
  ASSERT_TRUE(s1.send(raw_post("/v1/chat/completions", chat_body("stop1", 200, true))));
  ASSERT_TRUE(s2.send(raw_post("/v1/chat/completions", chat_body("stop2", 200, true))));
  ASSERT_TRUE(s1.read_until("\"content\":\"") && s2.read_until("\"content\":\""));
  a.proc->signal(SIGSTOP);
  const auto stopped = std::chrono::steady_clock::now();
  RawClient& on_a = response_header(s1.received(), "x-kvgate-endpoint") == a.url ? s1 : s2;
  RawClient& on_b = &on_a == &s1 ? s2 : s1;
  // The stalled stream: its idle timeout fires, a clean error event and [DONE].
  ASSERT_TRUE(on_a.read_until("data: [DONE]", std::chrono::seconds(5)));
  const double stalled_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped).count();
  EXPECT_LT(stalled_s, 2.0);
  EXPECT_NE(response_body(on_a.received()).find("upstream_error"), std::string::npos);
  // New requests: those sent to a time out on its head and are retried on b; after two
  // failures the breaker takes a out. None is lost.
  int ok = 0;
  for (int i = 0; i < 6; ++i) {
    auto r = gw.post("/v1/chat/completions", chat_body("during" + std::to_string(i), 2, false));
    ok += r.status == 200;
    EXPECT_EQ(*r.header("x-kvgate-endpoint"), b.url);
  }
  EXPECT_EQ(ok, 6);
  EXPECT_GE(gw.metric("kvgate_upstream_errors_total", {{"endpoint", a.url}, {"kind", "timeout"}}),
            2);
  // The other stream was never disturbed.
  ASSERT_TRUE(on_b.read_until("data: [DONE]", std::chrono::seconds(20)));
  EXPECT_EQ(sse_events(response_body(on_b.received())).size(), 202u);
  // SIGCONT: a comes back once the breaker lets it (half-open after 1 s) and answers.
  a.proc->signal(SIGCONT);
  EXPECT_TRUE(eventually(
      [&] {
        auto r = gw.post("/v1/chat/completions", chat_body("back", 2, false));
        return r.status == 200 && *r.header("x-kvgate-endpoint") == a.url;
      },
      std::chrono::seconds(10)));
  std::printf(
      "[ faults ] SIGSTOP: the stalled stream ended after %.2f s; 6 of 6 new requests "
      "served; the engine is back after SIGCONT\n",
      stalled_s);
  EXPECT_EQ(gw.proc->stop(), 0) << gw.proc->errors();
}

TEST(Faults, EngineAnsweringGarbageIsRetriedOnAnotherNothingLost) {
  FaultyUpstream garbage(FaultyUpstream::Mode::kGarbage);
  EngineProcess b(kFast);
  ASSERT_FALSE(b.url.empty());
  GatewayProcess gw(gateway_yaml({garbage.url(), b.url}, "round-robin"));
  ASSERT_FALSE(gw.url.empty());
  int ok = 0;
  for (int i = 0; i < 6; ++i) {
    auto r = gw.post("/v1/chat/completions", chat_body("g" + std::to_string(i), 3, i % 2 == 0));
    ok += r.status == 200 && r.body.find("\"error\"") == std::string::npos;
  }
  EXPECT_EQ(ok, 6);
  EXPECT_GE(garbage.requests(), 1);
  EXPECT_GE(gw.metric("kvgate_upstream_errors_total", {{"endpoint", garbage.url()}}), 1);
  EXPECT_EQ(gw.proc->stop(), 0) << gw.proc->errors();
}

TEST(Faults, TruncatedChunkedAnswerIsACleanErrorForThatRequestOnly) {
  FaultyUpstream truncated(FaultyUpstream::Mode::kTruncatedChunked);
  EngineProcess b(kFast);
  ASSERT_FALSE(b.url.empty());
  GatewayProcess gw(gateway_yaml({truncated.url(), b.url}, "round-robin"));
  ASSERT_FALSE(gw.url.empty());
  int ok = 0, clean_errors = 0;
  for (int i = 0; i < 6; ++i) {
    auto r = gw.post("/v1/chat/completions", chat_body("cut" + std::to_string(i), 3, false));
    if (r.status == 200) {
      ++ok;
      EXPECT_EQ(*r.header("x-kvgate-endpoint"), b.url);
    } else {
      // The answer's head had come: nothing to retry safely, a clean OpenAI-style error.
      EXPECT_EQ(r.status, 502) << r.body;
      EXPECT_EQ(parse_json(r.body).at("error").at("code"), "upstream_error") << r.body;
      ++clean_errors;
    }
  }
  // Lost: only the requests the broken upstream was answering.
  EXPECT_EQ(clean_errors, truncated.requests());
  EXPECT_EQ(ok + clean_errors, 6);
  EXPECT_GE(ok, 3);
  EXPECT_EQ(gw.proc->stop(), 0) << gw.proc->errors();
}

TEST(Faults, NeverEndingStreamIsCutByTheStreamTimeoutAndTheUpstreamClosed) {
  FaultyUpstream endless(FaultyUpstream::Mode::kNeverEndingSse);
  GatewayProcess gw(fault_yaml(
      {endless.url()}, "header_ms: 2000, drain_ms: 5000, connect_ms: 500, stream_ms: 1000"));
  ASSERT_FALSE(gw.url.empty());
  const auto t0 = std::chrono::steady_clock::now();
  RawClient c(gw.url);
  ASSERT_TRUE(c.send(raw_post("/v1/chat/completions", chat_body("forever", 100000, true))));
  ASSERT_TRUE(c.read_until("data: [DONE]", std::chrono::seconds(5)));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 3.0);
  const auto events = sse_events(response_body(c.received()));
  ASSERT_GE(events.size(), 3u);
  EXPECT_NE(events[events.size() - 2].find("stream timeout"), std::string::npos)
      << events[events.size() - 2];
  EXPECT_TRUE(eventually([&] { return endless.closed_by_peer() == 1; }));
  EXPECT_TRUE(eventually([&] { return gw.metric("kvgate_active_streams") == 0; }));
  EXPECT_EQ(gw.proc->stop(), 0) << gw.proc->errors();
}

}  // namespace faults_engine_test
}  // namespace kvgate::testing
