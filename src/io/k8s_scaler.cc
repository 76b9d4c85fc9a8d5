#include "io/k8s_scaler.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/json.hpp>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <sstream>
#include <utility>

#include "env/file.h"

namespace kvgate::io {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace json = boost::json;
using tcp = boost::asio::ip::tcp;

namespace {

using env::read_file;

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

struct Reply {
  unsigned status = 0;
  std::string body;
};

struct Call {
  http::verb verb;
  std::string target;
  std::string body;
  std::string content_type;
  std::string token;
};

template <typename Stream>
net::awaitable<Reply> exchange(Stream& stream, const KubeConfig& c, const Call& call) {
  http::request<http::string_body> req{call.verb, call.target, 11};
  req.set(http::field::host, c.host);
  req.set(http::field::user_agent, "kvgate-autoscaler");
  req.set(http::field::accept, "application/json");
  if (!call.token.empty()) req.set(http::field::authorization, "Bearer " + call.token);
  if (!call.body.empty()) {
    req.set(http::field::content_type, call.content_type);
    req.body() = call.body;
  }
  req.prepare_payload();
  co_await http::async_write(stream, req, net::use_awaitable);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(1 << 20);
  co_await http::async_read(stream, buffer, parser, net::use_awaitable);
  co_return Reply{parser.get().result_int(), std::move(parser.get().body())};
}

net::awaitable<Reply> run_call(const KubeConfig& c, const Call& call) {
  auto ex = co_await net::this_coro::executor;
  tcp::resolver resolver(ex);
  const auto endpoints =
      co_await resolver.async_resolve(c.host, std::to_string(c.port), net::use_awaitable);
  if (!c.tls) {
    beast::tcp_stream stream(ex);
    stream.expires_after(c.timeout);
    co_await stream.async_connect(endpoints, net::use_awaitable);
    Reply r = co_await exchange(stream, c, call);
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    co_return r;
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
  beast::get_lowest_layer(stream).expires_after(c.timeout);
  co_await beast::get_lowest_layer(stream).async_connect(endpoints, net::use_awaitable);
  co_await stream.async_handshake(ssl::stream_base::client, net::use_awaitable);
  Reply r = co_await exchange(stream, c, call);
  // The API server may drop the connection without a TLS close_notify; that is fine here.
  beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(1));
  co_await stream.async_shutdown(net::redirect_error(net::use_awaitable, ec));
  co_return r;
}

Result<Reply> perform(const KubeConfig& c, Call call) {
  if (!c.token_file.empty()) {
    Result<std::string> token = read_file(c.token_file);
    if (!token) return Error("kubernetes: " + token.error());
    call.token = trim(std::move(*token));
  } else {
    call.token = c.token;
  }
  net::io_context ioc;
  std::exception_ptr failure;
  Reply reply;
  net::co_spawn(ioc, run_call(c, call), [&](std::exception_ptr e, Reply r) {
    failure = e;
    reply = std::move(r);
  });
  ioc.run();
  const std::string what =
      "kubernetes: " + std::string(http::to_string(call.verb)) + " " + call.target;
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
  if (reply.status < 200 || reply.status >= 300) {
    // The API server explains itself in a Status object's "message".
    std::string message = reply.body.substr(0, 200);
    boost::system::error_code ec;
    json::value v = json::parse(reply.body, ec);
    if (!ec && v.is_object()) {
      if (const json::value* m = v.as_object().if_contains("message"); m && m->is_string()) {
        message = std::string(m->as_string());
      }
    }
    return Error(what + " -> " + std::to_string(reply.status) + ": " + message);
  }
  return reply;
}

Result<ScaleState> parse_scale(const std::string& body) {
  boost::system::error_code ec;
  json::value v = json::parse(body, ec);
  if (ec || !v.is_object()) return Error("kubernetes: scale response is not a JSON object");
  ScaleState s;
  const auto read = [](const json::value& root, const char* section, int32_t& out) {
    const json::value* sec = root.as_object().if_contains(section);
    if (sec == nullptr || !sec->is_object()) return;
    const json::value* r = sec->as_object().if_contains("replicas");
    if (r != nullptr && r->is_int64()) out = static_cast<int32_t>(r->as_int64());
  };
  read(v, "spec", s.spec_replicas);
  read(v, "status", s.status_replicas);
  return s;
}

}  // namespace

std::string scale_path(const KubeTarget& t) {
  return "/apis/apps/v1/namespaces/" + t.ns + "/" +
         (t.kind == KubeKind::kDeployment ? "deployments" : "statefulsets") + "/" + t.name +
         "/scale";
}

Result<KubeConfig> in_cluster_config(const InClusterPaths& paths) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || *host == '\0') {
    return Error("not running in a pod: KUBERNETES_SERVICE_HOST is unset");
  }
  KubeConfig c;
  c.host = host;
  if (port != nullptr && *port != '\0') {
    char* end = nullptr;
    const long p = std::strtol(port, &end, 10);
    if (*end != '\0' || p <= 0 || p > 65535) {
      return Error(std::string("KUBERNETES_SERVICE_PORT: not a port: ") + port);
    }
    c.port = static_cast<uint16_t>(p);
  }
  Result<std::string> ca = read_file(paths.ca);
  if (!ca) return Error("service account CA: " + ca.error());
  c.ca_pem = std::move(*ca);
  Result<std::string> token = read_file(paths.token);
  if (!token) return Error("service account token: " + token.error());
  c.token_file = paths.token;
  return c;
}

Result<std::string> in_cluster_namespace(const InClusterPaths& paths) {
  Result<std::string> ns = read_file(paths.ns);
  if (!ns) return Error("service account namespace: " + ns.error());
  return trim(std::move(*ns));
}

KubeScaler::KubeScaler(KubeConfig config) : config_(std::move(config)) {}

Result<ScaleState> KubeScaler::get_scale(const KubeTarget& target) const {
  Result<Reply> r = perform(config_, {http::verb::get, scale_path(target), "", "", ""});
  if (!r) return Error(r.error());
  return parse_scale(r->body);
}

Result<ScaleState> KubeScaler::set_replicas(const KubeTarget& target, int32_t replicas) const {
  if (replicas < 0) return Error("kubernetes: replicas must be >= 0");
  const std::string body = "{\"spec\":{\"replicas\":" + std::to_string(replicas) + "}}";
  Result<Reply> r = perform(
      config_, {http::verb::patch, scale_path(target), body, "application/merge-patch+json", ""});
  if (!r) return Error(r.error());
  return parse_scale(r->body);
}

Status KubeScaler::set_pod_deletion_cost(const std::string& ns, const std::string& pod,
                                         int32_t cost) const {
  json::object patch{
      {"metadata",
       json::object{{"annotations", json::object{{"controller.kubernetes.io/pod-deletion-cost",
                                                  std::to_string(cost)}}}}}};
  Result<Reply> r =
      perform(config_, {http::verb::patch, "/api/v1/namespaces/" + ns + "/pods/" + pod,
                        json::serialize(patch), "application/merge-patch+json", ""});
  if (!r) return Error(r.error());
  return {};
}

}  // namespace kvgate::io
