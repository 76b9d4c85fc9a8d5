#include "io/http_server.h"

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <charconv>
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <unordered_map>

#include "core/common/drain.h"
#include "io/http_head.h"
#include "io/http_parsers.h"
#include "io/http_wire.h"
#include "io/text_pieces.h"
#include "io/tls_context.h"

namespace kvgate::io {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using net::awaitable;
using net::use_awaitable;
// Operations on a plain socket, timers and the acceptor are awaited as deferred operations
// (wire::token_for says why); Beast's TLS stream and its message writes take only tokens
// of the older style.
constexpr auto kTuple = net::as_tuple(net::deferred);
constexpr auto kTupleAwaitable = net::as_tuple(use_awaitable);
using wire::token_for;
// How long a response may keep its client waiting before the server watches the
// socket for the client going away.
constexpr auto kWatchDisconnectAfter = std::chrono::milliseconds(50);

struct Connection;

// The producer side of one response; see ResponseStream. All state under mu_; the
// connection's coroutine takes what is queued on its strand.
class Stream final : public ResponseStream {
 public:
  enum class Kind { kNone, kWhole, kStream };

  struct Chunk {
    std::string data;
    std::function<void()> on_flushed;
  };

  // What the connection takes in one go.
  struct Batch {
    Kind kind = Kind::kNone;
    std::optional<HttpResponse> whole;  // kWhole (a default HttpResponse allocates)
    bool head_ready = false;
    int status = 200;
    std::string content_type;
    std::vector<HttpHeader> headers;
    std::vector<Chunk> chunks;
    bool finished = false;
    bool overflow = false;
    bool aborted = false;
  };

  // `locking` false: every call comes from one thread (HttpServerOptions::single_threaded).
  Stream(std::weak_ptr<Connection> conn, size_t max_pending, bool locking)
      : conn_(std::move(conn)), max_pending_(max_pending), mu_(locking) {}

  void respond(HttpResponse response) override {
    {
      std::lock_guard lock(mu_);
      if (closed_ || kind_ != Kind::kNone) return;
      kind_ = Kind::kWhole;
      whole_.emplace(std::move(response));
      if (!claim_wake()) return;
    }
    wake();
  }

  void start(int status, std::string content_type, std::vector<HttpHeader> headers) override {
    {
      std::lock_guard lock(mu_);
      if (closed_ || kind_ != Kind::kNone) return;
      kind_ = Kind::kStream;
      status_ = status;
      content_type_ = std::move(content_type);
      headers_ = std::move(headers);
      head_ready_ = true;
      if (!claim_wake()) return;
    }
    wake();
  }

  void write(std::string chunk, std::function<void()> on_flushed) override {
    bool queued = false;
    bool needs_wake = false;
    {
      std::unique_lock lock(mu_);
      if (!closed_ && kind_ == Kind::kStream && !finished_) {
        pending_ += chunk.size();
        if (pending_ > max_pending_) overflow_ = true;
        chunks_.push_back(Chunk{std::move(chunk), std::move(on_flushed)});
        queued = true;
        needs_wake = claim_wake();
      }
    }
    if (!queued) {
      if (on_flushed) on_flushed();
      return;
    }
    if (needs_wake) wake();
  }

  void finish() override {
    {
      std::lock_guard lock(mu_);
      if (closed_ || finished_) return;
      if (kind_ == Kind::kNone) {  // finish() without start(): an empty 200
        kind_ = Kind::kStream;
        head_ready_ = true;
        content_type_ = "text/plain";
      }
      finished_ = true;
      if (!claim_wake()) return;
    }
    wake();
  }

  void abort() override {
    {
      std::lock_guard lock(mu_);
      if (closed_) return;
      aborted_ = true;
      if (!claim_wake()) return;
    }
    wake();
  }

  size_t pending_bytes() const override {
    std::lock_guard lock(mu_);
    return pending_;
  }

  bool closed() const override { return closed_flag_.load(std::memory_order_acquire); }

  void on_close(std::function<void()> callback) override {
    {
      std::lock_guard lock(mu_);
      if (!closed_ && !preempted_) {
        on_close_ = std::move(callback);
        return;
      }
    }
    callback();
  }

  void watch_client() override;

  bool preempted() const override {
    std::lock_guard lock(mu_);
    return preempted_;
  }

  // Connection side.

