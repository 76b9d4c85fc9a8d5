// RouteLease: the router's load for a routed request is released exactly once, by a call
// or by the destructor (an exception, an early exit, a destroyed coroutine), and never
// after the owner said the pool is gone.
#include "gateway/data/route_lease.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <stdexcept>
#include <thread>

#include "env/system_clock.h"
#include "gateway/data/pool_runtime.h"

namespace kvgate::gateway {
namespace {

namespace asio = boost::asio;

class RouteLeaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PoolConfig config;
    config.name = "main";
    config.router.policy.name = "round-robin";
    config.endpoints.push_back({.url = "http://127.0.0.1:9001"});
    auto pool = PoolRuntime::create(config, {}, io_.get_executor(), metrics_, env::system_clock());
    ASSERT_TRUE(pool.ok()) << pool.error();
    pool_ = std::move(*pool);
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    work_.reset();
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }

  // Routes request `id` (the router now counts it in flight) and leases it.
  RouteLease routed(route::RequestId id) {
    route::RouteRequest r{.id = id, .prompt_tokens = 40};
    Pick p = asio::co_spawn(io_, pool_->pick(r, {}), asio::use_future).get();
    EXPECT_TRUE(p.decision.accepted());
    return RouteLease(*pool_, id, alive_);
  }
  struct Load {
    uint64_t in_flight = 0, prefill_tokens = 0, failed = 0;
    size_t tracked = 0;
  };
  // Read on the strand, after everything queued before it.
  Load load() {
    Load l;
    asio::co_spawn(io_, pool_->with_router([&l](route::Router& r) {
      const route::Endpoint* e = r.pool().get(0);
      l.in_flight = e->load.in_flight;
      l.prefill_tokens = e->load.active_prefill_tokens;
      l.failed = e->load.failed_total;
      l.tracked = r.pool().requests_in_flight();
    }),
                   asio::use_future)
        .get();
    return l;
  }

  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_{io_.get_executor()};
  GatewayMetrics metrics_;
  std::unique_ptr<PoolRuntime> pool_;
  std::shared_ptr<std::atomic<bool>> alive_ = std::make_shared<std::atomic<bool>>(true);
  std::thread thread_;
};

TEST_F(RouteLeaseTest, FinishReleasesOnceAndTheDestructorThenDoesNothing) {
  {
    RouteLease lease = routed(1);
    EXPECT_TRUE(lease.held());
    EXPECT_EQ(load().in_flight, 1u);
    lease.first_token();
    lease.first_token();  // once
    EXPECT_EQ(load().prefill_tokens, 0u);
    lease.finish(true);
    EXPECT_FALSE(lease.held());
    EXPECT_EQ(load().in_flight, 0u);
  }
  Load l = load();
  EXPECT_EQ(l.tracked, 0u);
  EXPECT_EQ(l.failed, 0u);  // the destructor of a finished lease counts nothing
}

TEST_F(RouteLeaseTest, AnExceptionInACoroutineReleasesTheLoadAsAFailure) {
  RouteLease lease = routed(2);
  ASSERT_EQ(load().in_flight, 1u);
  auto failing = [](RouteLease held) -> asio::awaitable<void> {
    (void)held;
    throw std::runtime_error("stream pump failed");
    co_return;
  };
  auto done = asio::co_spawn(io_, failing(std::move(lease)), asio::use_future);
  EXPECT_THROW(done.get(), std::runtime_error);
  EXPECT_FALSE(lease.held());  // it was moved into the coroutine
  Load l = load();
  EXPECT_EQ(l.in_flight, 0u);
  EXPECT_EQ(l.tracked, 0u);
  EXPECT_EQ(l.failed, 1u);
}

TEST_F(RouteLeaseTest, MoveAssignmentReleasesTheOldLeaseAndKeepsTheNew) {
  RouteLease a = routed(3);
  RouteLease b = routed(4);
  ASSERT_EQ(load().in_flight, 2u);
  a = std::move(b);  // request 3 released (as failed), 4 now held by `a`
  EXPECT_EQ(load().in_flight, 1u);
  EXPECT_EQ(a.id(), 4u);
  a.done(0, true, pool_->clock().now(), /*first_token=*/true);
  Load l = load();
  EXPECT_EQ(l.in_flight, 0u);
  EXPECT_EQ(l.failed, 1u);
}

TEST_F(RouteLeaseTest, NothingIsCalledOnceThePoolIsSaidToBeGone) {
  RouteLease lease = routed(5);
  alive_->store(false);
  lease = RouteLease();  // would release request 5: the pool is "gone", so it does not
  alive_->store(true);
  EXPECT_EQ(load().in_flight, 1u);
  RouteLease again(*pool_, 5, alive_);
  again.finish(true);
  EXPECT_EQ(load().in_flight, 0u);
}

}  // namespace
}  // namespace kvgate::gateway
