#include "io/redis_async.h"

#include <async.h>
#include <hiredis.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <deque>
#include <limits>

#include "env/system_clock.h"

namespace kvgate::io {
namespace asio = boost::asio;

struct RedisAsync::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::any_io_executor executor, Options o)
      : ex(std::move(executor)),
        opt(std::move(o)),
        clock(opt.clock ? *opt.clock : env::system_clock()),
        timer(ex) {}

  // One pending command's callback (hiredis's privdata).
  struct Pending {
    Callback done;
  };

  asio::any_io_executor ex;
  Options opt;
  const Clock& clock;
  asio::steady_timer timer;
  // State of the current connection (ctx null: none).
  redisAsyncContext* ctx = nullptr;
  std::unique_ptr<asio::posix::stream_descriptor> socket;
  uint64_t generation = 0;  // bumped per connection: stale socket waits see a new one
  bool want_read = false, want_write = false;
  bool reading = false, writing = false;
  bool connecting = false;
  bool dropping = false;  // drop() is freeing the context (not a failure hiredis saw)
  Nanos connect_deadline = 0;
  std::deque<Nanos> deadlines;  // per command sent and not answered, in order
  bool timer_armed = false;
  // Across connections.
  Nanos next_attempt = 0;
  std::string last_error = "not connected";
  uint64_t failures = 0;
  uint64_t connects = 0;

  // hiredis's event hooks.
  static void add_read(void* p) {
    auto* self = static_cast<Impl*>(p);
    self->want_read = true;
    self->arm_read();
  }
  static void del_read(void* p) { static_cast<Impl*>(p)->want_read = false; }
  static void add_write(void* p) {
    auto* self = static_cast<Impl*>(p);
    self->want_write = true;
    self->arm_write();
  }
  static void del_write(void* p) { static_cast<Impl*>(p)->want_write = false; }
  static void cleanup(void* p) { static_cast<Impl*>(p)->connection_gone(); }
  static void on_connect(const redisAsyncContext* c, int status) {
    auto* self = static_cast<Impl*>(c->data);
    if (status == REDIS_OK) {
      self->connecting = false;
      ++self->connects;
    }
  }
  static void on_reply(redisAsyncContext* c, void* reply, void* privdata) {
    std::unique_ptr<Pending> pending(static_cast<Pending*>(privdata));
    auto* self = static_cast<Impl*>(c->data);
    if (!self->deadlines.empty()) self->deadlines.pop_front();
    if (reply != nullptr) {
      pending->done(static_cast<const redisReply*>(reply), {});
      return;
    }
    // The connection is going away (hiredis frees it, or drop() does).
    if (!self->dropping && c->err != 0 && c->errstr[0] != '\0') self->last_error = c->errstr;
    pending->done(nullptr, self->last_error);
  }

  void arm_read() {
    if (!want_read || reading || !socket) return;
    reading = true;
    socket->async_wait(asio::posix::descriptor_base::wait_read,
                       [self = shared_from_this(), gen = generation](boost::system::error_code ec) {
                         if (gen != self->generation) return;
                         self->reading = false;
                         if (ec || self->ctx == nullptr) return;
                         redisAsyncHandleRead(self->ctx);  // may end the connection
                         if (gen == self->generation) self->arm_read();
                       });
  }
  void arm_write() {
    if (!want_write || writing || !socket) return;
    writing = true;
    socket->async_wait(asio::posix::descriptor_base::wait_write,
                       [self = shared_from_this(), gen = generation](boost::system::error_code ec) {
                         if (gen != self->generation) return;
                         self->writing = false;
                         if (ec || self->ctx == nullptr) return;
                         redisAsyncHandleWrite(self->ctx);
                         if (gen == self->generation) self->arm_write();
                       });
  }

  // The cleanup hook: hiredis frees the context (an error it saw, or drop()).
  void connection_gone() {
    if (!dropping) {
      ++failures;
      next_attempt = clock.now() + opt.reconnect_interval;
    }
    ctx = nullptr;
    ++generation;
    if (socket) {
      socket->release();  // hiredis closes the descriptor itself
      socket.reset();
    }
    want_read = want_write = reading = writing = connecting = false;
  }

  // Ends the connection on our side; every waiting command fails with `reason`.
  void drop(std::string reason) {
    if (ctx == nullptr) return;
    last_error = std::move(reason);
    ++failures;
    next_attempt = clock.now() + opt.reconnect_interval;
    dropping = true;
    redisAsyncContext* c = ctx;
    redisAsyncFree(c);  // runs the callbacks with no reply, then cleanup
    dropping = false;
    ctx = nullptr;
    deadlines.clear();
  }

  bool connect() {
    const Nanos now = clock.now();
    if (now < next_attempt) return false;
    next_attempt = now + opt.reconnect_interval;
    redisAsyncContext* c = redisAsyncConnect(opt.host.c_str(), opt.port);
    if (c == nullptr || c->err) {
      last_error = "connect " + opt.host + ":" + std::to_string(opt.port) + ": " +
                   (c ? c->errstr : "out of memory");
      ++failures;
      if (c) redisAsyncFree(c);
      return false;
    }
    ctx = c;
    ++generation;
    c->data = this;
    c->ev.data = this;
    c->ev.addRead = &add_read;
    c->ev.delRead = &del_read;
    c->ev.addWrite = &add_write;
    c->ev.delWrite = &del_write;
    c->ev.cleanup = &cleanup;
    redisAsyncSetConnectCallback(c, &on_connect);
    connecting = true;
    connect_deadline = now + opt.connect_timeout;
    // Deferred replies: the executor never watches the socket (flush() and poll() do the
    // I/O), and the deadlines are looked at by poll().
    if (!opt.deferred) {
      socket = std::make_unique<asio::posix::stream_descriptor>(ex, c->c.fd);
      arm_timer(connect_deadline);
    }
    if (!opt.password.empty()) {
      const std::string_view auth[] = {"AUTH", opt.password};
      send(auth, [self = shared_from_this()](const redisReply* r, std::string_view) {
        if (r != nullptr && r->type == REDIS_REPLY_ERROR) {
          self->drop("auth: " + std::string(r->str, r->len));
        }
      });
    }
    return ctx != nullptr;
  }

  void arm_timer(Nanos at) {
    if (timer_armed) return;  // armed for an earlier deadline: it re-arms when it fires
    timer_armed = true;
    timer.expires_after(std::chrono::nanoseconds(std::max<Nanos>(at - clock.now(), 0)));
    timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      self->timer_armed = false;
      if (ec) return;
      self->check_deadlines();
    });
  }
  void check_deadlines() {
    if (ctx == nullptr) return;
    const Nanos now = clock.now();
    if (connecting && now >= connect_deadline) {
      drop("connect " + opt.host + ":" + std::to_string(opt.port) + ": timed out");
      return;
    }
    if (!deadlines.empty() && deadlines.front() <= now) {
      drop("no reply within " + std::to_string(opt.command_timeout / kMillisecond) + " ms");
      return;
    }
    if (connecting) {
      arm_timer(connect_deadline);
    } else if (!deadlines.empty()) {
      arm_timer(deadlines.front());
    }
  }

  // Queues one command on the current connection; false when hiredis refused it.
  bool send(std::span<const std::string_view> args, Callback done) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    argv.reserve(args.size());
    lens.reserve(args.size());
    for (std::string_view a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto pending = std::make_unique<Pending>(Pending{std::move(done)});
    if (redisAsyncCommandArgv(ctx, &on_reply, pending.get(), static_cast<int>(argv.size()),
                              argv.data(), lens.data()) != REDIS_OK) {
      return false;
    }
    pending.release();  // owned by hiredis until on_reply
    deadlines.push_back(clock.now() + opt.command_timeout);
    if (!opt.deferred) arm_timer(deadlines.back());
    return true;
  }

  // The bytes the socket holds unread (0 on an error: the next read sees it).
  int bytes_waiting() const {
    int n = 0;
    return ::ioctl(ctx->c.fd, FIONREAD, &n) == 0 ? n : 0;
  }
  // Deferred replies: what waits to be written, then (poll) what came back.
  void flush() {
    if (ctx != nullptr && (want_write || connecting)) redisAsyncHandleWrite(ctx);
  }
  void poll() {
    // What flush() could not write (a connect still in progress) goes now: the commands'
    // deadlines count from here, since nothing was waiting on Redis before.
    const bool unwritten = want_write || connecting;
    flush();
    if (ctx == nullptr) return;  // the write found the connection gone
    const Nanos now = clock.now();
    if (unwritten && !want_write) {
      for (Nanos& d : deadlines) d = std::max(d, now + opt.command_timeout);
    }
    // Reads what is there, runs the callbacks. hiredis reads 16 KB a call: a large reply (a
    // catching-up read's page) takes several, all now (the bytes waiting say how many).
    // Nothing there: one read that finds nothing, and a connection closed by Redis is seen.
    do {
      redisAsyncHandleRead(ctx);
    } while (ctx != nullptr && bytes_waiting() > 0);
    if (ctx == nullptr) return;
    if (connecting && now >= connect_deadline) {
      drop("connect " + opt.host + ":" + std::to_string(opt.port) + ": timed out");
    } else if (!deadlines.empty() && deadlines.front() <= now) {
      drop("no reply within " + std::to_string(opt.command_timeout / kMillisecond) + " ms");
    }
  }

  void fail_later(Callback done, std::string error) {
    asio::post(ex, [done = std::move(done), error = std::move(error)] { done(nullptr, error); });
  }

  void command(std::span<const std::string_view> args, Callback done) {
    if (ctx == nullptr && !connect()) {
      fail_later(std::move(done), "redis unavailable: " + last_error);
      return;
    }
    if (!send(args, done)) fail_later(std::move(done), "redis: connection closing");
  }
};