  // The server answers `answer` in the producer's stead (HttpServerOptions::drain_answer),
  // if the producer has not begun its response: the close callback runs (the producer's
  // work is cancelled) and the producer's later calls are ignored. On the connection's
  // executor.
  bool preempt(const HttpResponse& answer) {
    std::function<void()> cb;
    bool needs_wake = false;
    {
      std::lock_guard lock(mu_);
      if (closed_ || kind_ != Kind::kNone || aborted_) return false;
      kind_ = Kind::kWhole;
      whole_.emplace(answer);
      preempted_ = true;
      cb = std::move(on_close_);
      on_close_ = nullptr;
      needs_wake = claim_wake();
    }
    if (cb) cb();
    if (needs_wake) wake();
    return true;
  }

  // A whole response was handed over and is not all written yet.
  bool whole_pending() const {
    std::lock_guard lock(mu_);
    return kind_ == Kind::kWhole && !closed_;
  }

  Batch take() {
    std::lock_guard lock(mu_);
    wake_posted_ = false;
    Batch b;
    b.kind = kind_;
    if (kind_ == Kind::kWhole) b.whole = std::move(whole_);
    if (head_ready_) {
      b.head_ready = true;
      head_ready_ = false;
      b.status = status_;
      b.content_type = std::move(content_type_);
      b.headers = std::move(headers_);
    }
    b.chunks.swap(chunks_);
    b.finished = finished_;
    b.overflow = overflow_;
    b.aborted = aborted_;
    return b;
  }

  void flushed(size_t bytes) {
    std::lock_guard lock(mu_);
    pending_ -= std::min(pending_, bytes);
  }

  // The stream ends without finishing: run the close callback and drop queued chunks.
  void mark_closed() {
    std::function<void()> cb;
    std::vector<Chunk> dropped;
    {
      std::lock_guard lock(mu_);
      if (closed_) return;
      closed_ = true;
      closed_flag_.store(true, std::memory_order_release);
      cb = std::move(on_close_);
      dropped.swap(chunks_);
      pending_ = 0;
    }
    for (Chunk& c : dropped) {
      if (c.on_flushed) c.on_flushed();
    }
    if (cb) cb();
  }

  // The response completed: later calls are ignored, no close callback runs.
  void mark_done() {
    std::lock_guard lock(mu_);
    closed_ = true;
    on_close_ = nullptr;
  }

 private:
  // Under mu_: whether the caller must wake the connection (true once per take()).
  bool claim_wake() {
    if (wake_posted_) return false;
    wake_posted_ = true;
    return true;
  }
  // Outside mu_: the connection's coroutine takes what is queued.
  void wake();

  const std::weak_ptr<Connection> conn_;
  const size_t max_pending_;
  mutable wire::OptionalMutex mu_;
  Kind kind_ = Kind::kNone;
  std::optional<HttpResponse> whole_;
  bool head_ready_ = false;
  int status_ = 200;
  std::string content_type_;
  std::vector<HttpHeader> headers_;
  std::vector<Chunk> chunks_;
  size_t pending_ = 0;
  bool finished_ = false;
  bool overflow_ = false;  // the client cannot keep up: close, dropping what is queued
  bool aborted_ = false;   // the producer gave up: close after what it already wrote
  bool closed_ = false;
  bool preempted_ = false;  // preempt(): the server answered in the producer's stead
  // Until the connection's first take(), which comes as soon as the handler returns, a
  // wake-up is of no use: what the handler responds meanwhile (a proxied answer, on the
  // connection's own coroutine) is taken then.
  bool wake_posted_ = true;
  std::atomic<bool> closed_flag_{false};
  std::function<void()> on_close_;
};

}  // namespace

struct HttpServer::Impl : std::enable_shared_from_this<HttpServer::Impl> {
  explicit Impl(net::io_context* external)
      : own_ioc(external ? nullptr : std::make_unique<net::io_context>()),
        ioc(external ? *external : *own_ioc),
        acceptor(ioc) {}

  HttpServerOptions options;
  HttpHandler handler;  // exactly one of the two is set
  AwaitableHttpHandler awaited_handler;
  std::unique_ptr<net::io_context> own_ioc;  // null when running on the caller's
  net::io_context& ioc;
  tcp::acceptor acceptor;
  std::optional<net::ssl::context> tls;  // set for an HTTPS listener
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  uint16_t port = 0;
  std::atomic<bool> stopping{false};
  bool stopped = false;  // guarded by stop_mu
  std::mutex stop_mu;

