// KubeScaleClient against a small fake Kubernetes API server: HTTPS on loopback with a
// certificate made for the test, the scale subresource of Deployments and StatefulSets,
// bearer-token checks and Kubernetes-style Status errors.
#include "io/k8s_scale_client.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

namespace kvgate::io {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace k8s_scale_client_test {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace json = boost::json;
using tcp = boost::asio::ip::tcp;

struct KeyPair {
  std::string cert_pem;
  std::string key_pem;
};

std::string bio_string(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string s(data, static_cast<size_t>(n));
  BIO_free(bio);
  return s;
}

// A self-signed certificate (its own CA) for the given names, good for an hour.
KeyPair make_certificate(const char* san = "IP:127.0.0.1,DNS:localhost") {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), -60);
  X509_gmtime_adj(X509_getm_notAfter(x), 3600);
  X509_set_pubkey(x, key);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("kvgate-test"), -1, -1, 0);
  X509_set_issuer_name(x, name);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, x, x, nullptr, nullptr, 0);
  for (auto [nid, value] : {std::pair{NID_subject_alt_name, san},
                            std::pair{NID_basic_constraints, "critical,CA:TRUE"}}) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
  }
  X509_sign(x, key, EVP_sha256());
  BIO* cert = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(cert, x);
  BIO* pkey = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(pkey, key, nullptr, nullptr, 0, nullptr, nullptr);
  X509_free(x);
  EVP_PKEY_free(key);
  return {bio_string(cert), bio_string(pkey)};
}

struct Seen {
  std::string method, target, content_type, authorization, body;
};

