// Rate limits shared through a real redis-server started by the test, over the
// asynchronous store: two limiters (two gateway replicas) share one budget; commands are
// pipelined on one connection; a paused (SIGSTOP) Redis times out without blocking the
// event loop; a dead Redis follows the failure policy and the store reconnects.
// GCC 12 reports a false -Wmismatched-new-delete on Asio coroutine frames (GCC bug 109224).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>

#include "env/system_clock.h"
#include "gateway/data/tenant_limiter.h"
#include "io/redis_counter_store.h"
#include "support/process.h"

namespace kvgate {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace redis_rate_limit_test {
namespace asio = boost::asio;
using gateway::RateLimitConfig;
using gateway::Tenant;
using gateway::TenantLimiter;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr Nanos kMinute = 60 * kSecond;

// Runs `io` until `done` holds (or 10 s pass).
bool run_until(asio::io_context& io, const std::function<bool()>& done) {
  const auto give_up = steady_clock::now() + std::chrono::seconds(10);
  io.restart();
  while (!done() && steady_clock::now() < give_up) io.run_one_for(milliseconds(20));
  return done();
}

class RedisRateLimit : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = testing::free_port();
    auto r = testing::start_redis(port_);
    ASSERT_TRUE(r) << r.error();
    redis_ = std::move(*r);
  }
  RateLimitConfig config(bool fail_closed, int timeout_ms = 50) const {
    RateLimitConfig c;
    c.store = RateLimitConfig::Store::kRedis;
    c.redis.port = static_cast<uint16_t>(port_);
    c.redis.timeout = milliseconds(timeout_ms);
    c.fail_closed = fail_closed;
    return c;
  }
  std::unique_ptr<TenantLimiter> make_limiter(bool fail_closed, int timeout_ms = 50) {
    return std::make_unique<TenantLimiter>(
        config(fail_closed, timeout_ms), io_.get_executor(), [this] { ++store_failures_; },
        env::system_clock());
  }
  // One check, run to completion on io_.
  TenantLimiter::Checked check(TenantLimiter& l, Nanos now) {
    std::optional<TenantLimiter::Checked> out;
    asio::co_spawn(
        io_, [&]() -> asio::awaitable<void> { out = co_await l.check_async(tenant_, "m", now); },
        asio::detached);
    EXPECT_TRUE(run_until(io_, [&] { return out.has_value(); }));
    return out.value_or(TenantLimiter::Checked{});
  }
  // Lets `d` pass on io_ (a poll's pause, the loop still running).
  void pause(milliseconds d) {
    asio::steady_timer t(io_, d);
    bool fired = false;
    t.async_wait([&](auto) { fired = true; });
    run_until(io_, [&] { return fired; });
  }

  int port_ = 0;
  std::unique_ptr<testing::ChildProcess> redis_;
  asio::io_context io_;
  int store_failures_ = 0;
  // A fixed window base so the test never straddles a window edge.
  const Nanos t0_ = 1000 * kMinute;
  const Tenant tenant_{.name = "acme-" + std::to_string(::getpid()),
                       .limits = {.tokens_per_minute = 1000}};  // one total_tokens rule
};

TEST_F(RedisRateLimit, TwoReplicasShareOneBudget) {
  auto a = make_limiter(true), b = make_limiter(true);
  ASSERT_TRUE(check(*a, t0_).decision.allowed);
  a->charge_async(tenant_, "m", {700, 0}, t0_ + kSecond);
  // A's next check is pipelined behind its charge on the same connection: it sees it.
  ASSERT_TRUE(check(*a, t0_ + kSecond).decision.allowed);
  // Replica B sees A's usage: under the limit, so this request is admitted...
  TenantLimiter::Checked c = check(*b, t0_ + 2 * kSecond);
  ASSERT_TRUE(c.decision.allowed) << c.decision.error;
  // ...and completes, crossing the limit.
  b->charge_async(tenant_, "m", {200, 300}, t0_ + 3 * kSecond);
  // The next request, on either replica, is refused.
  c = check(*b, t0_ + 4 * kSecond);
  EXPECT_FALSE(c.decision.allowed);
  c = check(*a, t0_ + 4 * kSecond);
  EXPECT_FALSE(c.decision.allowed);
  EXPECT_EQ(c.decision.rule, "tokens_per_minute");
  EXPECT_DOUBLE_EQ(c.decision.used, 1200);
  EXPECT_EQ(store_failures_, 0);
}

TEST_F(RedisRateLimit, CommandsPipelineOnOneConnectionAndAddsCoalesce) {
  io::RedisCounterStore store(io_.get_executor(), {.port = port_});
  const std::string key = "kvg-test:pipe:" + std::to_string(::getpid());
  // 200 adds issued at once: the first goes out, the other 199 add up behind it.
  int added = 0;
  for (int i = 0; i < 200; ++i) {
    std::vector<limit::Increment> inc{{key, 1, kMinute}};
    store.add(inc, [&](Status s) { added += s ? 1 : 0; });
  }
  ASSERT_TRUE(run_until(io_, [&] { return added == 200; }));
  // 300 reads issued before any answer: all waiting on the one connection at once.
  int answered = 0;
  const std::vector<std::string> keys{key};
  for (int i = 0; i < 300; ++i) {
    store.get(keys, [&](Result<std::vector<int64_t>> v) {
      ASSERT_TRUE(v) << v.error();
      EXPECT_EQ((*v)[0], 200);
      ++answered;
    });
  }
  EXPECT_EQ(store.connection().waiting(), 300u);
  ASSERT_TRUE(run_until(io_, [&] { return answered == 300; }));
  EXPECT_EQ(store.connection().connects(), 1u);
  EXPECT_EQ(store.connection().failures(), 0u);
}