  // Registry of live connections (for stop()).
  mutable std::mutex reg_mu;
  std::condition_variable reg_cv;
  std::unordered_map<Connection*, std::weak_ptr<Connection>> conns;

  std::promise<void> accept_exited;  // set when accept_loop returns

  // Holds `self` (the context may outlive this server when it is shared).
  awaitable<void> accept_loop(std::shared_ptr<Impl> self);
  awaitable<void> session(std::shared_ptr<Connection> conn);
  void stop(std::chrono::milliseconds grace);
};

namespace {

using TlsStream = beast::ssl_stream<tcp::socket>;

struct Connection : std::enable_shared_from_this<Connection> {
  Connection(std::shared_ptr<HttpServer::Impl> s, tcp::socket socket)
      : server(std::move(s)), signal(socket.get_executor()) {
    beast::error_code ec;
    const auto ep = socket.remote_endpoint(ec);
    if (!ec) remote = ep.address().to_string() + ":" + std::to_string(ep.port());
    if (server->tls) {
      tls.emplace(std::move(socket), *server->tls);
    } else {
      plain.emplace(std::move(socket));
    }
  }
  ~Connection() {
    std::lock_guard lock(server->reg_mu);
    server->conns.erase(this);
    server->reg_cv.notify_all();
  }

  // The TCP socket, under TLS or not.
  tcp::socket& socket() { return tls ? tls->next_layer() : *plain; }

  // The connection's one timer (header, idle, write and handshake timeouts): a deadline
  // that passes closes the connection. Set once the connection is shared.
  void init_deadline(const std::shared_ptr<Connection>& self) {
    std::weak_ptr<Connection> weak = self;
    deadline.emplace(signal.get_executor(), [weak] {
      if (auto c = weak.lock()) c->close();
    });
  }

  // Wakes the session coroutine (runs on the strand).
  void wake() { signal.cancel(); }

  // Closes the socket: pending reads and writes fail, the session ends (on the strand).
  void close() {
    closing = true;
    beast::error_code ec;
    socket().shutdown(tcp::socket::shutdown_both, ec);
    socket().close(ec);
    if (current) current->mark_closed();
    signal.cancel();
  }