class FakeApiServer {
 public:
  FakeApiServer(const KeyPair& keys, std::string token)
      : token_(std::move(token)), tls_(ssl::context::tls_server), acceptor_(ioc_) {
    tls_.use_certificate_chain(net::buffer(keys.cert_pem));
    tls_.use_private_key(net::buffer(keys.key_pem), ssl::context::pem);
    tcp::endpoint ep(net::ip::make_address("127.0.0.1"), 0);
    acceptor_.open(ep.protocol());
    acceptor_.bind(ep);
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    objects_["/apis/apps/v1/namespaces/llm/deployments/decode/scale"] = 2;
    objects_["/apis/apps/v1/namespaces/llm/statefulsets/prefill/scale"] = 1;
    net::co_spawn(ioc_, accept_loop(), net::detached);
    thread_ = std::thread([this] { ioc_.run(); });
  }
  ~FakeApiServer() {
    ioc_.stop();
    thread_.join();
  }
  uint16_t port() const { return port_; }
  std::vector<Seen> seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }

 private:
  net::awaitable<void> accept_loop() {
    for (;;) {
      tcp::socket socket = co_await acceptor_.async_accept(net::use_awaitable);
      net::co_spawn(ioc_, session(std::move(socket)), net::detached);
    }
  }

  net::awaitable<void> session(tcp::socket socket) {
    try {
      beast::ssl_stream<beast::tcp_stream> stream(std::move(socket), tls_);
      co_await stream.async_handshake(ssl::stream_base::server, net::use_awaitable);
      beast::flat_buffer buffer;
      http::request<http::string_body> req;
      co_await http::async_read(stream, buffer, req, net::use_awaitable);
      http::response<http::string_body> res = handle(req);
      res.prepare_payload();
      co_await http::async_write(stream, res, net::use_awaitable);
      beast::error_code ec;
      co_await stream.async_shutdown(net::redirect_error(net::use_awaitable, ec));
    } catch (const std::exception&) {
      // A client that failed verification hangs up mid-handshake: expected in one test.
    }
  }

  static http::response<http::string_body> status(http::status code, const std::string& msg) {
    http::response<http::string_body> res{code, 11};
    res.set(http::field::content_type, "application/json");
    json::object o{{"kind", "Status"},
                   {"apiVersion", "v1"},
                   {"status", "Failure"},
                   {"message", msg},
                   {"code", static_cast<int>(code)}};
    res.body() = json::serialize(o);
    return res;
  }

  http::response<http::string_body> handle(const http::request<http::string_body>& req) {
    std::lock_guard lock(mu_);
    seen_.push_back({std::string(req.method_string()), std::string(req.target()),
                     std::string(req[http::field::content_type]),
                     std::string(req[http::field::authorization]), req.body()});
    if (req[http::field::authorization] != "Bearer " + token_) {
      return status(http::status::unauthorized, "Unauthorized");
    }
    const std::string target(req.target());
    if (target.rfind("/api/v1/namespaces/llm/pods/", 0) == 0) return patch_pod(req, target);
    auto it = objects_.find(target);
    if (it == objects_.end()) {
      // /apis/apps/v1/namespaces/NS/KIND/NAME/scale -> "KIND.apps \"NAME\" not found"
      std::vector<std::string> parts;
      for (size_t a = 1, b; a <= target.size(); a = b + 1) {
        b = target.find('/', a);
        if (b == std::string::npos) b = target.size();
        parts.push_back(target.substr(a, b - a));
      }
      if (parts.size() == 8 && parts[7] == "scale") {
        return status(http::status::not_found, parts[5] + ".apps \"" + parts[6] + "\" not found");
      }
      return status(http::status::not_found, "the server could not find the requested resource");
    }
    int64_t previous = it->second;
    if (req.method() == http::verb::patch) {
      if (req[http::field::content_type] != "application/merge-patch+json") {
        return status(http::status::unsupported_media_type, "unsupported patch type");
      }
      boost::system::error_code ec;
      json::value v = json::parse(req.body(), ec);
      const json::value* r = nullptr;
      if (!ec && v.is_object()) {
        if (const json::value* spec = v.as_object().if_contains("spec");
            spec && spec->is_object()) {
          r = spec->as_object().if_contains("replicas");
        }
      }
      if (r == nullptr || !r->is_int64() || r->as_int64() < 0) {
        return status(http::status::unprocessable_entity, "spec.replicas: Invalid value");
      }
      it->second = r->as_int64();
    } else if (req.method() != http::verb::get) {
      return status(http::status::method_not_allowed, "method not allowed");
    }
    http::response<http::string_body> res{http::status::ok, 11};
    res.set(http::field::content_type, "application/json");
    json::object scale{{"kind", "Scale"},
                       {"apiVersion", "autoscaling/v1"},
                       {"spec", json::object{{"replicas", it->second}}},
                       {"status", json::object{{"replicas", previous}}}};
    res.body() = json::serialize(scale);
    return res;
  }

  // Merge-patches a pod's annotations; answers with the pod.
  http::response<http::string_body> patch_pod(const http::request<http::string_body>& req,
                                              const std::string& target) {
    const std::string name = target.substr(target.rfind('/') + 1);
    if (name != "decode-7f9c") {
      return status(http::status::not_found, "pods \"" + name + "\" not found");
    }
    if (req.method() != http::verb::patch ||
        req[http::field::content_type] != "application/merge-patch+json") {
      return status(http::status::unsupported_media_type, "unsupported patch type");
    }
    boost::system::error_code ec;
    json::value v = json::parse(req.body(), ec);
    if (ec) return status(http::status::bad_request, "bad JSON");
    const json::value* ann = v.is_object() ? v.as_object().if_contains("metadata") : nullptr;
    ann = ann && ann->is_object() ? ann->as_object().if_contains("annotations") : nullptr;
    if (ann && ann->is_object()) {
      for (const auto& kv : ann->as_object()) {
        if (kv.value().is_string()) annotations_[kv.key()] = std::string(kv.value().as_string());
      }
    }
    http::response<http::string_body> res{http::status::ok, 11};
    res.body() = R"({"kind":"Pod","apiVersion":"v1"})";
    return res;
  }

 public:
  std::map<std::string, std::string> annotations() {
    std::lock_guard lock(mu_);
    return annotations_;
  }

 private:
  std::map<std::string, std::string> annotations_;  // of the one pod, decode-7f9c
  std::string token_;
  net::io_context ioc_;
  ssl::context tls_;
  tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::map<std::string, int64_t> objects_;  // scale path -> spec.replicas
  std::vector<Seen> seen_;
};

