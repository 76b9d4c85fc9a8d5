// PoolRuntime's run-time endpoint changes: add, drain-then-remove, observers, and that
// routing follows them; and its flow-control queue's timeout. The strand runs on a real
// io_context thread, as in the gateway; the pool's clock is a ManualClock (drain
// timeouts, breaker periods and the queue's timers move with it).
#include "gateway/data/pool_runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include "../../integration/support/eventually.h"
#include "core/kv/pseudo_tokens.h"
#include "gateway/data/flow_glue.h"
#include "gateway/data/pool_flow.h"

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
    auto pool = PoolRuntime::create(config, {}, io_.get_executor(), metrics_, clock_);
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
  ManualClock clock_{kSecond};
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
  // Draining: no new request goes there, the one in flight is still tracked. (Waits for
  // the pool's I/O thread, which runs the removal, to report it.)
  ASSERT_TRUE(testing::eventually([&] { return !kinds().empty(); }, std::chrono::seconds(10),
                                  std::chrono::milliseconds(2)));
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
  const route::EndpointId id = p.endpoint->id;
  auto removal = std::async(std::launch::async, [&] {
    return pool_->remove_endpoint_sync(id, std::chrono::milliseconds(60));
  });
  // The timeout is on the pool's clock: however long the drain waits in real time, it
  // gives up only once that clock has passed 60 ms.
  EXPECT_EQ(removal.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  while (removal.wait_for(std::chrono::milliseconds(20)) == std::future_status::timeout) {
    clock_.advance(60 * kMillisecond);
  }
  auto drained = removal.get();
  ASSERT_TRUE(drained.ok()) << drained.error();
  EXPECT_FALSE(*drained);
  EXPECT_TRUE(pool_->endpoints().empty());
  pool_->finished(1, true);  // a late callback for a removed endpoint is ignored
  // The same URL can come back.
  EXPECT_TRUE(pool_->add_endpoint_sync({.url = "http://127.0.0.1:9001"}, std::nullopt).ok());
  EXPECT_NE(pick(2).endpoint, nullptr);
}