  std::shared_ptr<HttpServer::Impl> server;
  net::steady_timer signal;
  std::string remote;  // "ip:port" of the peer
  std::optional<wire::LazyDeadline> deadline;
  std::optional<tcp::socket> plain;
  std::optional<TlsStream> tls;
  std::shared_ptr<Stream> current;  // the response in progress
  std::string head_out;             // a whole response's head, reused
  bool busy = false;                // from a request's first byte to its response's end
  bool watching = false;            // the disconnect watcher is armed for `current`
  bool closing = false;
  bool linger = false;  // a refusal was written: close lingering (linger_close)
};

void Stream::wake() {
  if (auto conn = conn_.lock()) {
    // At once when called on the connection's executor (a proxy on the same thread),
    // else queued there.
    net::dispatch(conn->signal.get_executor(), [conn] { conn->wake(); });
  }
}

// Watches for the client going away while a response is pending, without consuming
// bytes of a pipelined next request. (Under TLS any record, a close_notify included,
// counts as data: a client that leaves then is noticed at the next write.)
void watch_disconnect(const std::shared_ptr<Connection>& conn, std::shared_ptr<Stream> stream) {
  conn->socket().async_wait(
      tcp::socket::wait_read, [conn, stream = std::move(stream)](const beast::error_code& ec) {
        if (ec || conn->current != stream) return;  // cancelled, or that response is over
        char b;
        beast::error_code rec;
        tcp::socket& socket = conn->socket();
        socket.non_blocking(true, rec);
        const size_t n = socket.receive(net::buffer(&b, 1), tcp::socket::message_peek, rec);
        if (rec == net::error::would_block) return watch_disconnect(conn, stream);
        if (rec || n == 0) {
          stream->mark_closed();
          conn->wake();
        }
        // Data: a pipelined request; stop watching (it is read after this response).
      });
}

void Stream::watch_client() {
  auto conn = conn_.lock();
  if (!conn) return;
  auto arm = [](const std::shared_ptr<Connection>& c, const Stream* self) {
    if (c->closing || c->watching || c->current.get() != self) return;
    c->watching = true;
    watch_disconnect(c, c->current);
  };
  // On the connection's strand, where `current` and `watching` live; with one I/O thread
  // (the stream unlocked: every call comes from that thread) this is it, and the
  // dispatch's type-erased hop would cost more than the registration.
  if (!mu_.enabled()) return arm(conn, this);
  net::dispatch(conn->signal.get_executor(), [conn, this, arm] { arm(conn, this); });
}

bool is_shutdown_error(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == net::error::eof ||
         ec == net::error::connection_reset || ec == net::error::operation_aborted ||
         ec == net::error::bad_descriptor || ec == beast::error::timeout ||
         ec == net::ssl::error::stream_truncated || ec.category() == net::error::get_ssl_category();
}

// The head of a whole response, written by hand into `out` (Beast's fields allocate per
// field): status line, Content-Type, the extra headers, Content-Length, Connection.
void write_whole_head(std::string& out, unsigned version, bool keep, const HttpResponse& r) {
  using namespace std::string_view_literals;  // appends of literals without strlen
  char status[8], length[24];
  const auto status_end = std::to_chars(status, status + sizeof(status), r.status).ptr;
  const auto length_end = std::to_chars(length, length + sizeof(length), r.body.size()).ptr;
  const std::string_view reason = http::obsolete_reason(static_cast<http::status>(r.status));
  TextPieces<24> head;
  head << (version == 10 ? "HTTP/1.0 "sv : "HTTP/1.1 "sv)
       << std::string_view(status, static_cast<size_t>(status_end - status)) << " "sv << reason
       << "\r\nContent-Type: "sv << r.content_type << "\r\n"sv;
  for (const HttpHeader& h : r.headers) head << h.name << ": "sv << h.value << "\r\n"sv;
  head << r.header_lines << "Content-Length: "sv
       << std::string_view(length, static_cast<size_t>(length_end - length)) << "\r\n"sv;
  if (version == 10 && keep) head << "Connection: keep-alive\r\n"sv;
  if (version != 10 && !keep) head << "Connection: close\r\n"sv;
  head << "\r\n"sv;
  head.write_to(out);
}

// The end of a connection whose request was refused before its body was read (see
// HttpServerOptions::linger_time): no more writes, and what the client still sends is read
// and thrown away until it closes or a bound is reached; the caller then closes.
awaitable<void> linger_close(Connection& conn, const HttpServerOptions& options) {
  tcp::socket& socket = conn.socket();
  beast::error_code ec;
  socket.shutdown(tcp::socket::shutdown_send, ec);
  if (ec) co_return;
  // Only lingering connections have one (a refusal is rare); the bytes are not looked at.
  constexpr size_t kSinkBytes = 16 * 1024;
  const auto sink = std::make_unique<char[]>(kSinkBytes);
  const auto end = wire::coarse_now() + options.linger_time;
  uint64_t discarded = 0;
  while (!conn.closing && discarded < options.linger_max_bytes) {
    const std::chrono::steady_clock::duration left = end - wire::coarse_now();
    if (left <= left.zero()) break;
    conn.deadline->expires_after(
        std::min<std::chrono::steady_clock::duration>(options.linger_timeout, left));
    auto [rec, n] = co_await socket.async_read_some(net::buffer(sink.get(), kSinkBytes), kTuple);
    if (rec) break;  // the client closed or reset, or a bound's deadline closed the socket
    discarded += n;
  }
}

// The server's own error answer (HttpServerOptions::error_json).
HttpResponse error_answer(const HttpServerOptions& options, int status, std::string_view message) {
  if (options.error_json) {
    return HttpResponse{status, "application/json", {}, options.error_json(status, message)};
  }
  return HttpResponse{status, "text/plain", {}, std::string(message) + "\n"};
}

// Writes `r` as the last response on the connection, for a request refused before its body
// was read; the session then closes the connection lingering.
template <class S>
awaitable<void> write_refusal(Connection& conn, S& stream, const HttpServerOptions& options,
                              const HttpResponse& r) {
  write_whole_head(conn.head_out, 11, /*keep=*/false, r);
  const std::array<net::const_buffer, 2> out{net::buffer(conn.head_out), net::buffer(r.body)};
  conn.deadline->expires_after(options.write_timeout);
  auto [wec, wn] = co_await net::async_write(stream, out, token_for<S>());
  (void)wn;
  conn.linger = !wec;
  conn.busy = false;  // answered: a graceful stop need not wait for the linger
}

using wire::RequestParser;

// What the connection needs of a plain request head once it is read.
struct PlainHead {
  bool keep_alive = true;
  unsigned version = 11;
  uint64_t content_length = 0;
};

// Empties `r` for the next request on the connection, keeping its strings' capacity.
// Ready for the connection's next request: its body emptied. The head's parts keep
// their bytes: each reader below replaces every one of them (take_plain_head writes over
// them in place, so a head like the one before costs no fill; Beast's parse replaces the
// whole request).
void clear(HttpRequest& r) { r.body.clear(); }

// The request at the start of `buffer` when its head is plain (http_head.h) and its body
// within the limit: method, target and fields into `out`, the rest into `plain`, the head
// consumed, true. False leaves `buffer` as it was, for Beast's parser (which also words
// the errors).
bool take_plain_head(beast::flat_buffer& buffer, const HttpServerOptions& options, HttpRequest& out,
                     PlainHead& plain) {
  ParsedHead head;
  const auto data = buffer.data();
  const std::string_view in(static_cast<const char*>(data.data()), data.size());
  if (parse_request_head(in, options.max_header_bytes, head) != HeadParse::kDone) return false;
  if (head.content_length > options.max_body_bytes) return false;  // Beast answers 413
  assign_text(out.method, head.method);
  assign_text(out.target, head.target);
  const size_t q = head.target.find('?');
  assign_text(out.path, head.target.substr(0, q));
  assign_text(out.query, q != std::string_view::npos ? head.target.substr(q + 1) : "");
  out.fields.assign(std::span(head.fields.data(), head.field_count));
  plain = PlainHead{head.keep_alive, head.version, head.content_length};
  buffer.consume(head.size);
  return true;
}

// Reads requests and writes their responses on `stream` (plain TCP or TLS) until either
// side ends the connection. Returns true when the server chose to close it (the client
// is still there: a TLS session then says goodbye with close_notify).
template <class S>
awaitable<bool> serve_requests(HttpServer::Impl& server, std::shared_ptr<Connection> conn,
                               S& stream) {
  const HttpServerOptions& options = server.options;
  beast::flat_buffer buffer;
  // One request object per connection: what the handler leaves of it (it may move parts
  // out) keeps its capacity for the next request's method, target and fields.
  HttpRequest request;
  while (!conn->closing) {
    conn->deadline->expires_after(options.idle_timeout);
    clear(request);
    bool keep_alive = false;
    unsigned version = 11;
    beast::error_code ec;
    // A plain head (http_head.h), as most are, is read without Beast's parser; anything
    // else, and a head not whole in what the first read brought, goes to Beast's.
    bool plain = false;
    if (buffer.size() == 0) {
      auto [rec, n] =
          co_await stream.async_read_some(buffer.prepare(wire::read_size(buffer)), token_for<S>());
      if (rec) co_return false;  // the client closed, or the connection failed
      buffer.commit(n);
    }
    // A request has begun: a graceful stop lets it be read and answered (stop()).
    conn->busy = true;
    if (PlainHead head; take_plain_head(buffer, options, request, head)) {
      plain = true;
      keep_alive = head.keep_alive;
      version = head.version;
      const size_t length = head.content_length;
      if (options.early_refusal && buffer.size() < length) {
        request.remote = conn->remote;
        if (std::optional<HttpResponse> r = options.early_refusal(request)) {
          co_await write_refusal(*conn, stream, options, *r);
          co_return false;
        }
      }
      request.body.reserve(length);
      while (true) {
        wire::take_bytes(buffer, length - request.body.size(), request.body);
        if (request.body.size() == length) break;
        auto [rec, n] = co_await stream.async_read_some(buffer.prepare(wire::read_size(buffer)),
                                                        token_for<S>());
        if (rec) {
          ec = rec == net::error::eof ? beast::error_code(http::error::partial_message) : rec;
          break;
        }
        buffer.commit(n);
      }
    }
    RequestParser parser;
    if (!plain) {
      parser.header_limit(static_cast<uint32_t>(options.max_header_bytes));
      parser.body_limit(options.max_body_bytes);
      if (options.early_refusal) {
        // The head first: a refusal that does not need the body comes before it is read.
        ec = co_await wire::read_message(stream, buffer, parser, true);
        if (!ec && !parser.is_done() &&
            (parser.chunked() || parser.content_length().value_or(0) > buffer.size())) {
          parser.request.remote = conn->remote;
          if (std::optional<HttpResponse> r = options.early_refusal(parser.request)) {
            co_await write_refusal(*conn, stream, options, *r);
            co_return false;
          }
        }
      }
      if (!ec) ec = co_await wire::read_message(stream, buffer, parser, false);
      if (!ec) {
        keep_alive = parser.keep_alive();
        version = parser.version();
        request = std::move(parser.request);
      }
    }
    if (ec) {
      if (is_shutdown_error(ec) || conn->closing) co_return false;
      int status = 400;
      std::string message = "malformed HTTP request: " + ec.message();
      if (ec == http::error::body_limit) {
        status = 413;
        message = "request body exceeds " + std::to_string(options.max_body_bytes) + " bytes";
      } else if (ec == http::error::header_limit) {
        status = 431;
        message = "request headers exceed " + std::to_string(options.max_header_bytes) + " bytes";
      }
      co_await write_refusal(*conn, stream, options, error_answer(options, status, message));
      co_return false;
    }
    conn->busy = true;
    request.remote = conn->remote;
    auto rs = std::make_shared<Stream>(conn, options.max_pending_bytes, !options.single_threaded);
    conn->current = rs;
    try {
      if (server.awaited_handler) {
        co_await server.awaited_handler(std::move(request), rs);
      } else {
        server.handler(std::move(request), rs);
      }
    } catch (const std::exception& e) {
      rs->respond(error_answer(options, 500, std::string("internal error: ") + e.what()));
    }
    conn->deadline->expires_never();

    bool ok = true;
    bool head_written = false;
    bool done = false;
    bool keep = keep_alive;
    while (!done && ok) {
      Stream::Batch b = rs->take();
      if (rs->closed() || conn->closing || b.overflow) {
        ok = false;
        break;
      }
      if (b.kind == Stream::Kind::kWhole) {
        keep = keep && !server.stopping.load();
        write_whole_head(conn->head_out, version, keep, *b.whole);
        const std::array<net::const_buffer, 2> out{net::buffer(conn->head_out),
                                                   net::buffer(b.whole->body)};
        conn->deadline->expires_after(options.write_timeout);
        auto [wec, wn] = co_await net::async_write(stream, out, token_for<S>());
        (void)wn;
        ok = !wec;
        done = true;
        break;
      }
      if (b.head_ready) {
        http::response<http::empty_body> res{static_cast<http::status>(b.status), version};
        res.set(http::field::content_type, b.content_type);
        for (const HttpHeader& h : b.headers) res.insert(h.name, h.value);
        // A response that streams is the last on its connection when stopping.
        keep = keep && !server.stopping.load();
        res.keep_alive(keep);
        res.chunked(true);
        http::response_serializer<http::empty_body> sr{res};
        conn->deadline->expires_after(options.write_timeout);
        auto [wec, wn] = co_await http::async_write_header(stream, sr, kTupleAwaitable);
        (void)wn;
        if (wec) {
          ok = false;
          break;
        }
        head_written = true;
        // The write suspended this coroutine: what came meanwhile only shows in a fresh
        // take() (its wake-up already ran), so never wait on a batch taken before it.
        if (b.chunks.empty() && !b.finished) continue;
      }
      if (!b.chunks.empty() && head_written) {
        std::string data;
        if (b.chunks.size() == 1) {
          data = std::move(b.chunks[0].data);
        } else {
          for (auto& c : b.chunks) data += c.data;
        }
        const size_t bytes = data.size();
        if (bytes > 0) {
          conn->deadline->expires_after(options.write_timeout);
          auto [wec, wn] = co_await net::async_write(stream, http::make_chunk(net::buffer(data)),
                                                     token_for<S>());
          (void)wn;
          ok = !wec;
        }
        rs->flushed(bytes);
        for (auto& c : b.chunks) {
          if (c.on_flushed) c.on_flushed();
        }
        if (!ok) break;
        continue;  // more may have arrived while writing
      }
      if (b.aborted) {
        ok = false;
        break;
      }
      if (b.finished && head_written) {
        conn->deadline->expires_after(options.write_timeout);
        auto [wec, wn] = co_await net::async_write(stream, http::make_chunk_last(), token_for<S>());
        (void)wn;
        ok = !wec;
        done = true;
        break;
      }
      // Most answers come quickly: the disconnect watcher (a reactor registration per
      // request) is armed only once the response has kept the client waiting a while.
      if (conn->watching) {
        conn->signal.expires_at(net::steady_timer::time_point::max());
      } else {
        conn->signal.expires_after(kWatchDisconnectAfter);
      }
      auto [wait_ec] = co_await conn->signal.async_wait(kTuple);
      if (!wait_ec && !conn->watching) {
        conn->watching = true;
        watch_disconnect(conn, rs);
      }
    }
    if (ok) {
      rs->mark_done();
    } else {
      rs->mark_closed();
    }
    conn->current.reset();
    if (conn->watching) {
      conn->watching = false;
      beast::error_code ignore;
      conn->socket().cancel(ignore);  // the disconnect watcher
    }
    conn->busy = false;
    if (!ok) co_return false;
    if (!keep || server.stopping.load()) co_return true;
  }
  co_return false;
}

}  // namespace

