// The `epp:` section's TLS, health port and threads (docs/epp.md): a certificate made at start or
// files checked as a listener's are, and errors that name the file, line and field.
#include <gtest/gtest.h>

#include <string>

#include "gateway/common/config.h"

namespace kvgate::gateway {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace epp_config_test {

std::string with_epp(const std::string& epp) {
  return epp +
         "pools:\n  main:\n    endpoints:\n      - http://127.0.0.1:8001\n"
         "models:\n  - name: m\n    pool: main\n";
}

std::string error_of(const std::string& yaml) {
  auto c = parse_gateway_config(yaml, "f.yaml");
  return c ? std::string("(parsed)") : c.error();
}

TEST(EppConfig, PlaintextWithoutHealthPortByDefault) {
  auto c = parse_gateway_config(with_epp("epp: {port: 9002}\n"), "f.yaml");
  ASSERT_TRUE(c) << c.error();
  ASSERT_TRUE(c->epp.has_value());
  EXPECT_FALSE(c->epp->tls.has_value());
  EXPECT_FALSE(c->epp->health_port.has_value());
  EXPECT_EQ(c->epp->threads, 1u);
}

TEST(EppConfig, ThreadsFromOneToSixtyFour) {
  auto c = parse_gateway_config(with_epp("epp:\n  threads: 4\n"), "f.yaml");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->epp->threads, 4u);
  EXPECT_EQ(error_of(with_epp("epp:\n  threads: 0\n")),
            "f.yaml:2:12: epp.threads: 0 is outside [1, 64]");
  EXPECT_EQ(error_of(with_epp("epp:\n  threads: 65\n")),
            "f.yaml:2:12: epp.threads: 65 is outside [1, 64]");
}

TEST(EppConfig, SelfSignedAndHealthPort) {
  auto c = parse_gateway_config(with_epp("epp:\n  tls: {self_signed: true}\n  health_port: 9003\n"),
                                "f.yaml");
  ASSERT_TRUE(c) << c.error();
  ASSERT_TRUE(c->epp->tls.has_value());
  EXPECT_TRUE(c->epp->tls->self_signed);
  EXPECT_TRUE(c->epp->tls->files.cert_file.empty());
  ASSERT_TRUE(c->epp->health_port.has_value());
  EXPECT_EQ(*c->epp->health_port, 9003);
}

TEST(EppConfig, ErrorsNameFileLineAndField) {
  EXPECT_EQ(error_of(with_epp("epp:\n  tls:\n    cert: /nonexistent/tls.crt\n"
                              "    key: /nonexistent/tls.key\n")),
            "f.yaml:3:11: epp.tls.cert: no such file: /nonexistent/tls.crt");
  const std::string no_key = error_of(with_epp("epp:\n  tls:\n    cert: /nonexistent/tls.crt\n"));
  EXPECT_EQ(no_key.rfind("f.yaml:", 0), 0u) << no_key;
  EXPECT_NE(no_key.find("epp.tls.key: missing"), std::string::npos) << no_key;
  const std::string both = error_of(with_epp("epp:\n  tls: {self_signed: true, cert: a.pem}\n"));
  EXPECT_EQ(both.rfind("f.yaml:2:", 0), 0u) << both;
  EXPECT_NE(both.find("epp.tls: give cert and key, or self_signed: true, not both"),
            std::string::npos)
      << both;
  const std::string unknown = error_of(with_epp("epp:\n  tls:\n    certfile: x.pem\n"));
  EXPECT_NE(unknown.find("f.yaml:3:5: epp.tls.certfile: unknown field"), std::string::npos)
      << unknown;
  EXPECT_EQ(error_of(with_epp("epp:\n  port: 9002\n  health_port: 9002\n")),
            "f.yaml:3:16: epp.health_port: 9002 is epp.port too");
  EXPECT_EQ(error_of(with_epp("epp:\n  health_port: 70000\n")),
            "f.yaml:2:16: epp.health_port: 70000 is outside [0, 65535]");
}

}  // namespace epp_config_test
}  // namespace kvgate::gateway
