#include "io/http_client.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <map>
#include <memory>
#include <set>
#include <tuple>

namespace kvgate::io {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

constexpr auto kTuple = net::as_tuple(net::use_awaitable);

// What one request and its response on a connected stream gave.
struct Exchange {
  HttpClientResponse out;
  std::string error;      // empty: the exchange succeeded
  bool got_head = false;  // a response head came (a failure after it is not a stale
                          // kept connection's)
  bool reusable = false;  // body read to its end, keep-alive, nothing left over
};

net::awaitable<void> resolve_and_connect(beast::tcp_stream& stream, const Url& url,
                                         std::string& error) {
  tcp::resolver resolver(stream.get_executor());
  // A numeric address (as endpoints mostly are) needs no lookup; Asio's asynchronous
  // resolve would start a thread for it, once per fetch.
  boost::system::error_code rec;
  auto results = resolver.resolve(
      url.host, url.port, tcp::resolver::numeric_host | tcp::resolver::numeric_service, rec);
  if (rec) std::tie(rec, results) = co_await resolver.async_resolve(url.host, url.port, kTuple);
  if (rec) {
    error = "resolve " + url.host + ": " + rec.message();
    co_return;
  }
  auto [cec, ep] = co_await stream.async_connect(results, kTuple);
  (void)ep;
  if (cec) error = "connect " + url.host + ":" + url.port + ": " + cec.message();
}

// Writes the request on `stream` and reads the response (body to on_data when given).
net::awaitable<void> exchange(beast::tcp_stream& stream, beast::flat_buffer& buffer, const Url& url,
                              std::string_view method, std::string_view body,
                              const std::vector<HttpHeader>& headers,
                              const std::function<bool(std::string_view)>* on_data, Exchange& ex) {
  // The body is sent from the caller's memory (a view, valid until fetch returns): no copy
  // of it (the tracer's exports are hundreds of kilobytes).
  http::request<http::span_body<const char>> req{http::string_to_verb(method), url.target, 11};
  req.set(http::field::host, url.host + ":" + url.port);
  req.set(http::field::user_agent, "kvgate");
  bool has_type = false;
  for (const HttpHeader& h : headers) {
    req.insert(h.name, h.value);
    if (find_header({h}, "content-type")) has_type = true;
  }
  if (!body.empty() && !has_type) req.set(http::field::content_type, "application/json");
  req.body() = boost::span<const char>(body.data(), body.size());
  req.prepare_payload();
  auto [wec, wn] = co_await http::async_write(stream, req, kTuple);
  (void)wn;
  if (wec) {
    ex.error = "write: " + wec.message();
    co_return;
  }
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(boost::none);
  auto [hec, hn] = co_await http::async_read_header(stream, buffer, parser, kTuple);
  (void)hn;
  if (hec) {
    ex.error = "read: " + hec.message();
    co_return;
  }
  ex.got_head = true;
  ex.out.status = static_cast<int>(parser.get().result_int());
  for (const auto& f : parser.get()) {
    ex.out.headers.push_back(HttpHeader{std::string(f.name_string()), std::string(f.value())});
  }
  char chunk[16 * 1024];
  while (!parser.is_done()) {
    parser.get().body().data = chunk;
    parser.get().body().size = sizeof(chunk);
    auto [bec, bn] = co_await http::async_read_some(stream, buffer, parser, kTuple);
    (void)bn;
    if (bec && bec != http::error::need_buffer) {
      ex.error = "read body: " + bec.message();
      co_return;
    }
    const size_t got = sizeof(chunk) - parser.get().body().size;
    if (got > 0) {
      if (on_data) {
        if (!(*on_data)(std::string_view(chunk, got))) co_return;  // stopped: not reusable
      } else {
        ex.out.body.append(chunk, got);
      }
    }
  }
  ex.reusable = parser.keep_alive() && buffer.size() == 0;
}

// Runs `task` on `ioc` to its end; an exception becomes `error`.
void run_to_end(net::io_context& ioc, net::awaitable<void> task, std::string& error) {
  ioc.restart();
  net::co_spawn(ioc, std::move(task), [&](std::exception_ptr e) {
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        error = ex.what();
      }
    }
  });
  ioc.run();
}

