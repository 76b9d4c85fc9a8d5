// `kvgate serve` with an HTTPS listener in front of a real `kvgate engine`: chat and
// streaming over TLS 1.3 and 1.2 with a self-signed certificate made by the `openssl`
// CLI; "TLS garbage" (random bytes, plain HTTP, silence) on the TLS port closes the
// connection without hurting the next client; unusable certificate or key files are
// config errors naming file, line and field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "support/gateway_fixture.h"
#include "support/tls_client.h"

namespace kvgate::testing {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace gateway_tls_test {

const std::vector<std::string> kFast = {"--time-scale", "0.01", "--model", "sim"};

std::string tls_yaml(const std::string& engine_url, const TestCertificate& cert) {
  return gateway_yaml({engine_url}, "round-robin")
      .replace(0, std::string("listeners:\n  - address: 127.0.0.1\n    port: 0\n").size(),
               "listeners:\n  - address: 127.0.0.1\n    port: 0\n    tls: {cert: " +
                   cert.cert_file + ", key: " + cert.key_file + "}\n");
}

struct TlsGateway {
  std::unique_ptr<ChildProcess> proc;
  uint16_t port = 0;

  explicit TlsGateway(const std::string& yaml) {
    auto p = ChildProcess::spawn(kvgate_bin(), {"serve", write_temp_file("tls.yaml", yaml)});
    if (!p) {
      ADD_FAILURE() << p.error();
      return;
    }
    proc = std::move(*p);
    auto line = proc->wait_for_line("listening on https://127.0.0.1:");
    if (!line) {
      ADD_FAILURE() << line.error();
      return;
    }
    port = static_cast<uint16_t>(std::stoi(line->substr(line->rfind(':') + 1)));
  }
};

class GatewayTls : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = make_test_certificate();
    ASSERT_TRUE(c) << c.error();
    cert_ = *c;
  }
  void TearDown() override { std::filesystem::remove_all(cert_.dir); }

  HttpsOptions trusting() const { return {.ca_file = cert_.cert_file}; }

  TestCertificate cert_;
};

const std::string kChat =
    R"({"model":"sim","messages":[{"role":"user","content":"hello over tls"}],"max_tokens":4)";

TEST_F(GatewayTls, ChatAndStreamingOverTls13And12) {
  EngineProcess engine(kFast);
  ASSERT_FALSE(engine.url.empty());
  TlsGateway gw(tls_yaml(engine.url, cert_));
  ASSERT_NE(gw.port, 0);

  auto whole = https_fetch(gw.port, "POST", "/v1/chat/completions", kChat + "}", trusting());
  ASSERT_TRUE(whole) << whole.error();
  EXPECT_EQ(whole->tls_version, "TLSv1.3");
  ASSERT_EQ(whole->response.status, 200) << whole->response.body;
  auto body = parse_json(whole->response.body);
  EXPECT_EQ(body.at("usage").at("completion_tokens").as_int64(), 4);
  EXPECT_EQ(*whole->response.header("x-kvgate-endpoint"), engine.url);

  HttpsOptions tls12 = trusting();
  tls12.tls12_only = true;
  auto streamed =
      https_fetch(gw.port, "POST", "/v1/chat/completions", kChat + R"(,"stream":true})", tls12);
  ASSERT_TRUE(streamed) << streamed.error();
  EXPECT_EQ(streamed->tls_version, "TLSv1.2");
  ASSERT_EQ(streamed->response.status, 200);
  EXPECT_EQ(*streamed->response.header("content-type"), "text/event-stream");
  auto events = sse_events(streamed->response.body);
  ASSERT_EQ(events.size(), 6u) << streamed->response.body;  // role, 4 tokens, [DONE]
  EXPECT_EQ(events.back(), "[DONE]");

  // The certificate is checked by the client: without trusting it, no connection.
  TestCertificate other = *make_test_certificate();
  auto untrusted = https_fetch(gw.port, "GET", "/health", "", {.ca_file = other.cert_file});
  EXPECT_FALSE(untrusted);
  std::filesystem::remove_all(other.dir);
  EXPECT_EQ(gw.proc->stop(), 0) << gw.proc->errors();
}

