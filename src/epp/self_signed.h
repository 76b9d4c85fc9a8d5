// A self-signed TLS certificate for the Endpoint Picker's gRPC port, made at start
// (`epp.tls: {self_signed: true}`, docs/epp.md), as the Gateway API Inference
// Extension's reference picker does when it is given no certificate: the gateways that
// call a picker over TLS do not verify its certificate.
//
// The key is a new ECDSA P-256 key, never written to disk; the certificate is signed by
// it, valid from an hour ago for ten years, with the subject CN=kvgate-epp and the names
// kvgate-epp, localhost, 127.0.0.1 and ::1. OpenSSL stays out of this header.
//
//   Result<epp::PemPair> pair = epp::make_self_signed();
//   ... pair->cert_pem, pair->key_pem: grpc::SslServerCredentials's PEM strings
#pragma once

#include <string>

#include "core/common/result.h"

namespace kvgate::epp {

struct PemPair {
  std::string cert_pem;  // the certificate chain, PEM
  std::string key_pem;   // its private key, PEM (PKCS #8, unencrypted)
};

// Errors: OpenSSL could not make the key or the certificate (its reason).
Result<PemPair> make_self_signed();

}  // namespace kvgate::epp
