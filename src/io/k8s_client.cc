// GCC 12 reports a false -Wmismatched-new-delete on Asio coroutine frames (GCC bug 109224).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include "io/k8s_client.h"

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <yaml-cpp/yaml.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <exception>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "env/file.h"

namespace kvgate::io {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

namespace {

using env::read_file;

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

Result<std::string> base64_decode(const std::string& in) {
  std::string clean;
  for (char c : in) {
    if (c != '\n' && c != '\r' && c != ' ') clean.push_back(c);
  }
  if (clean.size() % 4 != 0) return Error("bad base64 (length)");
  std::string out(clean.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(clean.data()),
                                static_cast<int>(clean.size()));
  if (n < 0) return Error("bad base64");
  size_t pad = 0;
  for (size_t i = clean.size(); i > 0 && clean[i - 1] == '='; --i) ++pad;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

// One request's exchange over a connected stream: the head, then the body in pieces.
template <typename Stream>
net::awaitable<void> exchange(Stream& stream, const KubeConfig& c,
                              const KubeClient::Request& request, const std::string& token,
                              std::chrono::steady_clock::time_point deadline,
                              const std::function<bool(std::string_view)>* on_line,
                              KubeClient::WatchEnd& end, KubeReply& whole) {
  http::request<http::string_body> req;
  req.method_string(request.method);
  req.target(request.target);
  req.version(11);
  req.set(http::field::host, c.host);
  req.set(http::field::user_agent, "kvgate");
  req.set(http::field::accept, "application/json");
  if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
  if (!request.body.empty()) {
    req.set(http::field::content_type, request.content_type);
    req.body() = request.body;
  }
  req.prepare_payload();
  co_await http::async_write(stream, req, net::use_awaitable);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(on_line ? std::numeric_limits<std::uint64_t>::max() : (64u << 20));
  co_await http::async_read_header(stream, buffer, parser, net::use_awaitable);
  const unsigned status = parser.get().result_int();
  if (!on_line || status != 200) {
    co_await http::async_read(stream, buffer, parser, net::use_awaitable);
    whole = {status, std::move(parser.get().body())};
    end.status = status;
    end.error_body = whole.body;
    co_return;
  }
  end.status = status;
  std::string& body = parser.get().body();
  while (!parser.is_done()) {
    beast::error_code ec;
    co_await http::async_read_some(stream, buffer, parser,
                                   net::redirect_error(net::use_awaitable, ec));
    // Whole lines out of what arrived (the string body only grows at its end).
    size_t start = 0;
    for (size_t nl = body.find('\n'); nl != std::string::npos; nl = body.find('\n', start)) {
      std::string_view line(body.data() + start, nl - start);
      start = nl + 1;
      if (!line.empty() && !(*on_line)(line)) {
        end.deadline_reached = false;
        co_return;
      }
    }
    body.erase(0, start);
    if (ec == beast::error::timeout && std::chrono::steady_clock::now() >= deadline) {
      end.deadline_reached = true;
      co_return;
    }
    if (ec) throw boost::system::system_error(ec);
  }
  if (!body.empty()) (void)(*on_line)(body);
}

}  // namespace

Result<Kubeconfig> load_kubeconfig(const std::string& path) {
  try {
    YAML::Node root = YAML::LoadFile(path);
    const std::string current =
        root["current-context"] ? root["current-context"].as<std::string>() : "";
    auto find = [&](const char* list, const std::string& name) -> YAML::Node {
      for (const auto& item : root[list]) {
        if (item["name"] && item["name"].as<std::string>() == name) return item;
      }
      return YAML::Node();
    };
    YAML::Node context = find("contexts", current);
    if (!context || !context["context"]) {
      return Error(path + ": no context named '" + current + "' (current-context)");
    }
    const YAML::Node ctx = context["context"];
    YAML::Node cluster = find("clusters", ctx["cluster"] ? ctx["cluster"].as<std::string>() : "");
    if (!cluster || !cluster["cluster"] || !cluster["cluster"]["server"]) {
      return Error(path + ": the current context's cluster has no server");
    }
    Kubeconfig k;
    if (ctx["namespace"]) k.ns = ctx["namespace"].as<std::string>();
    const YAML::Node cl = cluster["cluster"];
    std::string server = cl["server"].as<std::string>();
    KubeConfig& c = k.connection;
    if (server.starts_with("https://")) {
      server = server.substr(8);
      c.tls = true;
      c.port = 443;
    } else if (server.starts_with("http://")) {
      server = server.substr(7);
      c.tls = false;
      c.port = 80;
    } else {
      return Error(path + ": server '" + server + "': expected https:// or http://");
    }
    if (const size_t slash = server.find('/'); slash != std::string::npos) {
      server.resize(slash);
    }
    if (const size_t colon = server.rfind(':'); colon != std::string::npos) {
      c.port = static_cast<uint16_t>(std::stoi(server.substr(colon + 1)));
      server.resize(colon);
    }
    c.host = server;
    if (cl["insecure-skip-tls-verify"] && cl["insecure-skip-tls-verify"].as<bool>()) {
      return Error(path + ": insecure-skip-tls-verify is not supported (give the CA)");
    }
    if (cl["certificate-authority-data"]) {
      auto ca = base64_decode(cl["certificate-authority-data"].as<std::string>());
      if (!ca) return Error(path + ": certificate-authority-data: " + ca.error());
      c.ca_pem = std::move(*ca);
    } else if (cl["certificate-authority"]) {
      std::filesystem::path ca_path = cl["certificate-authority"].as<std::string>();
      if (ca_path.is_relative()) ca_path = std::filesystem::path(path).parent_path() / ca_path;
      auto ca = read_file(ca_path.string());
      if (!ca) return Error(path + ": certificate-authority: " + ca.error());
      c.ca_pem = std::move(*ca);
    } else if (c.tls) {
      return Error(path + ": the cluster has no certificate-authority(-data)");
    }
    YAML::Node user = find("users", ctx["user"] ? ctx["user"].as<std::string>() : "");
    if (user && user["user"]) {
      const YAML::Node u = user["user"];
      if (u["client-certificate-data"] || u["client-certificate"] || u["exec"] ||
          u["auth-provider"]) {
        return Error(path +
                     ": only token and tokenFile users are supported (no client certificates, "
                     "exec or auth-provider plugins)");
      }
      if (u["token"]) c.token = u["token"].as<std::string>();
      if (u["tokenFile"]) {
        std::filesystem::path tf = u["tokenFile"].as<std::string>();
        if (tf.is_relative()) tf = std::filesystem::path(path).parent_path() / tf;
        c.token_file = tf.string();
      }
    }
    return k;
  } catch (const YAML::Exception& e) {
    return Error(path + ": " + e.what());
  }
}

KubeClient::KubeClient(KubeConfig config) : config_(std::move(config)) {}

Result<std::string> KubeClient::token() const {
  if (config_.token_file.empty()) return config_.token;
  auto t = read_file(config_.token_file);
  if (!t) return Error("kubernetes: token: " + t.error());
  return trim(std::move(*t));
}

void KubeClient::cancel() {
  std::lock_guard lock(mu_);
  cancelled_ = true;
  if (running_) running_->stop();
}

void KubeClient::interrupt() {
  std::lock_guard lock(mu_);
  interrupted_ = true;
  if (running_) running_->stop();
}

void KubeClient::clear_interrupt() {
  std::lock_guard lock(mu_);
  interrupted_ = false;
}

namespace {

using CallState = KubeClient::CallResult;

net::awaitable<void> run_call(const KubeConfig& c, const KubeClient::Request& request,
                              const std::string& token,
                              std::chrono::steady_clock::time_point deadline,
                              const std::function<bool(std::string_view)>* on_line,
                              CallState& out) {
  auto ex = co_await net::this_coro::executor;
  tcp::resolver resolver(ex);
  const auto endpoints =
      co_await resolver.async_resolve(c.host, std::to_string(c.port), net::use_awaitable);
  // The head must come within the timeout; a watch's body may then run to its deadline.
  const auto head_deadline = std::chrono::steady_clock::now() + c.timeout;
  const auto expiry = on_line ? std::max(head_deadline, deadline) : head_deadline;
  if (!c.tls) {
    beast::tcp_stream stream(ex);
    stream.expires_at(expiry);
    co_await stream.async_connect(endpoints, net::use_awaitable);
    co_await exchange(stream, c, request, token, deadline, on_line, out.end, out.whole);
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    co_return;
  }
  ssl::context ctx(ssl::context::tls_client);
  ctx.set_options(ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  ctx.set_verify_mode(ssl::verify_peer);
  ctx.add_certificate_authority(net::buffer(c.ca_pem));
  beast::ssl_stream<beast::tcp_stream> stream(ex, ctx);
  // Verify the name the server is reached by: an IP SAN for an address (the in-cluster
  // service IP), a DNS SAN otherwise (then also sent as SNI).
  X509_VERIFY_PARAM* param = SSL_get0_param(stream.native_handle());
  beast::error_code ec;
  net::ip::make_address(c.host, ec);
  if (!ec) {
    X509_VERIFY_PARAM_set1_ip_asc(param, c.host.c_str());
  } else {
    X509_VERIFY_PARAM_set1_host(param, c.host.c_str(), 0);
    SSL_set_tlsext_host_name(stream.native_handle(), c.host.c_str());
  }
  beast::get_lowest_layer(stream).expires_at(expiry);
  co_await beast::get_lowest_layer(stream).async_connect(endpoints, net::use_awaitable);
  co_await stream.async_handshake(ssl::stream_base::client, net::use_awaitable);
  co_await exchange(stream, c, request, token, deadline, on_line, out.end, out.whole);
  // The API server may drop the connection without a TLS close_notify; that is fine here.
  beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(1));
  co_await stream.async_shutdown(net::redirect_error(net::use_awaitable, ec));
}

}  // namespace

Result<KubeClient::WatchEnd> KubeClient::watch(
    const std::string& target, std::chrono::steady_clock::time_point deadline,
    const std::function<bool(std::string_view)>& on_line) {
  auto r = perform({.target = target}, deadline, &on_line);
  if (!r) return Error(r.error());
  return r->end;
}

Result<KubeReply> KubeClient::get(const std::string& target) { return send({.target = target}); }

Result<KubeReply> KubeClient::send(const Request& request) {
  auto r = perform(request, {}, nullptr);
  if (!r) return Error(r.error());
  return std::move(r->whole);
}

Result<KubeClient::CallResult> KubeClient::perform(
    const Request& request, std::chrono::steady_clock::time_point deadline,
    const std::function<bool(std::string_view)>* on_line) {
  auto tok = token();
  if (!tok) return Error(tok.error());
  const std::string what = "kubernetes: " + request.method + " " + request.target;
  net::io_context ioc;
  {
    std::lock_guard lock(mu_);
    if (cancelled_) return Error(what + ": cancelled");
    if (interrupted_) {
      interrupted_ = false;
      return Error(what + ": interrupted");
    }
    running_ = &ioc;
  }
  CallState state;
  std::exception_ptr failure;
  bool done = false;
  net::co_spawn(ioc, run_call(config_, request, *tok, deadline, on_line, state),
                [&](std::exception_ptr e) {
                  failure = e;
                  done = true;
                });
  ioc.run();
  bool cancelled = false;
  bool interrupted = false;
  {
    std::lock_guard lock(mu_);
    running_ = nullptr;
    cancelled = cancelled_;
    // An interrupt that stopped this call is delivered; one that came after the call
    // was done waits for the next call.
    if (!done && !cancelled && interrupted_) {
      interrupted_ = false;
      interrupted = true;
    }
  }
  if (interrupted) return Error(what + ": interrupted");
  if (!done || cancelled) return Error(what + ": cancelled");
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const boost::system::system_error& e) {
      const bool timed_out = e.code() == beast::error::timeout;
      return Error(what + ": " + (timed_out ? std::string("timed out") : e.code().message()));
    } catch (const std::exception& e) {
      return Error(what + ": " + e.what());
    }
  }
  return CallResult{std::move(state.end), std::move(state.whole)};
}

}  // namespace kvgate::io
