// The fault matrix, gateway side (ctest label `faults`, `make faults`): a real
// `kvgate serve` SIGTERMed with 200 streams in flight, holding 10,000 idle connections and
// a slowloris of 1,000, and flooded with oversized heads and bodies, while it keeps
// serving everyone else.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <thread>

#include "support/fault_fixture.h"

namespace kvgate::testing {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace faults_gateway_test {

const std::vector<std::string> kFast = {"--time-scale", "0.01", "--model", "sim"};

// Milliseconds of one whole chat answer through the gateway.
double request_ms(GatewayProcess& gw) {
  const auto t0 = std::chrono::steady_clock::now();
  auto r = gw.post("/v1/chat/completions", chat_body("latency probe", 2, false));
  EXPECT_EQ(r.status, 200) << r.body;
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double median_ms(GatewayProcess& gw, int n) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(request_ms(gw));
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void raise_fd_limit() {
  rlimit r{};
  ::getrlimit(RLIMIT_NOFILE, &r);
  r.rlim_cur = r.rlim_max;  // children (the gateway) inherit it
  ::setrlimit(RLIMIT_NOFILE, &r);
}

TEST(Faults, GatewaySigtermWith200StreamsInFlightCutsNoneWithinTheDrainTime) {
  raise_fd_limit();
  // ~7 ms a token: 300-token streams last ~2 s, so all 200 are in flight together also on
  // a loaded machine (60 tokens at time scale 0.5 could end before the last one started).
  EngineProcess engine({"--time-scale", "1", "--model", "sim", "--max-num-seqs", "256"});
  ASSERT_FALSE(engine.url.empty());
  GatewayProcess gw(gateway_yaml({engine.url}));  // drain_ms: 20000
  ASSERT_FALSE(gw.url.empty());
  constexpr int kStreams = 200;
  constexpr int kTokens = 300;
  std::vector<RawClient> clients;
  clients.reserve(kStreams);
  for (int i = 0; i < kStreams; ++i) {
    clients.emplace_back(gw.url);
    ASSERT_TRUE(clients.back().send(
        raw_post("/v1/chat/completions", chat_body("drain" + std::to_string(i), kTokens, true))));
  }
  ASSERT_TRUE(eventually([&] { return gw.metric("kvgate_active_streams") == kStreams; }));
  gw.proc->signal(SIGTERM);
  int complete = 0;
  for (RawClient& c : clients) {
    c.read_until("data: [DONE]", std::chrono::seconds(30));
    const auto events = sse_events(response_body(c.received()));
    complete += events.size() == kTokens + 2 && events.back() == "[DONE]";
  }
  EXPECT_EQ(complete, kStreams) << "cut: " << kStreams - complete;
  EXPECT_EQ(gw.proc->stop(std::chrono::seconds(25)), 0) << gw.proc->errors();
  std::printf("[ faults ] SIGTERM with %d streams in flight: %d complete, %d cut\n", kStreams,
              complete, kStreams - complete);
}

TEST(Faults, TenThousandIdleConnectionsAndASlowlorisLeaveOthersServedAtTheirUsualLatency) {
  raise_fd_limit();
  EngineProcess engine(kFast);
  ASSERT_FALSE(engine.url.empty());
  GatewayProcess gw(fault_yaml({engine.url}, "header_ms: 5000, idle_ms: 60000, connect_ms: 1000"));
  ASSERT_FALSE(gw.url.empty());
  const double baseline = median_ms(gw, 21);

  constexpr int kIdle = 10000;
  constexpr int kSlow = 1000;
  std::vector<RawClient> idle;
  idle.reserve(kIdle);
  for (int i = 0; i < kIdle; ++i) {
    idle.emplace_back(gw.url);
    ASSERT_TRUE(idle.back().connected()) << "connection " << i;
  }
  std::vector<RawClient> slow;
  slow.reserve(kSlow);
  for (int i = 0; i < kSlow; ++i) {
    slow.emplace_back(gw.url);
    ASSERT_TRUE(slow.back().send("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"));
  }
  // The slowloris: one more header byte per connection every 100 ms, never the end.
  std::atomic<bool> stop{false};
  std::thread loris([&] {
    while (!stop) {
      for (RawClient& c : slow) c.send("a");
      // Paces the slowloris (a byte per connection every 100 ms): it waits for nothing.
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  const double during = median_ms(gw, 21);
  stop = true;
  loris.join();
  std::printf(
      "[ faults ] %d idle + %d slowloris connections: median request %.1f ms (%.1f ms "
      "without)\n",
      kIdle, kSlow, during, baseline);
  EXPECT_LT(during, baseline * 3 + 5) << "baseline " << baseline << " ms";
  // The slow clients are dropped once their head took longer than timeouts.header_ms.
  int dropped = 0;
  for (int i = 0; i < kSlow; i += 10) dropped += slow[i].closed_by_peer(std::chrono::seconds(10));
  EXPECT_EQ(dropped, kSlow / 10);
  EXPECT_EQ(gw.proc->stop(), 0) << gw.proc->errors();
}

TEST(Faults, HeaderAndBodyFloodsAreRefusedWhileOthersAreServed) {
  raise_fd_limit();
  EngineProcess engine(kFast);
  ASSERT_FALSE(engine.url.empty());
  GatewayProcess gw(gateway_yaml({engine.url}));  // 8 KiB heads, 64 KiB bodies
  ASSERT_FALSE(gw.url.empty());
  constexpr int kFlooders = 30;
  std::atomic<int> refused{0}, still_open{0};
  // Each flooder sends up to 4 MiB: a head that never ends, a body past its limit, or a
  // chunked body that never ends. The gateway answers 431/413 or closes; never takes it.
  auto flood = [&](int kind) {
    RawClient c(gw.url);
    std::string start;
    if (kind == 0) start = "GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Flood: ";
    if (kind == 1) {
      start =
          "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          "Content-Length: 104857600\r\n\r\n{\"model\":\"sim\",\"messages\":\"";
    }
    if (kind == 2) {
      start =
          "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          "Transfer-Encoding: chunked\r\n\r\n";
    }
    if (!c.send(start)) return;
    const std::string block =
        kind == 2 ? "2000\r\n" + std::string(8192, 'b') + "\r\n" : std::string(8192, 'a');
    bool open = true;
    for (int i = 0; i < 512 && open; ++i) open = c.send(block);
    const bool closed = c.closed_by_peer(std::chrono::seconds(10));
    const std::string& got = c.received();
    if (got.starts_with("HTTP/1.1 431") || got.starts_with("HTTP/1.1 413") || closed) {
      ++refused;
    } else {
      ++still_open;
    }
  };
  std::vector<std::thread> flooders;
  for (int i = 0; i < kFlooders; ++i) flooders.emplace_back(flood, i % 3);
  const double during = median_ms(gw, 11);
  for (auto& t : flooders) t.join();
  EXPECT_EQ(refused.load(), kFlooders);
  EXPECT_EQ(still_open.load(), 0);
  std::printf("[ faults ] %d flooders refused; median request meanwhile %.1f ms\n", refused.load(),
              during);
  EXPECT_EQ(gw.proc->stop(), 0) << gw.proc->errors();
}

}  // namespace faults_gateway_test
}  // namespace kvgate::testing
