// Session affinity end to end: `kvgate serve` (round-robin, so that only the session keeps
// a conversation in place) in front of three real `kvgate engine` processes. Every turn of
// a session (x-session-id), each with a prompt of its own, lands on the engine of its
// first turn; new sessions spread over the engines; requests without the header follow
// round-robin. The session's engine is SIGKILLed: the next turn fails over (a retry that
// excludes it) and the session is rebound, so the turns after it stay on the new engine.
// Nothing here waits on time: the router binds a session when it routes, before the
// request is forwarded, and every request is answered before the next is sent.
//
// Two replicas: two `kvgate serve`s sharing their routing events through a real
// redis-server (cluster: sync on), round-robin each. A session's first turn goes through
// replica A; once B has applied A's decisions (B's kvgate_session_affinity_sessions says
// it holds the bindings: polled, not slept on), its next turn through B lands on the
// same engine, kept by the binding A's event carried (counted in B's
// kvgate_session_affinity_requests_total{outcome="kept"}), and so does the turn after,
// back through A.
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "support/fault_fixture.h"

namespace kvgate::testing {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace gateway_session_affinity_test {

const std::vector<std::string> kFast = {"--time-scale", "0.01", "--model", "sim"};

// One pool "main" over `urls`, round-robin, session affinity on.
std::string session_yaml(const std::vector<std::string>& urls) {
  std::string y =
      "listeners:\n  - address: 127.0.0.1\n    port: 0\n"
      "timeouts: {header_ms: 2000, drain_ms: 20000, connect_ms: 1000}\n"
      "retries: {max_attempts: 3}\n"
      "pools:\n  main:\n    block_size: 16\n    router:\n      policy: round-robin\n"
      "      overlap: approx\n"
      "      session_affinity: {header: x-session-id, capacity: 1000, idle_ttl: 10m}\n"
      "    endpoints:\n";
  for (const std::string& u : urls) y += "      - " + u + "\n";
  y += "models:\n  - name: sim\n    pool: main\n";
  return y;
}

// One turn of `session` ("" for none); the endpoint that served it, "" on failure.
std::string turn(GatewayProcess& gw, const std::string& session, const std::string& content) {
  std::vector<io::HttpHeader> headers;
  if (!session.empty()) headers.push_back({"x-session-id", session});
  auto r = gw.post("/v1/chat/completions", chat_body(content, 2, false), headers);
  EXPECT_EQ(r.status, 200) << r.body;
  const std::string* e = r.header("x-kvgate-endpoint");
  return r.status == 200 && e ? *e : std::string();
}

TEST(GatewaySessionAffinity, ASessionStaysOnItsEngineAndMovesWhenTheEngineDies) {
  EngineProcess a(kFast), b(kFast), c(kFast);
  ASSERT_FALSE(a.url.empty() || b.url.empty() || c.url.empty());
  GatewayProcess gw(session_yaml({a.url, b.url, c.url}));
  ASSERT_FALSE(gw.url.empty());

  // Every turn of a session, each its own prompt, on the engine of its first turn.
  const std::string home = turn(gw, "conv-alice", "alice turn 0");
  ASSERT_FALSE(home.empty());
  for (int i = 1; i < 6; ++i) {
    EXPECT_EQ(turn(gw, "conv-alice", "alice turn " + std::to_string(i)), home) << i;
    // Requests without a session in between move round-robin on.
    turn(gw, "", "no session " + std::to_string(i));
  }
  // New sessions spread (round-robin for their first turn), then each stays.
  std::set<std::string> firsts;
  std::vector<std::pair<std::string, std::string>> others;
  for (const char* s : {"conv-bob", "conv-carol", "conv-dave"}) {
    const std::string e = turn(gw, s, std::string(s) + " turn 0");
    firsts.insert(e);
    others.emplace_back(s, e);
  }
  EXPECT_GE(firsts.size(), 2u) << "three new sessions all on one engine";
  for (const auto& [s, e] : others) EXPECT_EQ(turn(gw, s, s + " turn 1"), e) << s;
  // Requests without the header are not kept anywhere: three in a row reach all three.
  std::set<std::string> plain;
  for (int i = 0; i < 3; ++i) plain.insert(turn(gw, "", "plain " + std::to_string(i)));
  EXPECT_EQ(plain.size(), 3u);

  // The session's engine dies: the next turn fails over and the session is rebound.
  EngineProcess* dying = home == a.url ? &a : home == b.url ? &b : &c;
  ASSERT_EQ(dying->url, home);
  dying->proc->signal(SIGKILL);
  dying->proc->stop();
  const std::string moved = turn(gw, "conv-alice", "alice after the crash");
  ASSERT_FALSE(moved.empty());
  EXPECT_NE(moved, home);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(turn(gw, "conv-alice", "alice again " + std::to_string(i)), moved) << i;
  }
  EXPECT_EQ(gw.proc->stop(), 0) << gw.proc->errors();
}

// Replica `replica` of two sharing their routing events through redis-server at
// `redis_port`, round-robin, session affinity on.
std::string replica_yaml(const std::vector<std::string>& urls, int redis_port, int replica) {
  std::string y =
      "listeners:\n  - address: 127.0.0.1\n    port: 0\nthreads: 1\n"
      "timeouts: {header_ms: 2000, drain_ms: 2000, connect_ms: 1000}\n"
      "cluster:\n  redis: {host: 127.0.0.1, port: " +
      std::to_string(redis_port) + ", timeout_ms: 100}\n  replica_id: gw-" +
      std::to_string(replica) + "\n  sync: on\n  flush_ms: 2\n  poll_ms: 2\n  stream_prefix: sa" +
      std::to_string(::getpid()) +
      "\npools:\n  main:\n    block_size: 16\n    router:\n      policy: round-robin\n"
      "      overlap: approx\n"
      "      session_affinity: {header: x-session-id, capacity: 1000, idle_ttl: 10m}\n"
      "    endpoints:\n";
  for (const std::string& u : urls) y += "      - " + u + "\n";
  return y + "models:\n  - name: sim\n    pool: main\n";
}

TEST(GatewaySessionAffinity, TwoReplicasShareASessionsEngineThroughRedis) {
  const int port = free_port();
  auto redis = start_redis(port);
  ASSERT_TRUE(redis) << redis.error();
  EngineProcess e0(kFast), e1(kFast), e2(kFast);
  ASSERT_FALSE(e0.url.empty() || e1.url.empty() || e2.url.empty());
  const std::vector<std::string> urls = {e0.url, e1.url, e2.url};
  GatewayProcess a(replica_yaml(urls, port, 0));
  GatewayProcess b(replica_yaml(urls, port, 1));
  ASSERT_FALSE(a.url.empty() || b.url.empty());
  const metrics::Labels pool = {{"pool", "main"}};

  // First turns through A: round-robin spreads the sessions, A binds each.
  const std::vector<std::string> sessions = {"conv-1", "conv-2", "conv-3", "conv-4", "conv-5"};
  std::vector<std::string> home;
  for (const std::string& s : sessions) {
    home.push_back(turn(a, s, s + " turn 0"));
    ASSERT_FALSE(home.back().empty()) << s;
  }
  EXPECT_EQ(a.metric("kvgate_session_affinity_sessions", pool), 5);
  EXPECT_EQ(
      a.metric("kvgate_session_affinity_requests_total", {{"pool", "main"}, {"outcome", "new"}}),
      5);
  // B holds the five bindings once it has applied A's routing events (the replicas' only
  // link is redis-server: nothing to wait on but B's own count).
  ASSERT_TRUE(eventually([&] { return b.metric("kvgate_session_affinity_sessions", pool) == 5; }))
      << b.metric("kvgate_session_affinity_sessions", pool);
  EXPECT_GE(b.metric("kvgate_session_affinity_bindings_total", pool), 5);

  // The next turns through B: each on its session's engine, kept by the shared binding
  // (B's own round-robin would have spread them elsewhere for some).
  for (size_t i = 0; i < sessions.size(); ++i) {
    EXPECT_EQ(turn(b, sessions[i], sessions[i] + " turn 1"), home[i]) << sessions[i];
  }
  EXPECT_EQ(
      b.metric("kvgate_session_affinity_requests_total", {{"pool", "main"}, {"outcome", "kept"}}),
      5);
  // And back through A (A kept its own bindings; B's rebinds to the same engine changed
  // nothing): the same engines still.
  for (size_t i = 0; i < sessions.size(); ++i) {
    EXPECT_EQ(turn(a, sessions[i], sessions[i] + " turn 2"), home[i]) << sessions[i];
  }
  EXPECT_EQ(
      a.metric("kvgate_session_affinity_requests_total", {{"pool", "main"}, {"outcome", "kept"}}),
      5);
  EXPECT_EQ(a.metric("kvgate_session_affinity_rebindings_total", pool), 0);
  EXPECT_EQ(b.metric("kvgate_session_affinity_rebindings_total", pool), 0);
  EXPECT_EQ(a.proc->stop(), 0) << a.proc->errors();
  EXPECT_EQ(b.proc->stop(), 0) << b.proc->errors();
}

}  // namespace gateway_session_affinity_test
}  // namespace kvgate::testing