awaitable<void> HttpServer::Impl::accept_loop(std::shared_ptr<Impl> self) {
  while (!stopping.load()) {
    // One thread runs the context: a connection needs no strand of its own.
    tcp::socket socket(options.threads > 1 ? net::any_io_executor(net::make_strand(ioc))
                                           : net::any_io_executor(ioc.get_executor()));
    auto [ec] = co_await acceptor.async_accept(socket, kTuple);
    if (ec) {
      if (stopping.load() || ec == net::error::operation_aborted) break;
      // Out of descriptors or a transient error: back off briefly.
      net::steady_timer t(ioc, std::chrono::milliseconds(10));
      co_await t.async_wait(kTuple);
      continue;
    }
    beast::error_code ignore;
    socket.set_option(tcp::no_delay(true), ignore);
    auto conn = std::make_shared<Connection>(shared_from_this(), std::move(socket));
    conn->init_deadline(conn);
    {
      std::lock_guard lock(reg_mu);
      conns.emplace(conn.get(), conn);
    }
    auto exec = conn->signal.get_executor();
    net::co_spawn(exec, session(std::move(conn)), net::detached);
  }
  self->accept_exited.set_value();
}

awaitable<void> HttpServer::Impl::session(std::shared_ptr<Connection> conn) {
  try {
    if (conn->tls) {
      // The handshake counts against the header timeout: a client that connects and
      // sends nothing, or bytes that are not TLS, is dropped.
      conn->deadline->expires_after(options.handshake_timeout);
      auto [ec] =
          co_await conn->tls->async_handshake(net::ssl::stream_base::server, kTupleAwaitable);
      if (!ec && !conn->closing) {
        const bool server_closes = co_await serve_requests(*this, conn, *conn->tls);
        if (server_closes && !conn->closing) {
          conn->deadline->expires_after(std::chrono::seconds(1));
          auto [sec] = co_await conn->tls->async_shutdown(kTupleAwaitable);
          (void)sec;
        }
      }
    } else {
      (void)co_await serve_requests(*this, conn, *conn->plain);
    }
    // Under TLS too at the TCP level (without close_notify: the client is still sending).
    if (conn->linger && !conn->closing) co_await linger_close(*conn, options);
  } catch (const std::exception&) {
    // Fall through to close; a session never takes the server down.
  }
  if (conn->current) conn->current->mark_closed();
  conn->current.reset();
  conn->deadline->cancel();
  beast::error_code ec;
  conn->socket().shutdown(tcp::socket::shutdown_send, ec);
  conn->socket().close(ec);
}