class KubeScaleClientTest : public ::testing::Test {
 protected:
  KubeScaleClientTest() : keys_(make_certificate()), server_(keys_, "s3cret") {}

  KubeConfig config(std::string token = "s3cret") const {
    KubeConfig c;
    c.host = "127.0.0.1";
    c.port = server_.port();
    c.ca_pem = keys_.cert_pem;
    c.token = std::move(token);
    c.timeout = std::chrono::milliseconds(5000);
    return c;
  }

  KeyPair keys_;
  FakeApiServer server_;
};

const KubeTarget kDecode{"llm", KubeKind::kDeployment, "decode"};
const KubeTarget kPrefill{"llm", KubeKind::kStatefulSet, "prefill"};

TEST(KubePaths, ScaleSubresource) {
  EXPECT_EQ(scale_path(kDecode), "/apis/apps/v1/namespaces/llm/deployments/decode/scale");
  EXPECT_EQ(scale_path(kPrefill), "/apis/apps/v1/namespaces/llm/statefulsets/prefill/scale");
}

TEST_F(KubeScaleClientTest, PatchesSpecReplicasThroughTheScaleSubresource) {
  KubeScaleClient k8s(config());
  Result<ScaleState> s = k8s.get_scale(kDecode);
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(s->spec_replicas, 2);
  s = k8s.set_replicas(kDecode, 6);
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(s->spec_replicas, 6);
  EXPECT_EQ(s->status_replicas, 2);
  EXPECT_EQ(k8s.get_scale(kDecode)->spec_replicas, 6);

  const std::vector<Seen> seen = server_.seen();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[1].method, "PATCH");
  EXPECT_EQ(seen[1].target, "/apis/apps/v1/namespaces/llm/deployments/decode/scale");
  EXPECT_EQ(seen[1].content_type, "application/merge-patch+json");
  EXPECT_EQ(seen[1].authorization, "Bearer s3cret");
  EXPECT_EQ(seen[1].body, R"({"spec":{"replicas":6}})");
  EXPECT_EQ(seen[0].method, "GET");
}

TEST_F(KubeScaleClientTest, MarksDrainedPodsCheapToDelete) {
  KubeScaleClient k8s(config());
  Status s = k8s.set_pod_deletion_cost("llm", "decode-7f9c", -1000);
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(server_.annotations().at("controller.kubernetes.io/pod-deletion-cost"), "-1000");
  const Seen last = server_.seen().back();
  EXPECT_EQ(last.method, "PATCH");
  EXPECT_EQ(last.target, "/api/v1/namespaces/llm/pods/decode-7f9c");
  EXPECT_EQ(last.content_type, "application/merge-patch+json");
  s = k8s.set_pod_deletion_cost("llm", "gone", -1000);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("-> 404: pods \"gone\" not found"), std::string::npos) << s.error();
}

TEST_F(KubeScaleClientTest, StatefulSetsToo) {
  KubeScaleClient k8s(config());
  Result<ScaleState> s = k8s.set_replicas(kPrefill, 0);
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(s->spec_replicas, 0);
}

TEST_F(KubeScaleClientTest, ErrorsCarryStatusAndTheServersMessage) {
  Result<ScaleState> s = KubeScaleClient(config("wrong")).set_replicas(kDecode, 3);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("PATCH /apis/apps/v1/namespaces/llm/deployments/decode/scale -> 401"),
            std::string::npos)
      << s.error();
  EXPECT_NE(s.error().find("Unauthorized"), std::string::npos);

  s = KubeScaleClient(config()).get_scale({"llm", KubeKind::kDeployment, "nope"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("-> 404: deployments.apps \"nope\" not found"), std::string::npos)
      << s.error();
  EXPECT_FALSE(KubeScaleClient(config()).set_replicas(kDecode, -1).ok());
}