// A breaker's open period is measured on the pool's clock: the endpoint stays out of
// routing until that clock has passed `open_for` (5 s by default), then takes requests
// again (half-open).
TEST_F(PoolRuntimeTest, BreakerPutsTheEndpointBackWhenItsOpenPeriodEnds) {
  for (int i = 0; i < 5; ++i) pool_->endpoint_result(0, false);
  EXPECT_EQ(health(0), route::Health::kUnhealthy);
  EXPECT_EQ(pick(1).endpoint, nullptr);
  clock_.advance(5 * kSecond - kMillisecond);
  EXPECT_EQ(pick(2).endpoint, nullptr);
  clock_.advance(kMillisecond);
  Pick p = pick(3);
  ASSERT_NE(p.endpoint, nullptr);
  EXPECT_EQ(p.endpoint->id, 0u);
  EXPECT_EQ(health(0), route::Health::kHealthy);
  pool_->finished(3, true);
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
    openai::InspectedRequest r;
    r.prompt_text = std::move(prompt);
    std::vector<kv::BlockKey> keys;
    pool_->keys_for(r, "", openai::ApiKind::kCompletion, "", keys, tokens);
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

// vLLM's cache_salt seeds the block hashes: the same prompt under two salts shares no key,
// under one salt the same keys, and without a salt the keys are the unsalted ones (the
// pool's precomputed seed, as before salts were read).
TEST_F(PoolRuntimeTest, CacheSaltSeedsTheBlockKeys) {
  const uint32_t block = pool_->config().router.block_size;
  const std::string prompt(8 * block, 'a');
  auto keys_of = [&](std::string salt, std::string_view adapter = {}) {
    openai::InspectedRequest r;
    r.prompt_text = prompt;
    r.cache_salt = std::move(salt);
    std::vector<kv::BlockKey> keys;
    uint32_t tokens = 0;
    pool_->keys_for(r, "", openai::ApiKind::kCompletion, adapter, keys, tokens);
    return keys;
  };
  const auto plain = keys_of("");
  const auto a = keys_of("tenant-a");
  ASSERT_EQ(plain.size(), 2u);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(keys_of("tenant-a"), a);
  const auto b = keys_of("tenant-b");
  for (kv::BlockKey k : b) {
    EXPECT_EQ(std::count(a.begin(), a.end(), k), 0);
    EXPECT_EQ(std::count(plain.begin(), plain.end(), k), 0);
  }
  EXPECT_NE(a, plain);
  // No salt: exactly the keys of the pool's unsalted seed.
  std::vector<uint32_t> ids;
  kv::append_pseudo_tokens(prompt, ids);
  std::vector<kv::BlockKey> want;
  kv::hash_blocks(ids, block, kv::block_seed("main", "", ""), want);
  EXPECT_EQ(plain, want);
  // keys_of (the engine fallback's ids) seeds them the same way.
  std::vector<kv::BlockKey> of;
  pool_->keys_of(ids, of, {}, "tenant-a");
  EXPECT_EQ(of, a);
  pool_->keys_of(ids, of);
  EXPECT_EQ(of, plain);
  // An adapter and a salt together: apart from each alone.
  const auto both = keys_of("tenant-a", "sql-lora");
  EXPECT_NE(both, a);
  EXPECT_NE(both, keys_of("", "sql-lora"));
}

// The engine fallback asks the pool's healthy endpoints in turn, skipping those it is told
// to avoid (ones that just failed it); none left: null, never a wait.
TEST_F(PoolRuntimeTest, TokenizeEndpointTakesTurnsAndSkipsAvoidedAndUnhealthyOnes) {
  auto second = pool_->add_endpoint_sync({.url = "http://127.0.0.1:9002"}, std::nullopt);
  ASSERT_TRUE(second.ok()) << second.error();
  auto ask = [&](std::vector<route::EndpointId> avoid) {
    auto e =
        asio::co_spawn(io_, pool_->tokenize_endpoint(std::move(avoid)), asio::use_future).get();
    return e ? e->port : 0;
  };
  EXPECT_EQ(ask({}), 9001);
  EXPECT_EQ(ask({}), 9002);
  EXPECT_EQ(ask({}), 9001);
  EXPECT_EQ(ask({0}), 9002);
  EXPECT_EQ(ask({0, *second}), 0);
  asio::co_spawn(io_, pool_->with_router([&](route::Router& r) {
    r.pool().set_health(*second, route::Health::kUnhealthy);
  }),
                 asio::use_future)
      .get();
  EXPECT_EQ(ask({}), 9001);
  EXPECT_EQ(ask({}), 9001);
  EXPECT_EQ(ask({0}), 0);
}

// A pool with a flow-control queue whose one endpoint has no room (unhealthy): requests
// wait in the queue, the standard band for at most kMaxWait.
class PoolRuntimeFlowTest : public ::testing::Test {
 protected:
  static constexpr Nanos kMaxWait = 2 * kSecond;

  void SetUp() override {
    PoolConfig config;
    config.name = "main";
    config.router.policy.name = "round-robin";
    config.endpoints.push_back({.url = "http://127.0.0.1:9001"});
    config.flow.enabled = true;
    config.flow.max_wait = {30 * kSecond, kMaxWait, 30 * kSecond};  // critical, standard, ...
    flow_ = config.flow;
    auto pool = PoolRuntime::create(config, {}, io_.get_executor(), metrics_, clock_);
    ASSERT_TRUE(pool.ok()) << pool.error();
    pool_ = std::move(*pool);
    thread_ = std::thread([this] { io_.run(); });
    with_router([](route::Router& r) { r.pool().set_health(0, route::Health::kUnhealthy); });
  }
  void TearDown() override {
    work_.reset();
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }

  // Runs `fn` on the pool's strand and waits for it: whatever the strand was given
  // before (on the one I/O thread) has run too.
  void with_router(std::function<void(route::Router&)> fn) {
    asio::co_spawn(io_, pool_->with_router(std::move(fn)), asio::use_future).get();
  }

  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_{io_.get_executor()};
  GatewayMetrics metrics_;
  ManualClock clock_{kSecond};
  route::FlowQueueConfig flow_;
  std::unique_ptr<PoolRuntime> pool_;
  std::thread thread_;
};

// The queue's timeout is a rule on the pool's clock (io::ClockTimer): a queued request is
// answered 503 queue_timeout once the clock has passed its max wait (and the 1 ms the
// queue's timer adds past an expiry), not before, and the test never sleeps.
TEST_F(PoolRuntimeFlowTest, AQueuedRequestTimesOutWhenTheClockPassesItsMaxWait) {
  const route::RouteRequest request{.id = 1, .prompt_tokens = 10};
  std::future<Pick> answer =
      asio::co_spawn(io_, pool_->admit(request, FlowTicket{}), asio::use_future);
  with_router([](route::Router&) {});  // the admission ran: queued, its timer armed
  ASSERT_EQ(pool_->flow_queued(), 1u);

  clock_.advance(kMaxWait);  // its max wait, to the nanosecond: the timer is 1 ms later
  with_router([](route::Router&) {});
  EXPECT_EQ(answer.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  EXPECT_EQ(pool_->flow_queued(), 1u);

  clock_.advance(kMillisecond);  // the timer fires: the queue expires the request
  ASSERT_EQ(answer.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const Pick pick = answer.get();
  EXPECT_EQ(pick.flow_status, 503);
  EXPECT_EQ(pick.flow_reason, "queue_timeout");
  EXPECT_EQ(pick.queued, kMaxWait + kMillisecond);
  EXPECT_EQ(pick.endpoint, nullptr);
  EXPECT_EQ(pool_->flow_queued(), 0u);
  const io::HttpResponse response = flow_refusal_response(pick, flow_);
  EXPECT_EQ(response.status, 503);
  EXPECT_NE(response.body.find("queue_timeout"), std::string::npos) << response.body;
}

// Where routing ids come from is decided at creation from `tokenize:` and the files.
TEST(PoolRuntimeTokenizePlan, EngineModeAutoFallbackAndLocalRefusal) {
  asio::io_context io;
  GatewayMetrics metrics;
  ManualClock clock;
  PoolConfig config;
  config.name = "p";
  config.endpoints.push_back({.url = "http://127.0.0.1:9001"});
  auto none = PoolRuntime::create(config, {}, io.get_executor(), metrics, clock);
  ASSERT_TRUE(none.ok()) << none.error();
  EXPECT_FALSE((*none)->tokenize_plan().uses_engine());
  EXPECT_NE((*none)->tokenize_plan().tokenizer.find("none: approximate routing"),
            std::string::npos);

  config.tokenize.mode = TokenizeMode::kEngine;
  auto engine = PoolRuntime::create(config, {}, io.get_executor(), metrics, clock);
  ASSERT_TRUE(engine.ok()) << engine.error();
  EXPECT_TRUE((*engine)->tokenize_plan().chat_from_engine);
  EXPECT_TRUE((*engine)->tokenize_plan().completion_from_engine);
  EXPECT_EQ((*engine)->tokenizer(), nullptr);

  // A chat template kvgate refuses: chat requests go to the engines, completions do not
  // (there is no tokenizer for them either way); with `tokenize: local` the start fails.
  const std::string bad = ::testing::TempDir() + "/bad_tokenizer_config.json";
  {
    std::FILE* f = std::fopen(bad.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(R"({"chat_template": "{% for m in %}"})", f);
    std::fclose(f);
  }
  config.chat_template_file = bad;
  config.tokenize.mode = TokenizeMode::kAuto;
  auto fallback = PoolRuntime::create(config, {}, io.get_executor(), metrics, clock);
  ASSERT_TRUE(fallback.ok()) << fallback.error();
  EXPECT_TRUE((*fallback)->tokenize_plan().chat_from_engine);
  EXPECT_FALSE((*fallback)->tokenize_plan().completion_from_engine);
  EXPECT_NE((*fallback)->tokenize_plan().chat_template.find("refused"), std::string::npos);
  config.tokenize.mode = TokenizeMode::kLocal;
  auto local = PoolRuntime::create(config, {}, io.get_executor(), metrics, clock);
  ASSERT_FALSE(local.ok());
  EXPECT_NE(local.error().find(bad), std::string::npos) << local.error();
  std::remove(bad.c_str());
}

// A completion prompt gets the post-processor's special tokens, as vLLM adds them (and as
// `kvgate engine` does): Llama 2's <s> first, so block keys match the
// engines' KV events.
TEST(PoolRuntimeKeys, CompletionPromptsGetThePostProcessorsTokensAsVllmAddsThem) {
  const char* dir = std::getenv("KVGATE_SOURCE_DIR");
  const std::string file = std::string(dir ? dir : "") + "/.deps/fixtures/llama2/tokenizer.json";
  if (!dir || !std::ifstream(file)) GTEST_SKIP() << "no Llama 2 fixture (scripts/bootstrap)";
  asio::io_context io;
  GatewayMetrics metrics;
  ManualClock clock;
  PoolConfig config;
  config.name = "p";
  config.tokenizer_file = file;
  config.endpoints.push_back({.url = "http://127.0.0.1:9001"});
  auto pool = PoolRuntime::create(config, {}, io.get_executor(), metrics, clock);
  ASSERT_TRUE(pool.ok()) << pool.error();
  openai::InspectedRequest r;
  r.prompt_text = "Hello world";
  std::vector<kv::BlockKey> keys;
  uint32_t tokens = 0;
  std::vector<uint32_t> ids;
  (*pool)->keys_for(r, "", openai::ApiKind::kCompletion, "", keys, tokens, &ids);
  auto plain = (*pool)->tokenizer()->encode("Hello world");
  ASSERT_TRUE(plain.ok());
  ASSERT_EQ(ids.size(), plain->size() + 1);
  EXPECT_EQ(ids.front(), 1u);  // <s>
  EXPECT_TRUE(std::equal(plain->begin(), plain->end(), ids.begin() + 1));
  EXPECT_EQ(tokens, ids.size());
}

}  // namespace
}  // namespace kvgate::gateway
