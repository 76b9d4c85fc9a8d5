// Rate limits shared through a real redis-server started by the test: two limiters (two
// gateway replicas) share one budget; a dead Redis follows the failure policy.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "core/limit/rate_limiter.h"
#include "io/redis_counter_store.h"
#include "support/process.h"

namespace kvgate {
namespace {

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

Nanos Now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Result<std::unique_ptr<testing::ChildProcess>> StartRedis(int port) {
  auto p = testing::ChildProcess::spawn(
      "/usr/bin/redis-server", {"--port", std::to_string(port), "--bind", "127.0.0.1", "--save", "",
                                "--appendonly", "no", "--daemonize", "no"});
  if (!p) return p;
  if (auto line = (*p)->wait_for_line("Ready to accept connections"); !line) {
    return Error(line.error());
  }
  return p;
}

constexpr Nanos kMinute = 60 * kSecond;

class RedisRateLimit : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = FreePort();
    auto r = StartRedis(port_);
    ASSERT_TRUE(r) << r.error();
    redis_ = std::move(*r);
  }
  io::RedisCounterStore::Options Opts() const {
    return {.port = port_, .reconnect_interval = 100 * kMillisecond};
  }
  int port_ = 0;
  std::unique_ptr<testing::ChildProcess> redis_;
  // A fixed window base so the test never straddles a window edge.
  const Nanos t0_ = 1000 * kMinute;
  const std::string tenant_ = "acme-" + std::to_string(::getpid());
};

TEST_F(RedisRateLimit, TwoReplicasShareOneBudget) {
  io::RedisCounterStore store_a(Opts()), store_b(Opts());
  limit::RateLimiter a(store_a, limit::FailurePolicy::kClosed);
  limit::RateLimiter b(store_b, limit::FailurePolicy::kClosed);
  std::vector<limit::Rule> rules{
      {.name = "tpm", .measure = limit::Measure::kTotalTokens, .limit = 1000}};
  ASSERT_TRUE(a.check(tenant_, "m", rules, t0_).allowed);
  ASSERT_TRUE(a.charge(tenant_, "m", rules, {700, 0}, t0_ + kSecond));
  // Replica B sees A's usage: under the limit, so this request is admitted...
  limit::LimitDecision d = b.check(tenant_, "m", rules, t0_ + 2 * kSecond);
  ASSERT_TRUE(d.allowed) << d.error;
  // ...and completes, crossing the limit.
  ASSERT_TRUE(b.charge(tenant_, "m", rules, {200, 300}, t0_ + 3 * kSecond));
  // The next request, on either replica, is refused.
  d = a.check(tenant_, "m", rules, t0_ + 4 * kSecond);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule, "tpm");
  EXPECT_DOUBLE_EQ(d.used, 1200);
  EXPECT_FALSE(b.check(tenant_, "m", rules, t0_ + 4 * kSecond).allowed);
  EXPECT_EQ(a.store_failures() + b.store_failures(), 0u);
}

TEST_F(RedisRateLimit, CountersExpireInRedis) {
  io::RedisCounterStore store(Opts());
  std::vector<limit::Increment> inc{{"kvg-test:" + tenant_, 5, 200 * kMillisecond}};
  ASSERT_TRUE(store.add(inc, Now()));
  std::vector<std::string> keys{inc[0].key};
  EXPECT_EQ((*store.get(keys, Now()))[0], 5);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_EQ((*store.get(keys, Now()))[0], 0);
}

TEST_F(RedisRateLimit, DeadRedisFollowsThePolicyAndRecovers) {
  io::RedisCounterStore store(Opts());
  limit::RateLimiter open(store, limit::FailurePolicy::kOpen);
  limit::RateLimiter closed(store, limit::FailurePolicy::kClosed);
  std::vector<limit::Rule> rules{
      {.name = "tpm", .measure = limit::Measure::kTotalTokens, .limit = 1000}};
  ASSERT_TRUE(open.check(tenant_, "m", rules, t0_).allowed);
  redis_->stop();

  auto started = std::chrono::steady_clock::now();
  limit::LimitDecision d = open.check(tenant_, "m", rules, t0_);
  EXPECT_TRUE(d.allowed);
  EXPECT_TRUE(d.store_error);
  d = closed.check(tenant_, "m", rules, t0_);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule, "store");
  EXPECT_FALSE(closed.charge(tenant_, "m", rules, {1, 1}, t0_));
  // Failing is fast: no call waits on a dead Redis for long.
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(1));
  EXPECT_GE(open.store_failures() + closed.store_failures(), 3u);

  auto again = StartRedis(port_);
  ASSERT_TRUE(again) << again.error();
  redis_ = std::move(*again);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // past reconnect_interval
  d = closed.check(tenant_, "m", rules, t0_);
  EXPECT_TRUE(d.allowed) << d.error;
  EXPECT_FALSE(d.store_error);
}

}  // namespace
}  // namespace kvgate
