#include "epp/self_signed.h"

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdint>
#include <memory>

namespace kvgate::epp {
namespace {

constexpr long kOneHour = 3600;
constexpr long kTenYears = 10L * 365 * 24 * 3600;

template <typename T, void (*Free)(T*)>
struct Freer {
  void operator()(T* p) const { Free(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Freer<EVP_PKEY, EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Freer<X509, X509_free>>;
using Ext = std::unique_ptr<X509_EXTENSION, Freer<X509_EXTENSION, X509_EXTENSION_free>>;
using Bio = std::unique_ptr<BIO, Freer<BIO, BIO_free_all>>;

// What failed, with OpenSSL's last reason (its error queue is cleared).
Error failed(const char* what) {
  unsigned long code = 0;
  unsigned long last = 0;
  while ((code = ERR_get_error()) != 0) last = code;
  char reason[256] = "unknown OpenSSL error";
  if (last != 0) ERR_error_string_n(last, reason, sizeof(reason));
  return Error(std::string("epp: self-signed certificate: ") + what + ": " + reason);
}

// The PEM text a writer put in a memory BIO.
std::string text_of(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return n > 0 && data ? std::string(data, static_cast<size_t>(n)) : std::string();
}

bool add_extension(X509* cert, int nid, const char* value) {
  X509V3_CTX ctx{};
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  Ext ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
  return ext && X509_add_ext(cert, ext.get(), -1) == 1;
}

}  // namespace

Result<PemPair> make_self_signed() {
  ERR_clear_error();
  char curve[] = "P-256";
  Key key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", curve));
  if (!key) return failed("cannot make an EC P-256 key");

  Cert cert(X509_new());
  if (!cert) return failed("cannot make a certificate");
  uint64_t serial = 0;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(&serial), sizeof(serial)) != 1) {
    return failed("no random serial number");
  }
  serial >>= 1;  // a positive serial
  X509_NAME* name = X509_get_subject_name(cert.get());
  const bool made =
      X509_set_version(cert.get(), X509_VERSION_3) == 1 &&
      ASN1_INTEGER_set_uint64(X509_get_serialNumber(cert.get()), serial) == 1 &&
      X509_gmtime_adj(X509_getm_notBefore(cert.get()), -kOneHour) != nullptr &&
      X509_gmtime_adj(X509_getm_notAfter(cert.get()), kTenYears) != nullptr &&
      X509_set_pubkey(cert.get(), key.get()) == 1 &&
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>("kvgate-epp"), -1, -1,
                                 0) == 1 &&
      X509_set_issuer_name(cert.get(), name) == 1 &&
      // Its own trust anchor: a client that pins it (a test) verifies it as its root.
      add_extension(cert.get(), NID_basic_constraints, "critical,CA:TRUE") &&
      add_extension(cert.get(), NID_key_usage, "critical,digitalSignature,keyCertSign") &&
      add_extension(cert.get(), NID_ext_key_usage, "serverAuth") &&
      add_extension(cert.get(), NID_subject_key_identifier, "hash") &&
      add_extension(cert.get(), NID_subject_alt_name,
                    "DNS:kvgate-epp,DNS:localhost,IP:127.0.0.1,IP:::1");
  if (!made) return failed("cannot fill the certificate");
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) return failed("cannot sign");

  Bio cert_out(BIO_new(BIO_s_mem()));
  Bio key_out(BIO_new(BIO_s_mem()));
  if (!cert_out || !key_out || PEM_write_bio_X509(cert_out.get(), cert.get()) != 1 ||
      PEM_write_bio_PrivateKey(key_out.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) !=
          1) {
    return failed("cannot write PEM");
  }
  return PemPair{text_of(cert_out.get()), text_of(key_out.get())};
}

}  // namespace kvgate::epp