void HttpServer::Impl::stop(std::chrono::milliseconds grace) {
  {
    std::lock_guard lock(stop_mu);
    if (stopped) return;
    stopped = true;
  }
  stopping.store(true);
  net::post(acceptor.get_executor(), [this] {
    beast::error_code ec;
    acceptor.close(ec);
  });
  // What a pass over the connections does to each (on its executor).
  enum class Pass { kIdle, kUnstarted, kAll };
  auto for_each_conn = [this](Pass pass) {
    std::vector<std::shared_ptr<Connection>> live;
    {
      std::lock_guard lock(reg_mu);
      for (auto& [p, w] : conns) {
        if (auto c = w.lock()) live.push_back(std::move(c));
      }
    }
    const HttpResponse* answer = options.drain_answer ? &*options.drain_answer : nullptr;
    for (auto& c : live) {
      net::post(c->signal.get_executor(), [c, pass, answer] {
        if (c->closing) return;
        switch (pass) {
          case Pass::kIdle: {
            // Idle: waiting for a next request of which no byte has come (nor is on its
            // way), or lingering after a refusal.
            beast::error_code ec;
            if (c->linger || (!c->busy && c->socket().available(ec) == 0)) c->close();
            return;
          }
          case Pass::kUnstarted:
            if (c->current) c->current->preempt(*answer);
            return;
          case Pass::kAll:
            // A whole answer in hand (drain_answer's among them) is still written: the
            // connection then ends itself, as the server is stopping.
            if (answer && c->current && c->current->whole_pending()) return;
            c->close();
            return;
        }
      });
    }
  };
  auto wait_empty = [this](std::chrono::milliseconds limit) {
    std::unique_lock lock(reg_mu);
    return reg_cv.wait_for(lock, limit, [this] { return conns.empty(); });
  };
  // Idle keep-alive connections go now; busy ones finish their request and response first,
  // and with drain_answer, those whose response has not begun are answered with it
  // shortly before the grace ends (core/common/drain.h).
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + grace;
  const auto answer_at =
      start + std::chrono::nanoseconds(
                  drain_plan(std::chrono::duration_cast<std::chrono::nanoseconds>(grace).count())
                      .answer_unstarted_at);
  for_each_conn(Pass::kIdle);
  while (!wait_empty(std::chrono::milliseconds(20))) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    for_each_conn(options.drain_answer && now >= answer_at ? Pass::kUnstarted : Pass::kIdle);
  }
  // Also with a grace too short for the loop to have come to it.
  if (options.drain_answer) for_each_conn(Pass::kUnstarted);
  for_each_conn(Pass::kAll);
  wait_empty(std::chrono::milliseconds(2000));
  accept_exited.get_future().wait_for(std::chrono::milliseconds(2000));
  if (!own_ioc) return;  // a shared context: its owner stops it
  work.reset();
  ioc.stop();
  for (std::thread& t : threads) {
    if (t.joinable()) t.join();
  }
}