TEST_F(RedisRateLimit, CountersExpireInRedis) {
  io::RedisCounterStore store(io_.get_executor(), {.port = port_});
  const std::vector<std::string> keys{"kvg-test:exp:" + std::to_string(::getpid())};
  std::vector<limit::Increment> inc{{keys[0], 5, 200 * kMillisecond}};
  bool added = false;
  store.add(inc, [&](Status s) { added = static_cast<bool>(s); });
  ASSERT_TRUE(run_until(io_, [&] { return added; }));
  auto read = [&] {
    std::optional<int64_t> v;
    store.get(keys, [&](Result<std::vector<int64_t>> r) { v = r ? (*r)[0] : -1; });
    run_until(io_, [&] { return v.has_value(); });
    return v.value_or(-1);
  };
  EXPECT_EQ(read(), 5);
  const auto give_up = steady_clock::now() + std::chrono::seconds(5);
  while (read() != 0 && steady_clock::now() < give_up) pause(milliseconds(50));
  EXPECT_EQ(read(), 0);
}

TEST_F(RedisRateLimit, PausedRedisTimesOutWithoutBlockingTheLoop) {
  auto open = make_limiter(false, 200);
  ASSERT_TRUE(check(*open, t0_).decision.allowed);  // connected
  redis_->signal(SIGSTOP);
  // 50 checks in flight against a Redis that does not answer, and a 5 ms ticker on the
  // same loop: the ticker keeps ticking while they wait, and all fail open together
  // after the 200 ms timeout.
  std::vector<std::optional<TenantLimiter::Checked>> out(50);
  const auto started = steady_clock::now();
  for (auto& o : out) {
    asio::co_spawn(
        io_,
        [&, l = open.get()]() -> asio::awaitable<void> {
          o = co_await l->check_async(tenant_, "m", t0_);
        },
        asio::detached);
  }
  int ticks = 0;
  asio::steady_timer ticker(io_);
  std::function<void()> tick = [&] {
    ticker.expires_after(milliseconds(5));
    ticker.async_wait([&](boost::system::error_code ec) {
      if (ec) return;
      ++ticks;
      tick();
    });
  };
  tick();
  const bool all = run_until(io_, [&] {
    return std::all_of(out.begin(), out.end(), [](const auto& o) { return o.has_value(); });
  });
  const auto took = steady_clock::now() - started;
  ticker.cancel();
  redis_->signal(SIGCONT);
  ASSERT_TRUE(all);
  for (const auto& o : out) {
    EXPECT_TRUE(o->decision.allowed);
    EXPECT_TRUE(o->decision.store_error);
  }
  EXPECT_GE(took, milliseconds(190));
  EXPECT_LT(took, milliseconds(1500));
  // The loop was never blocked: ~40 ticks of 5 ms in 200 ms (half of them on a busy box).
  EXPECT_GE(ticks, 15);
  EXPECT_EQ(store_failures_, 50);
}

TEST_F(RedisRateLimit, DeadRedisFollowsThePolicyAndRecovers) {
  auto open = make_limiter(false), closed = make_limiter(true);
  ASSERT_TRUE(check(*open, t0_).decision.allowed);
  ASSERT_TRUE(check(*closed, t0_).decision.allowed);
  redis_->stop();

  const auto started = steady_clock::now();
  TenantLimiter::Checked c = check(*open, t0_);
  EXPECT_TRUE(c.decision.allowed);
  EXPECT_TRUE(c.decision.store_error);
  c = check(*closed, t0_);
  EXPECT_FALSE(c.decision.allowed);
  EXPECT_EQ(c.decision.rule, "store");
  // Within the reconnect interval: refused at once, no connection attempt.
  c = check(*closed, t0_);
  EXPECT_FALSE(c.decision.allowed);
  EXPECT_LT(steady_clock::now() - started, std::chrono::seconds(1));
  EXPECT_GE(store_failures_, 3);

  auto again = testing::start_redis(port_);
  ASSERT_TRUE(again) << again.error();
  redis_ = std::move(*again);
  // Reconnects once the reconnect interval (1 s) has passed.
  const auto give_up = steady_clock::now() + std::chrono::seconds(5);
  while ((c = check(*closed, t0_)).decision.store_error && steady_clock::now() < give_up) {
    pause(milliseconds(50));
  }
  EXPECT_TRUE(c.decision.allowed) << c.decision.error;
  EXPECT_FALSE(c.decision.store_error);
}

}  // namespace redis_rate_limit_test
}  // namespace kvgate
