// TLS server credentials: a PEM certificate chain and its private key, loaded into an
// OpenSSL SSL_CTX for kvgate's HTTPS listeners (TLS 1.2 and 1.3 only).
//
// Loading is also how a config is checked: `kvgate serve --check` reports an unreadable
// or malformed file, or a key that does not belong to the certificate, against the field
// at fault (TlsFileError::field) before anything listens.
//
//   if (auto err = check_tls_files({.cert_file = "c.pem", .key_file = "k.pem"})) {
//     ... err->field == TlsField::kKey, err->message ...
//   }
//
// OpenSSL stays out of this header (SSL_CTX is only forward-declared).
#pragma once

#include <optional>
#include <string>

struct ssl_ctx_st;  // OpenSSL's SSL_CTX

namespace kvgate::io {

struct TlsFiles {
  std::string cert_file;  // PEM: the server certificate first, then intermediates
  std::string key_file;   // PEM: its private key (unencrypted)
};

enum class TlsField { kCert, kKey };

struct TlsFileError {
  TlsField field;       // which file is at fault
  std::string message;  // names the file and what is wrong with it
};

// Configures `ctx` as a TLS 1.2/1.3 server with the certificate chain and key of `files`.
std::optional<TlsFileError> load_tls_server_files(ssl_ctx_st* ctx, const TlsFiles& files);

// Loads `files` into a scratch context: the same checks as at start, nothing kept.
std::optional<TlsFileError> check_tls_files(const TlsFiles& files);

}  // namespace kvgate::io
