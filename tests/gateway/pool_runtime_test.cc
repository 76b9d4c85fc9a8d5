// PoolRuntime's run-time endpoint changes: add, drain-then-remove, observers, and that
// routing follows them. The strand runs on a real io_context thread, as in the gateway.
#include "gateway/pool_runtime.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <future>
#include <mutex>
#include <thread>

namespace kvgate::gateway {
namespace {

namespace asio = boost::asio;

class PoolRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PoolConfig config;
    config.name = "main";
    config.router.policy.name = "round-robin";
    config.endpoints.push_back({.url = "http://127.0.0.1:9001"});
    auto pool = PoolRuntime::create(config, {}, io_.get_executor(), metrics_);
    ASSERT_TRUE(pool.ok()) << pool.error();
    pool_ = std::move(*pool);
    observer_ = pool_->on_change([this](const EndpointChange& c) {
      std::lock_guard lock(mu_);
      changes_.push_back(c);
    });
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    if (pool_) pool_->remove_observer(observer_);
    work_.reset();
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }

  Pick pick(route::RequestId id) {
    route::RouteRequest r{.id = id, .prompt_tokens = 10};
    return asio::co_spawn(io_, pool_->pick(r, {}), asio::use_future).get();
  }
  route::Health health(route::EndpointId id) {
    route::Health h = route::Health::kUnhealthy;
    asio::co_spawn(io_, pool_->with_router([&](route::Router& r) {
      if (const route::Endpoint* e = r.pool().get(id)) h = e->health;
    }),
                   asio::use_future)
        .get();
    return h;
  }
  std::vector<EndpointChange::Kind> kinds() {
    std::lock_guard lock(mu_);
    std::vector<EndpointChange::Kind> out;
    for (const auto& c : changes_) out.push_back(c.kind);
    return out;
  }

  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_{io_.get_executor()};
  GatewayMetrics metrics_;
  std::unique_ptr<PoolRuntime> pool_;
  uint64_t observer_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<EndpointChange> changes_;
};

TEST_F(PoolRuntimeTest, AddedEndpointIsListedObservedAndRoutedTo) {
  KvEventsConfig events{.publisher = "tcp://127.0.0.1:5557"};
  auto id = pool_->add_endpoint_sync({.url = "http://127.0.0.1:9002"}, events);
  ASSERT_TRUE(id.ok()) << id.error();
  auto all = pool_->endpoints();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[1].url, "http://127.0.0.1:9002");
  EXPECT_EQ(all[1].port, 9002);
  ASSERT_TRUE(all[1].kv_events.has_value());
  EXPECT_EQ(all[1].kv_events->publisher, "tcp://127.0.0.1:5557");
  EXPECT_EQ(kinds(), std::vector{EndpointChange::Kind::kAdded});
  // Round-robin over both: the new one gets every other request.
  int to_new = 0;
  for (route::RequestId r = 1; r <= 4; ++r) {
    Pick p = pick(r);
    ASSERT_TRUE(p.endpoint != nullptr);
    if (p.endpoint->id == *id) ++to_new;
    pool_->finished(r, true);
  }
  EXPECT_EQ(to_new, 2);
}

TEST_F(PoolRuntimeTest, BadOrDuplicateUrlIsRefused) {
  EXPECT_FALSE(pool_->add_endpoint_sync({.url = "http://127.0.0.1:9001"}, std::nullopt).ok());
  EXPECT_FALSE(pool_->add_endpoint_sync({.url = "127.0.0.1:9003"}, std::nullopt).ok());
  EXPECT_FALSE(pool_->add_endpoint_sync({.url = "http://127.0.0.1:99999"}, std::nullopt).ok());
  EXPECT_FALSE(pool_->add_endpoint_sync({.url = "http://127.0.0.1:9003/v1"}, std::nullopt).ok());
  EXPECT_EQ(pool_->endpoints().size(), 1u);
  EXPECT_TRUE(kinds().empty());
}

TEST_F(PoolRuntimeTest, RemovalDrainsRequestsInFlightFirst) {
  Pick p = pick(1);
  ASSERT_TRUE(p.endpoint != nullptr);
  const route::EndpointId id = p.endpoint->id;
  auto removal = std::async(std::launch::async, [&] {
    return pool_->remove_endpoint_sync(id, std::chrono::seconds(30));
  });
  // Draining: no new request goes there, the one in flight is still tracked.
  while (kinds().empty()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(health(id), route::Health::kDraining);
  EXPECT_EQ(pick(2).endpoint, nullptr);
  EXPECT_EQ(removal.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  pool_->finished(1, true);
  auto drained = removal.get();
  ASSERT_TRUE(drained.ok()) << drained.error();
  EXPECT_TRUE(*drained);
  EXPECT_TRUE(pool_->endpoints().empty());
  EXPECT_FALSE(pool_->endpoint(id).has_value());
  EXPECT_EQ(kinds(),
            (std::vector{EndpointChange::Kind::kRemoving, EndpointChange::Kind::kRemoved}));
}

TEST_F(PoolRuntimeTest, RemovalGivesUpWaitingAfterTheTimeout) {
  Pick p = pick(1);
  ASSERT_TRUE(p.endpoint != nullptr);
  auto drained = pool_->remove_endpoint_sync(p.endpoint->id, std::chrono::milliseconds(60));
  ASSERT_TRUE(drained.ok()) << drained.error();
  EXPECT_FALSE(*drained);
  EXPECT_TRUE(pool_->endpoints().empty());
  pool_->finished(1, true);  // a late callback for a removed endpoint is ignored
  // The same URL can come back.
  EXPECT_TRUE(pool_->add_endpoint_sync({.url = "http://127.0.0.1:9001"}, std::nullopt).ok());
  EXPECT_NE(pick(2).endpoint, nullptr);
}

TEST_F(PoolRuntimeTest, RemovingAnUnknownEndpointIsAnError) {
  EXPECT_FALSE(pool_->remove_endpoint_sync(7, std::chrono::milliseconds(10)).ok());
  EXPECT_TRUE(kinds().empty());
}

// Without a tokenizer, 4 prompt bytes make one pseudo-token: shared text prefixes give
// shared block keys, and the token count is of the right order.
TEST_F(PoolRuntimeTest, ByteLevelKeysWithoutATokenizer) {
  const uint32_t block = pool_->config().router.block_size;
  auto keys_of = [&](std::string prompt, uint32_t& tokens) {
    InspectedRequest r;
    r.prompt_text = std::move(prompt);
    std::vector<kv::BlockKey> keys;
    pool_->keys_for(r, "", ApiKind::kCompletion, "m", keys, tokens);
    return keys;
  };
  const std::string head(4 * block, 'a');
  uint32_t n = 0;
  const auto a = keys_of(head + "tail", n);
  EXPECT_EQ(n, block + 1);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(keys_of(head + "other text", n), a);
  EXPECT_EQ(n, block + 3);
  std::string changed = head;
  changed.back() = 'b';
  EXPECT_NE(keys_of(changed, n), a);
  EXPECT_TRUE(keys_of("123456789", n).empty());
  EXPECT_EQ(n, 3u);
}

}  // namespace
}  // namespace kvgate::gateway
