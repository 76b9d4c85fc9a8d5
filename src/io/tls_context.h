// TLS server credentials: a PEM certificate chain and its private key, loaded into an
// OpenSSL SSL_CTX for kvgate's HTTPS listeners (TLS 1.2 and 1.3 only).
//
// Loading is also how a config is checked: `kvgate serve --check` reports an unreadable
// or malformed file, or a key that does not belong to the certificate, against the field
// at fault (the Error's field: "cert" or "key") before anything listens.
//
//   if (Status st = check_tls_files({.cert_file = "c.pem", .key_file = "k.pem"}); !st) {
//     ... st.failure().field == "key", st.error() ...
//   }
//
// OpenSSL stays out of this header (SSL_CTX is only forward-declared).
#pragma once

#include <string>

#include "core/common/result.h"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX

namespace kvgate::io {

struct TlsFiles {
  std::string cert_file;  // PEM: the server certificate first, then intermediates
  std::string key_file;   // PEM: its private key (unencrypted)
};

// Configures `ctx` as a TLS 1.2/1.3 server with the certificate chain and key of `files`.
// A failure is kInvalidArgument (kInternal: no context), its field the file at fault,
// "cert" or "key" (named as the config keys are), its message naming the file and what is
// wrong with it.
Status load_tls_server_files(ssl_ctx_st* ctx, const TlsFiles& files);

// Loads `files` into a scratch context: the same checks as at start, nothing kept.
Status check_tls_files(const TlsFiles& files);

}  // namespace kvgate::io
