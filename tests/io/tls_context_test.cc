#include "io/tls_context.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace kvgate::io {
namespace {

// A temp dir with a fresh self-signed certificate and key (the `openssl` CLI).
class TlsFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kvgate-tls-unit-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    for (const char* name : {"a", "b"}) {
      const std::string cmd =
          "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
          "-nodes -days 1 -subj /CN=localhost -keyout " +
          path(std::string(name) + ".key") + " -out " + path(std::string(name) + ".pem") +
          " 2>/dev/null";
      ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    }
    std::ofstream(path("junk.pem")) << "-----BEGIN CERTIFICATE-----\nnot base64\n";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  std::string dir_;
};

TEST_F(TlsFilesTest, AMatchingPairLoads) {
  EXPECT_TRUE(check_tls_files({path("a.pem"), path("a.key")}));
}

TEST_F(TlsFilesTest, EachFaultNamesTheFileAtFault) {
  auto missing = check_tls_files({path("none.pem"), path("a.key")});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.failure().field, "cert");
  EXPECT_NE(missing.error().find("cannot read " + path("none.pem")), std::string::npos);

  auto junk = check_tls_files({path("junk.pem"), path("a.key")});
  ASSERT_FALSE(junk);
  EXPECT_EQ(junk.failure().field, "cert");
  EXPECT_NE(junk.error().find("not a PEM certificate chain"), std::string::npos) << junk.error();

  auto key_is_cert = check_tls_files({path("a.pem"), path("a.pem")});
  ASSERT_FALSE(key_is_cert);
  EXPECT_EQ(key_is_cert.failure().field, "key");

  auto other_key = check_tls_files({path("a.pem"), path("b.key")});
  ASSERT_FALSE(other_key);
  EXPECT_EQ(other_key.failure().field, "key");
  EXPECT_NE(other_key.error().find(path("b.key")), std::string::npos) << other_key.error();
}

}  // namespace
}  // namespace kvgate::io