TEST_F(GatewayTls, GarbageOnTheTlsPortClosesTheConnectionAndTheNextClientIsServed) {
  EngineProcess engine(kFast);
  ASSERT_FALSE(engine.url.empty());
  TlsGateway gw(tls_yaml(engine.url, cert_));
  ASSERT_NE(gw.port, 0);
  std::mt19937 rng(7);
  std::string noise(4096, '\0');
  for (char& c : noise) c = static_cast<char>(rng());
  // A TLS record header announcing a huge handshake, then junk.
  const std::string bad_record = std::string("\x16\x03\x01\xff\xff", 5) + noise.substr(0, 200);
  for (const std::string& bytes : {
           noise,
           bad_record,
           std::string("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"),
           std::string("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ") +
               std::to_string(kChat.size() + 1) + "\r\n\r\n" + kChat + "}",
       }) {
    auto r = send_raw_until_closed(gw.port, bytes, std::chrono::seconds(10));
    ASSERT_TRUE(r) << r.error();
    EXPECT_EQ(r->find("HTTP/1.1"), std::string::npos) << *r;  // no plain answer leaks out
    auto ok = https_fetch(gw.port, "GET", "/health", "", trusting());
    ASSERT_TRUE(ok) << ok.error();
    EXPECT_EQ(ok->response.status, 200);
  }
  // A client that connects and says nothing is dropped after the header timeout (2 s).
  const auto t0 = std::chrono::steady_clock::now();
  auto silent = send_raw_until_closed(gw.port, "", std::chrono::seconds(10));
  ASSERT_TRUE(silent) << silent.error();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  auto after = https_fetch(gw.port, "POST", "/v1/chat/completions", kChat + "}", trusting());
  ASSERT_TRUE(after) << after.error();
  EXPECT_EQ(after->response.status, 200);
  EXPECT_EQ(gw.proc->stop(), 0) << gw.proc->errors();
}

// Runs `kvgate serve --check` on `yaml` and returns (exit code, stderr).
std::pair<int, std::string> check(const std::string& yaml) {
  auto p = ChildProcess::spawn(kvgate_bin(), {"serve", "--check", write_temp_file("c.yaml", yaml)});
  if (!p) return {-1, p.error()};
  for (int i = 0; i < 1000 && (*p)->running(); ++i) {
    // Waits for the kvgate serve --check child to exit by itself.
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  int code = (*p)->stop();
  return {code, (*p)->errors()};
}

TEST_F(GatewayTls, UnusableCertificateOrKeyIsAConfigErrorWithFileLineAndField) {
  const std::string dir = cert_.dir;
  { std::ofstream(dir + "/junk.pem") << "not a certificate\n"; }
  auto other = make_test_certificate();
  ASSERT_TRUE(other) << other.error();
  struct Case {
    std::string cert, key, field, message;
  };
  for (const Case& c : {
           Case{dir + "/junk.pem", cert_.key_file, "listeners[0].tls.cert",
                "not a PEM certificate chain"},
           Case{cert_.cert_file, dir + "/junk.pem", "listeners[0].tls.key",
                "not an unencrypted PEM private key"},
           Case{cert_.cert_file, other->key_file, "listeners[0].tls.key", ""},
           Case{cert_.cert_file, dir + "/missing.pem", "listeners[0].tls.key", "no such file"},
       }) {
    TestCertificate files{dir, c.cert, c.key};
    auto [code, err] = check(tls_yaml("http://127.0.0.1:1", files));
    EXPECT_EQ(code, 2) << err;
    EXPECT_NE(err.find(":4:"), std::string::npos) << err;  // the tls line
    EXPECT_NE(err.find(c.field + ": "), std::string::npos) << err;
    EXPECT_NE(err.find(c.message), std::string::npos) << err;
  }
  std::filesystem::remove_all(other->dir);
  // A readable pair passes.
  auto [code, err] = check(tls_yaml("http://127.0.0.1:1", cert_));
  EXPECT_EQ(code, 0) << err;
}

}  // namespace gateway_tls_test
}  // namespace kvgate::testing