RedisAsync::RedisAsync(asio::any_io_executor executor, Options options)
    : impl_(std::make_shared<Impl>(std::move(executor), std::move(options))) {}

RedisAsync::~RedisAsync() { close(); }

void RedisAsync::close() {
  impl_->next_attempt = std::numeric_limits<Nanos>::max();  // callbacks cannot reconnect
  impl_->drop("closed");
  impl_->timer.cancel();
}

void RedisAsync::command(const std::vector<std::string>& args, Callback done) {
  std::vector<std::string_view> views(args.begin(), args.end());
  impl_->command(views, std::move(done));
}

void RedisAsync::command(std::span<const std::string_view> args, Callback done) {
  impl_->command(args, std::move(done));
}

void RedisAsync::flush() {
  if (impl_->opt.deferred) impl_->flush();
}

void RedisAsync::poll() {
  if (impl_->opt.deferred) impl_->poll();
}

void RedisAsync::set_deferred(bool deferred, Nanos command_timeout) {
  if (impl_->ctx != nullptr) return;
  impl_->opt.deferred = deferred;
  impl_->opt.command_timeout = command_timeout;
}

bool RedisAsync::connected() const { return impl_->ctx != nullptr && !impl_->connecting; }
uint64_t RedisAsync::failures() const { return impl_->failures; }
uint64_t RedisAsync::connects() const { return impl_->connects; }
size_t RedisAsync::waiting() const { return impl_->deadlines.size(); }
const RedisAsync::Options& RedisAsync::options() const { return impl_->opt; }

}  // namespace kvgate::io
