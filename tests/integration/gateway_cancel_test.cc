// Cancellation with real processes: a client that leaves (whole answer or stream, before
// or after the first byte) makes `kvgate serve` close its upstream exchange at once, so
// `kvgate engine` aborts the request (counted as finished_reason="abort"); the router's
// load is released at once and the gateway counts the cancellation.
#include <gtest/gtest.h>

#include "support/fault_fixture.h"

namespace kvgate::testing {
namespace {

// Slow enough that a long answer is still being generated when the client leaves.
const std::vector<std::string> kSlow = {"--time-scale", "0.5", "--model", "sim"};

double engine_running(const EngineProcess& e) {
  return metric_at(e.url, "vllm:num_requests_running");
}
double engine_aborted(const EngineProcess& e) {
  return metric_at(e.url, "vllm:request_success_total", {{"finished_reason", "abort"}});
}
double cancellations(GatewayProcess& gw, const std::string& phase) {
  return gw.metric("kvgate_client_cancellations_total", {{"pool", "main"}, {"phase", phase}});
}

TEST(GatewayCancel, WholeAnswerClientLeavingAbortsTheEngineRequestAtOnce) {
  EngineProcess engine(kSlow);
  ASSERT_FALSE(engine.url.empty());
  AdminGateway g(gateway_yaml({engine.url}, "round-robin", kLoopbackAdmin));
  ASSERT_FALSE(g.admin_url.empty());
  RawClient client(g.gw.url);
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.send(raw_post("/v1/chat/completions", chat_body("leave me", 4000, false))));
  ASSERT_TRUE(eventually([&] { return engine_running(engine) == 1; }));
  EXPECT_EQ(g.in_flight(), 1);
  const auto left = std::chrono::steady_clock::now();
  client.close();
  ASSERT_TRUE(eventually([&] { return engine_aborted(engine) == 1; }, std::chrono::seconds(3)));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - left).count();
  EXPECT_LT(seconds, 1.0) << "the engine learnt of the cancellation only after " << seconds;
  EXPECT_EQ(engine_running(engine), 0);
  EXPECT_TRUE(eventually([&] { return g.in_flight() == 0; }));
  EXPECT_EQ(cancellations(g.gw, "before_first_byte"), 1);
  EXPECT_EQ(g.gw.metric("kvgate_requests_total", {{"status", "499"}}), 1);
  EXPECT_EQ(g.gw.metric("kvgate_active_requests"), 0);
  // Nobody counts the endpoint as failed: the next request goes there and is answered.
  auto r = g.gw.post("/v1/chat/completions", chat_body("after", 3, false));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(g.gw.proc->stop(), 0) << g.gw.proc->errors();
}

TEST(GatewayCancel, StreamClientLeavingAfterTheFirstTokensAbortsTheEngineRequest) {
  EngineProcess engine(kSlow);
  ASSERT_FALSE(engine.url.empty());
  AdminGateway g(gateway_yaml({engine.url}, "round-robin", kLoopbackAdmin));
  ASSERT_FALSE(g.admin_url.empty());
  RawClient client(g.gw.url);
  ASSERT_TRUE(client.send(raw_post("/v1/chat/completions", chat_body("stream", 4000, true))));
  // The role chunk and a first token.
  ASSERT_TRUE(client.read_until("\"content\":\"", std::chrono::seconds(10)));
  EXPECT_EQ(g.in_flight(), 1);
  client.close();
  ASSERT_TRUE(eventually([&] { return engine_aborted(engine) == 1; }, std::chrono::seconds(3)));
  EXPECT_EQ(engine_running(engine), 0);
  EXPECT_TRUE(eventually([&] { return g.in_flight() == 0; }));
  EXPECT_EQ(cancellations(g.gw, "after_first_byte"), 1);
  EXPECT_EQ(g.gw.metric("kvgate_active_streams"), 0);
  EXPECT_EQ(g.gw.proc->stop(), 0) << g.gw.proc->errors();
}

TEST(GatewayCancel, StreamClientLeavingBeforeTheEngineAnsweredClosesTheExchange) {
  // The engine holds every request 2 s before scheduling it (nor sends its head).
  std::vector<std::string> args = kSlow;
  args.insert(args.end(), {"--stall-ms", "2000", "--stall-rate", "1"});
  EngineProcess engine(args);
  ASSERT_FALSE(engine.url.empty());
  AdminGateway g(gateway_yaml({engine.url}, "round-robin", kLoopbackAdmin));
  ASSERT_FALSE(g.admin_url.empty());
  RawClient client(g.gw.url);
  ASSERT_TRUE(client.send(raw_post("/v1/chat/completions", chat_body("early", 50, true))));
  ASSERT_TRUE(eventually([&] { return g.in_flight() == 1; }));
  client.close();
  // Released at once, long before the stall ends.
  EXPECT_TRUE(eventually([&] { return g.in_flight() == 0; }, std::chrono::seconds(1)));
  EXPECT_TRUE(eventually([&] { return cancellations(g.gw, "before_first_byte") == 1; },
                         std::chrono::seconds(1)));
  // After the stall the engine finds the connection gone and never schedules it.
  // A negative check: the kvgate engine child's stall (2 s) ends and it must not run the request;
  // nothing shows that it did not.
  std::this_thread::sleep_for(std::chrono::milliseconds(2200));
  EXPECT_EQ(engine_running(engine), 0);
  EXPECT_EQ(metric_at(engine.url, "vllm:request_success_total", {{"finished_reason", "length"}}),
            0);
  EXPECT_EQ(g.gw.proc->stop(), 0) << g.gw.proc->errors();
}

}  // namespace
}  // namespace kvgate::testing