TEST_F(KubeScaleClientTest, RefusesAServerItsCaDidNotSign) {
  KubeConfig c = config();
  c.ca_pem = make_certificate().cert_pem;  // some other CA
  Result<ScaleState> s = KubeScaleClient(c).get_scale(kDecode);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("certificate verify failed"), std::string::npos) << s.error();
  EXPECT_TRUE(server_.seen().empty());  // no request reached the server
}

TEST_F(KubeScaleClientTest, ChecksTheNameItConnectsTo) {
  // The certificate names 127.0.0.1 and localhost; "localhost" verifies by DNS SAN.
  KubeConfig c = config();
  c.host = "localhost";
  Result<ScaleState> s = KubeScaleClient(c).get_scale(kDecode);
  if (!s.ok() && s.error().find("certificate") == std::string::npos) {
    GTEST_SKIP() << "localhost does not resolve to 127.0.0.1 here: " << s.error();
  }
  EXPECT_TRUE(s.ok()) << s.error();
}

TEST(KubeScaleClientNames, RefusesACertificateForAnotherName) {
  // Signed by the trusted CA, but issued to another host.
  const KeyPair other = make_certificate("DNS:api.example.com");
  FakeApiServer server(other, "s3cret");
  KubeConfig c;
  c.host = "127.0.0.1";
  c.port = server.port();
  c.ca_pem = other.cert_pem;
  c.token = "s3cret";
  Result<ScaleState> s = KubeScaleClient(c).get_scale(kDecode);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("certificate verify failed"), std::string::npos) << s.error();
  EXPECT_TRUE(server.seen().empty());
}

std::filesystem::path temp_dir() {
  static int n = 0;
  auto p = std::filesystem::temp_directory_path() /
           ("kvgate-k8s-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
  std::filesystem::create_directories(p);
  return p;
}

void write(const std::filesystem::path& p, const std::string& s) { std::ofstream(p) << s; }

TEST_F(KubeScaleClientTest, InClusterConfigReadsTheServiceAccountAndRereadsTheToken) {
  const auto dir = temp_dir();
  write(dir / "token", "wrong\n");
  write(dir / "ca.crt", keys_.cert_pem);
  write(dir / "namespace", "llm\n");
  const InClusterPaths paths{(dir / "token").string(), (dir / "ca.crt").string(),
                             (dir / "namespace").string()};
  ::setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", std::to_string(server_.port()).c_str(), 1);
  Result<KubeConfig> c = in_cluster_config(paths);
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  ::unsetenv("KUBERNETES_SERVICE_PORT");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->port, server_.port());
  EXPECT_EQ(*in_cluster_namespace(paths), "llm");

  KubeScaleClient k8s(*c);
  EXPECT_FALSE(k8s.get_scale(kDecode).ok());  // the token is wrong...
  write(dir / "token", "s3cret\n");           // ...until the kubelet rotates it
  Result<ScaleState> s = k8s.get_scale(kDecode);
  EXPECT_TRUE(s.ok()) << s.error();
  std::filesystem::remove_all(dir);
}

TEST(InClusterConfig, OutsideAPodSaysSo) {
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  Result<KubeConfig> c = in_cluster_config();
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().find("KUBERNETES_SERVICE_HOST"), std::string::npos);
}

TEST(KubeScaleClientTimeout, GivesUpOnASilentServer) {
  // A listening socket nobody accepts from: the connection completes in the kernel's
  // backlog, the TLS handshake never does.
  net::io_context ioc;
  tcp::acceptor silent(ioc, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
  KubeConfig c;
  c.host = "127.0.0.1";
  c.port = silent.local_endpoint().port();
  c.ca_pem = make_certificate().cert_pem;
  c.timeout = std::chrono::milliseconds(200);
  const auto start = std::chrono::steady_clock::now();
  Result<ScaleState> s = KubeScaleClient(c).get_scale(kDecode);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("timed out"), std::string::npos) << s.error();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
}

}  // namespace k8s_scale_client_test
}  // namespace kvgate::io