HttpServer::HttpServer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { stop(std::chrono::milliseconds(0)); }

uint16_t HttpServer::port() const { return impl_->port; }

size_t HttpServer::connections() const {
  std::lock_guard lock(impl_->reg_mu);
  return impl_->conns.size();
}

void HttpServer::stop(std::chrono::milliseconds grace) { impl_->stop(grace); }

Result<std::unique_ptr<HttpServer>> HttpServer::start(const HttpServerOptions& options,
                                                      HttpHandler handler) {
  return start_impl(options, std::move(handler), nullptr);
}

Result<std::unique_ptr<HttpServer>> HttpServer::start(const HttpServerOptions& options,
                                                      AwaitableHttpHandler handler) {
  return start_impl(options, nullptr, std::move(handler));
}

Result<std::unique_ptr<HttpServer>> HttpServer::start_impl(const HttpServerOptions& options,
                                                           HttpHandler handler,
                                                           AwaitableHttpHandler awaited) {
  auto impl = std::make_shared<Impl>(options.io_context);
  impl->options = options;
  impl->handler = std::move(handler);
  impl->awaited_handler = std::move(awaited);
  if (!options.tls_cert_file.empty() || !options.tls_key_file.empty()) {
    impl->tls.emplace(net::ssl::context::tls_server);
    if (Status st = load_tls_server_files(impl->tls->native_handle(),
                                          {options.tls_cert_file, options.tls_key_file});
        !st) {
      return Error(st.failure());
    }
  }
  beast::error_code ec;
  const auto address = net::ip::make_address(options.address, ec);
  if (ec) return Error("bad listen address \"" + options.address + "\": " + ec.message());
  const tcp::endpoint ep(address, options.port);
  auto& a = impl->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(options.backlog, ec);
  if (ec) {
    return Error("cannot listen on " + options.address + ":" + std::to_string(options.port) + ": " +
                 ec.message());
  }
  impl->port = a.local_endpoint().port();
  net::co_spawn(impl->ioc, impl->accept_loop(impl), net::detached);
  if (!impl->own_ioc) return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
  impl->work.emplace(impl->ioc.get_executor());
  const int threads = std::max(1, options.threads);
  for (int i = 0; i < threads; ++i) {
    impl->threads.emplace_back([raw = impl.get()] {
      for (;;) {
        try {
          raw->ioc.run();
          break;
        } catch (const std::exception&) {
          // A handler threw: keep serving.
        }
      }
    });
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

}  // namespace kvgate::io
