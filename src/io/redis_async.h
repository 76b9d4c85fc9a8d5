// RedisAsync: one non-blocking Redis connection on an Asio executor (hiredis's async API).
//
// hiredis parses and formats; this class gives it an event loop: its addRead/delRead/
// addWrite/delWrite/cleanup hooks become async_wait()s on a posix::stream_descriptor over
// the connection's socket, on `executor` (a strand, or the io_context of a one-thread
// gateway). Commands are pipelined: command() appends to the connection's output buffer
// and returns; replies come back in order, each to its callback, on `executor`.
//
// Timeouts, which hiredis 0.14's async API lacks: a command that has no reply after
// `command_timeout` (and a connect that is not done after `connect_timeout`) drops the
// connection, and every command waiting on it fails at once. After a failure the next
// connection attempt waits `reconnect_interval`; meanwhile commands fail at once, so a
// dead or paused Redis costs a caller one timeout at most, never a stall of the thread.
//
//   RedisAsync redis(strand, {.port = 6379});
//   redis.command({"INCRBY", "k", "1"}, [](const redisReply* r, std::string_view err) {...});
//
// Deferred replies (Options::deferred): a connection whose socket the executor never
// watches. command() queues; flush() writes what is queued, and poll() reads what has
// come back and runs its callbacks, and fails the commands past their deadline: nothing
// wakes the executor for this connection, so an owner that polls when its thread is
// awake anyway (replica sync's cycles, docs/replicas.md "Deferred replies") takes a
// reply without a wake-up of its own. The owner must poll while commands wait; their
// deadlines are only looked at then.
//
// Thread-safety: call every member on `executor`; callbacks run there too, never inside
// command() itself (a failure known at once is posted); with deferred replies, inside
// poll() (or flush(), for a connection that fails).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/clock.h"
#include "core/common/time.h"

struct redisReply;

namespace kvgate::io {

class RedisAsync {
 public:
  struct Options {
    std::string host = "127.0.0.1";
    int port = 6379;
    std::string password;  // AUTH when not empty
    Nanos connect_timeout = 50 * kMillisecond;
    Nanos command_timeout = 50 * kMillisecond;
    Nanos reconnect_interval = kSecond;
    // What the deadlines and the reconnect interval are read on (the timer that wakes
    // to check them is still Asio's); null: env::system_clock(). Borrowed: it must
    // outlive the connection.
    const Clock* clock = nullptr;
    // Replies read only by poll() (above); no socket wait, no timer.
    bool deferred = false;
  };
  // The reply (never null on success; may be a Redis error reply, type REDIS_REPLY_ERROR),
  // or null and the reason the command failed (not connected, timeout, connection lost).
  using Callback = std::function<void(const redisReply* reply, std::string_view error)>;

  RedisAsync(boost::asio::any_io_executor executor, Options options);
  ~RedisAsync();  // fails the commands still waiting (their callbacks run, inline)
  // Closes the connection for good: the commands still waiting fail (their callbacks run,
  // inline, and release what they hold) and none reconnects. On the executor.
  void close();
  RedisAsync(const RedisAsync&) = delete;
  RedisAsync& operator=(const RedisAsync&) = delete;

  // Sends one command (its arguments, binary-safe), connecting first when needed.
  void command(const std::vector<std::string>& args, Callback done);
  // The same with arguments borrowed for the call's duration.
  void command(std::span<const std::string_view> args, Callback done);

  // Deferred replies: writes what command() queued (connecting first when needed); what
  // cannot be written now is written by the next flush() or poll().
  void flush();
  // Deferred replies: flush(), then reads the replies that came (their callbacks run
  // here) and fails every waiting command once the oldest is past its deadline.
  void poll();
  // Before the first command: whether replies are deferred (Options::deferred), and the
  // commands' timeout.
  void set_deferred(bool deferred, Nanos command_timeout);

  bool connected() const;
  uint64_t failures() const;  // connections lost or refused, timeouts
  uint64_t connects() const;  // connections established
  size_t waiting() const;     // commands sent and not answered yet
  const Options& options() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;  // shared with the handlers of pending socket waits
};

}  // namespace kvgate::io
