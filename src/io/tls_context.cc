#include "io/tls_context.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>

namespace kvgate::io {
namespace {

// The most recent OpenSSL error on this thread's queue (the queue is cleared).
std::string openssl_error() {
  unsigned long code = 0;
  unsigned long last = 0;
  while ((code = ERR_get_error()) != 0) last = code;
  if (last == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(last, buf, sizeof(buf));
  // "error:0A080009:SSL routines::PEM lib" -> keep the reason after the last ':'.
  const char* reason = std::strrchr(buf, ':');
  return reason && reason[1] ? std::string(reason + 1) : std::string(buf);
}

std::optional<std::string> unreadable(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return "cannot read " + path + ": " + std::strerror(errno);
  std::fclose(f);
  return std::nullopt;
}

// A passphrase callback that refuses: an encrypted key must fail to load, not block
// reading a passphrase from the terminal.
int no_passphrase(char*, int, int, void*) { return 0; }

Error cert_error(std::string message) {
  return Error(ErrorCode::kInvalidArgument, std::move(message), "cert");
}
Error key_error(std::string message) {
  return Error(ErrorCode::kInvalidArgument, std::move(message), "key");
}

}  // namespace

Status load_tls_server_files(ssl_ctx_st* ctx, const TlsFiles& files) {
  ERR_clear_error();
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(
      ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_default_passwd_cb(ctx, no_passphrase);
  if (auto e = unreadable(files.cert_file)) return cert_error(*e);
  if (SSL_CTX_use_certificate_chain_file(ctx, files.cert_file.c_str()) != 1) {
    return cert_error(files.cert_file + ": not a PEM certificate chain (" + openssl_error() + ")");
  }
  if (auto e = unreadable(files.key_file)) return key_error(*e);
  if (SSL_CTX_use_PrivateKey_file(ctx, files.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    return key_error(files.key_file +
                     ": not an unencrypted PEM private key, or not the certificate's (" +
                     openssl_error() + ")");
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    return key_error(files.key_file + ": does not match the certificate in " + files.cert_file +
                     " (" + openssl_error() + ")");
  }
  return {};
}

Status check_tls_files(const TlsFiles& files) {
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_server_method()),
                                                        &SSL_CTX_free);
  if (!ctx) {
    return Error(ErrorCode::kInternal, "cannot create a TLS context: " + openssl_error(), "cert");
  }
  return load_tls_server_files(ctx.get(), files);
}

}  // namespace kvgate::io
