#include "io/health_probe.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <thread>

#include "../integration/support/refusing_port.h"

namespace kvgate::io {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace health_probe_test {

using namespace std::chrono_literals;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

TEST(HealthProbeTest, ParsesUrls) {
  Result<Url> a = parse_url("http://127.0.0.1:8000/health");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, "8000");
  EXPECT_EQ(a->target, "/health");
  Result<Url> b = parse_url("http://localhost");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->port, "80");
  EXPECT_EQ(b->target, "/");
  Result<Url> c = parse_url("http://[::1]:9/x?y=1");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->host, "::1");
  EXPECT_EQ(c->port, "9");
  EXPECT_EQ(c->target, "/x?y=1");
  EXPECT_FALSE(parse_url("https://x/health").ok());
  EXPECT_FALSE(parse_url("http://:80/").ok());
  EXPECT_FALSE(parse_url("http://host:port/").ok());
  EXPECT_FALSE(parse_url("localhost:8000").ok());
}

// Answers each connection once with `status_line`, after reading the request head.
class OneLineServer {
 public:
  explicit OneLineServer(std::string status_line)
      : acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
        status_line_(std::move(status_line)) {
    thread_ = std::thread([this] {
      while (true) {
        tcp::socket socket(io_);
        boost::system::error_code ec;
        acceptor_.accept(socket, ec);
        if (ec || stopping_) return;
        asio::streambuf head;
        asio::read_until(socket, head, "\r\n\r\n", ec);
        std::string response = status_line_ + "\r\nContent-Length: 0\r\n\r\n";
        asio::write(socket, asio::buffer(response), ec);
      }
    });
  }
  ~OneLineServer() {
    stopping_ = true;
    boost::system::error_code ec;
    tcp::socket poke(io_);
    poke.connect(acceptor_.local_endpoint(), ec);
    thread_.join();
  }
  std::string url() const {
    return "http://127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port()) + "/health";
  }

 private:
  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::string status_line_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

TEST(HealthProbeTest, ReadsTheStatusCode) {
  OneLineServer ok("HTTP/1.1 200 OK");
  EXPECT_EQ(probe_health(*parse_url(ok.url()), 2000ms), 200);
  OneLineServer starting("HTTP/1.1 503 Service Unavailable");
  EXPECT_EQ(probe_health(*parse_url(starting.url()), 2000ms), 503);
  OneLineServer garbage("SSH-2.0-OpenSSH");
  EXPECT_EQ(probe_health(*parse_url(garbage.url()), 2000ms), std::nullopt);
}

TEST(HealthProbeTest, RefusedConnectionIsNoAnswer) {
  const kvgate::testing::RefusingPort dead;
  const std::string url = dead.url() + "/health";
  auto before = std::chrono::steady_clock::now();
  EXPECT_EQ(probe_health(*parse_url(url), 2000ms), std::nullopt);
  EXPECT_LT(std::chrono::steady_clock::now() - before, 1500ms);
}

TEST(HealthProbeTest, SilentServerTimesOut) {
  asio::io_context io;
  tcp::acceptor a(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));  // never accepts
  std::string url = "http://127.0.0.1:" + std::to_string(a.local_endpoint().port()) + "/health";
  auto before = std::chrono::steady_clock::now();
  EXPECT_EQ(probe_health(*parse_url(url), 100ms), std::nullopt);
  auto took = std::chrono::steady_clock::now() - before;
  EXPECT_GE(took, 90ms);
  EXPECT_LT(took, 1000ms);
}

}  // namespace health_probe_test
}  // namespace kvgate::io