Result<HttpClientResponse> fetch(std::string_view method, std::string_view url_text,
                                 std::string_view body, const std::vector<HttpHeader>& headers,
                                 const std::function<bool(std::string_view)>* on_data,
                                 std::chrono::milliseconds timeout) {
  auto url = parse_url(url_text);
  if (!url) return Error(url.error());
  net::io_context ioc;
  beast::tcp_stream stream(ioc);
  Exchange ex;
  auto run = [&]() -> net::awaitable<void> {
    stream.expires_after(timeout);
    co_await resolve_and_connect(stream, *url, ex.error);
    if (!ex.error.empty()) co_return;
    beast::flat_buffer buffer;
    co_await exchange(stream, buffer, *url, method, body, headers, on_data, ex);
    beast::error_code ignore;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignore);
  };
  run_to_end(ioc, run(), ex.error);
  if (!ex.error.empty()) return Error(ex.error);
  return std::move(ex.out);
}

}  // namespace

Result<HttpClientResponse> http_fetch(std::string_view method, std::string_view url,
                                      std::string_view body, const std::vector<HttpHeader>& headers,
                                      std::chrono::milliseconds timeout) {
  return fetch(method, url, body, headers, nullptr, timeout);
}

Result<HttpClientResponse> http_fetch_streaming(
    std::string_view method, std::string_view url, std::string_view body,
    const std::vector<HttpHeader>& headers, const std::function<bool(std::string_view)>& on_data,
    std::chrono::milliseconds timeout) {
  return fetch(method, url, body, headers, &on_data, timeout);
}

struct HttpKeepAliveClient::Impl {
  struct Connection {
    explicit Connection(net::io_context& ioc) : stream(ioc) {}
    beast::tcp_stream stream;
    beast::flat_buffer buffer;
  };
  net::io_context ioc;
  std::map<std::string, std::unique_ptr<Connection>, std::less<>> conns;  // by host:port
};

HttpKeepAliveClient::HttpKeepAliveClient() : impl_(std::make_unique<Impl>()) {}

HttpKeepAliveClient::~HttpKeepAliveClient() = default;

size_t HttpKeepAliveClient::open_connections() const { return impl_->conns.size(); }

void HttpKeepAliveClient::retain(const std::vector<std::string>& urls) {
  std::set<std::string, std::less<>> keep;
  for (const std::string& u : urls) {
    if (auto url = parse_url(u)) keep.insert(url->host + ":" + url->port);
  }
  std::erase_if(impl_->conns, [&](const auto& c) { return !keep.contains(c.first); });
}

Result<HttpClientResponse> HttpKeepAliveClient::fetch(std::string_view method,
                                                      std::string_view url_text,
                                                      std::string_view body,
                                                      const std::vector<HttpHeader>& headers,
                                                      std::chrono::milliseconds timeout) {
  auto url = parse_url(url_text);
  if (!url) return Error(url.error());
  const std::string key = url->host + ":" + url->port;
  // A kept connection the server has closed meanwhile (its idle timeout, a restart) fails
  // before any response byte: then once more on a fresh one.
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto it = impl_->conns.find(key);
    const bool reused = it != impl_->conns.end();
    if (!reused)
      it = impl_->conns.emplace(key, std::make_unique<Impl::Connection>(impl_->ioc)).first;
    Impl::Connection& c = *it->second;
    Exchange ex;
    auto run = [&]() -> net::awaitable<void> {
      c.stream.expires_after(timeout);
      if (!reused) {
        co_await resolve_and_connect(c.stream, *url, ex.error);
        if (!ex.error.empty()) co_return;
      }
      co_await exchange(c.stream, c.buffer, *url, method, body, headers, nullptr, ex);
    };
    run_to_end(impl_->ioc, run(), ex.error);
    if (!ex.error.empty() || !ex.reusable) impl_->conns.erase(key);
    if (ex.error.empty()) return std::move(ex.out);
    if (!reused || ex.got_head) return Error(ex.error);
  }
  return Error("connection to " + key + " lost");
}

}  // namespace kvgate::io
