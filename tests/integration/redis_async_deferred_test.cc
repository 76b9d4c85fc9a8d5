// io::RedisAsync with deferred replies (Options::deferred; replica sync's cycles,
// docs/replicas.md "Deferred replies") against a real redis-server: nothing watches the
// socket, so the executor never runs for a reply; poll() takes the replies that came, and
// fails the waiting commands once the oldest is past its deadline; a server gone is seen
// at the next poll.
#include <gtest/gtest.h>
#include <hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "io/redis_async.h"
#include "support/eventually.h"
#include "support/process.h"

namespace kvgate::testing {
namespace redis_async_deferred_test {

// What a command's callback saw.
struct Seen {
  bool done = false;
  std::string reply;  // a string or status reply's text
  std::string error;
};

io::RedisAsync::Callback record(Seen& seen) {
  return [&seen](const redisReply* r, std::string_view error) {
    seen.done = true;
    if (r != nullptr && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS)) {
      seen.reply.assign(r->str, r->len);
    }
    seen.error = std::string(error);
  };
}

// Polls `conn` until `seen` is done or `timeout` passes (the reply takes a loopback round
// trip to come; each poll reads what is there and returns).
bool poll_until(io::RedisAsync& conn, const Seen& seen, std::chrono::milliseconds timeout) {
  return eventually(
      [&] {
        conn.poll();
        return seen.done;
      },
      timeout, std::chrono::milliseconds(1));
}

TEST(RedisAsyncDeferred, RepliesComeOnlyWhenPolledAndTheExecutorNeverRunsForThem) {
  const int port = free_port();
  auto redis = start_redis(port);
  ASSERT_TRUE(redis) << redis.error();
  boost::asio::io_context io;
  io::RedisAsync conn(io.get_executor(), {.port = port, .command_timeout = kSecond});
  conn.set_deferred(true, kSecond);
  Seen set, get;
  conn.command(std::vector<std::string>{"SET", "deferred-k", "v1"}, record(set));
  conn.command(std::vector<std::string>{"GET", "deferred-k"}, record(get));
  EXPECT_EQ(conn.waiting(), 2u);
  conn.flush();  // connects and writes both
  // Redis answers within milliseconds; nothing the executor holds is about the connection
  // (no socket wait, no deadline timer): it has no work at all.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(io.poll(), 0u);
  EXPECT_FALSE(set.done);
  EXPECT_FALSE(get.done);
  // The replies are taken by poll(), in order.
  ASSERT_TRUE(poll_until(conn, get, std::chrono::seconds(2)));
  EXPECT_TRUE(set.done);
  EXPECT_EQ(set.reply, "OK");
  EXPECT_EQ(get.reply, "v1");
  EXPECT_EQ(conn.waiting(), 0u);
  EXPECT_TRUE(conn.connected());
  EXPECT_EQ(conn.connects(), 1u);
  EXPECT_EQ(conn.failures(), 0u);

  conn.close();

  // A reply looked at after its deadline has passed, but that came before it: taken, not
  // failed (the deadline is for a reply that does not come).
  io::RedisAsync quick(io.get_executor(), {.port = port});
  quick.set_deferred(true, 20 * kMillisecond);
  Seen late;
  quick.command(std::vector<std::string>{"GET", "deferred-k"}, record(late));
  quick.flush();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // (A write that a connect in progress held back goes at the first poll.)
  ASSERT_TRUE(poll_until(quick, late, std::chrono::seconds(2)));
  EXPECT_EQ(late.reply, "v1");
  EXPECT_EQ(late.error, "");
  EXPECT_EQ(quick.failures(), 0u);
  EXPECT_EQ(io.poll(), 0u);
  quick.close();
}

TEST(RedisAsyncDeferred, ACommandWithoutAReplyFailsAtThePollPastItsDeadline) {
  // A server that takes connections (the kernel's backlog) and never answers.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 8), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);

  boost::asio::io_context io;
  io::RedisAsync conn(io.get_executor(), {.port = port});
  conn.set_deferred(true, 50 * kMillisecond);
  Seen seen;
  conn.command(std::vector<std::string>{"PING"}, record(seen));
  conn.flush();
  conn.poll();  // before the deadline: nothing yet, and no failure
  EXPECT_FALSE(seen.done);
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  EXPECT_FALSE(seen.done);  // nothing looks at the deadline but poll()
  EXPECT_EQ(io.poll(), 0u);
  conn.poll();
  ASSERT_TRUE(seen.done);
  EXPECT_EQ(seen.error, "no reply within 50 ms");
  EXPECT_EQ(conn.failures(), 1u);
  EXPECT_FALSE(conn.connected());
  conn.close();
  ::close(fd);
}

TEST(RedisAsyncDeferred, ARedisGoneIsSeenAtTheNextPollAndTheNextCommandFailsAtOnce) {
  // A write to the connection Redis closed must fail, not end the test process (kvgate
  // serve ignores SIGPIPE too).
  ::signal(SIGPIPE, SIG_IGN);
  const int port = free_port();
  auto redis = start_redis(port);
  ASSERT_TRUE(redis) << redis.error();
  boost::asio::io_context io;
  io::RedisAsync conn(io.get_executor(), {.port = port, .reconnect_interval = 10 * kSecond});
  conn.set_deferred(true, kSecond);
  Seen first;
  conn.command(std::vector<std::string>{"PING"}, record(first));
  conn.flush();
  ASSERT_TRUE(poll_until(conn, first, std::chrono::seconds(2)));
  EXPECT_EQ(first.reply, "PONG");

  (*redis)->signal(SIGKILL);
  (*redis)->stop();
  Seen lost;
  conn.command(std::vector<std::string>{"PING"}, record(lost));
  conn.flush();
  // The closed connection is read at a poll: the command fails there.
  ASSERT_TRUE(poll_until(conn, lost, std::chrono::seconds(2)));
  EXPECT_NE(lost.error, "");
  EXPECT_FALSE(conn.connected());
  EXPECT_GE(conn.failures(), 1u);
  // Within the reconnect interval a command fails at once, posted (never inside command()).
  Seen refused;
  conn.command(std::vector<std::string>{"PING"}, record(refused));
  EXPECT_FALSE(refused.done);
  io.poll();
  ASSERT_TRUE(refused.done);
  EXPECT_NE(refused.error.find("redis unavailable"), std::string::npos) << refused.error;
  conn.close();
}

}  // namespace redis_async_deferred_test
}  // namespace kvgate::testing
