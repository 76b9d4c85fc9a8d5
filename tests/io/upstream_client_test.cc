// UpstreamClient's pool of idle connections against a real HttpServer on loopback.
#include "io/upstream_client.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <future>
#include <string>
#include <string_view>
#include <thread>

#include "io/http_server.h"

namespace kvgate::io {
namespace {

namespace asio = boost::asio;

TEST(UpstreamClient, AnEndpointsIdleConnectionsCloseWhenItLeaves) {
  auto server = HttpServer::start({}, [](HttpRequest&&, std::shared_ptr<ResponseStream> s) {
    s->respond(HttpResponse{200, "application/json", {}, "{}"});
  });
  ASSERT_TRUE(server) << server.error();
  const uint16_t port = (*server)->port();
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::thread thread([&] { io.run(); });
  auto client = std::make_unique<UpstreamClient>(io.get_executor(), UpstreamOptions{});
  UpstreamRequest req;
  req.target = "/v1/completions";
  req.body = "{}";
  auto exchange = [&]() -> asio::awaitable<bool> {
    auto r = co_await client->send("127.0.0.1", port, req);
    if (!r) co_return false;
    auto body = co_await (*r)->read_all(std::chrono::seconds(5), 1 << 20);
    co_return body&&* body == "{}";
  };
  EXPECT_TRUE(asio::co_spawn(io, exchange(), asio::use_future).get());
  EXPECT_EQ(client->idle_connections(), 1u);                         // kept for the next request
  client->close_idle("127.0.0.1", static_cast<uint16_t>(port + 1));  // another endpoint
  EXPECT_EQ(client->idle_connections(), 1u);
  client->close_idle("127.0.0.1", port);
  EXPECT_EQ(client->idle_connections(), 0u);
  EXPECT_TRUE(asio::co_spawn(io, exchange(), asio::use_future).get());  // a new one
  client.reset();
  work.reset();
  io.stop();
  thread.join();
  (*server)->stop(std::chrono::milliseconds(0));
}

// A borrowed body is what is sent (its bytes, its length), not `body`: the tracer sends its
// batches from buffers that hold more than the batch.
TEST(UpstreamClient, SendsABorrowedBodyInsteadOfItsOwn) {
  std::promise<std::string> received;
  auto server = HttpServer::start({}, [&](HttpRequest&& r, std::shared_ptr<ResponseStream> s) {
    const std::string length(r.header("content-length").value_or(""));
    received.set_value(length + " " + r.body);
    s->respond(HttpResponse{200, "application/json", {}, "{}"});
  });
  ASSERT_TRUE(server) << server.error();
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::thread thread([&] { io.run(); });
  auto client = std::make_unique<UpstreamClient>(io.get_executor(), UpstreamOptions{});
  const std::string buffer = R"({"a":1}xxxxxxxx)";  // the body, then room
  UpstreamRequest req;
  req.target = "/v1/traces";
  req.body = "not sent";
  req.borrowed_body = std::string_view(buffer).substr(0, 7);
  auto exchange = [&]() -> asio::awaitable<int> {
    auto r = co_await client->send("127.0.0.1", (*server)->port(), req);
    if (!r) co_return 0;
    const int status = (*r)->status();
    co_await (*r)->read_all(std::chrono::seconds(5), 1 << 20);
    co_return status;
  };
  EXPECT_EQ(asio::co_spawn(io, exchange(), asio::use_future).get(), 200);
  EXPECT_EQ(received.get_future().get(), R"(7 {"a":1})");
  client.reset();
  work.reset();
  io.stop();
  thread.join();
  (*server)->stop(std::chrono::milliseconds(0));
}

}  // namespace
}  // namespace kvgate::io
