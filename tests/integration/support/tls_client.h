// Client side of the TLS tests: a self-signed certificate made with the `openssl` CLI, a
// blocking HTTPS request that verifies the server against it, and a raw TCP exchange
// for bytes that are not TLS.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "core/common/result.h"
#include "io/http_client.h"

namespace kvgate::testing {

struct TestCertificate {
  std::string dir;
  std::string cert_file;  // self-signed, CN and subjectAltName localhost / 127.0.0.1
  std::string key_file;
};

// Generates a fresh P-256 key and certificate in a new temp directory.
Result<TestCertificate> make_test_certificate();

struct HttpsOptions {
  std::string ca_file;                    // the only trusted root
  std::string server_name = "localhost";  // SNI and the name the certificate must carry
  bool tls12_only = false;                // offer TLS 1.2 and nothing newer
};

struct HttpsResponse {
  io::HttpClientResponse response;
  std::string tls_version;  // "TLSv1.3", ...
};

// One HTTPS/1.1 request on a new connection to 127.0.0.1:port. Errors: connection,
// handshake (certificate not trusted, ...), timeout, malformed response.
Result<HttpsResponse> https_fetch(uint16_t port, const std::string& method,
                                  const std::string& target, const std::string& body,
                                  const HttpsOptions& options,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(30));

// Sends `bytes` to 127.0.0.1:port over plain TCP and reads until the server closes the
// connection; returns what it sent back. Error: the server kept the connection open
// past `timeout` (or connecting failed).
Result<std::string> send_raw_until_closed(uint16_t port, const std::string& bytes,
                                          std::chrono::milliseconds timeout);

}  // namespace kvgate::testing
