// The `admin:` section of the gateway config: defaults, token or token file, and the
// rule that a non-loopback admin listener must have a token.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>

#include "gateway/common/config.h"

namespace kvgate::gateway {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace admin_config_test {

std::string with_admin(const std::string& admin) {
  return admin +
         "pools:\n  main:\n    endpoints:\n      - http://127.0.0.1:8001\n"
         "models:\n  - name: m\n    pool: main\n";
}

std::string error_of(const std::string& yaml) {
  auto c = parse_gateway_config(yaml, "f.yaml");
  return c ? std::string("(parsed)") : c.error();
}

TEST(AdminConfig, AbsentMeansNoAdminListener) {
  auto c = parse_gateway_config(with_admin(""), "f.yaml");
  ASSERT_TRUE(c) << c.error();
  EXPECT_FALSE(c->admin.has_value());
}

TEST(AdminConfig, LoopbackDefaultsAndInlineToken) {
  auto c = parse_gateway_config(with_admin("admin: {port: 0}\n"), "f.yaml");
  ASSERT_TRUE(c) << c.error();
  ASSERT_TRUE(c->admin.has_value());
  EXPECT_EQ(c->admin->address, "127.0.0.1");
  EXPECT_EQ(c->admin->port, 0);
  EXPECT_TRUE(c->admin->token.empty());

  c = parse_gateway_config(with_admin("admin: {address: 0.0.0.0, token: s3cret}\n"), "f.yaml");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->admin->port, 9090);
  EXPECT_EQ(c->admin->token, "s3cret");
}

TEST(AdminConfig, TokenFileIsReadRelativeToTheConfigAndTrimmed) {
  const std::string dir = ::testing::TempDir();
  const std::string name = "admin-token-" + std::to_string(::getpid());
  FILE* f = std::fopen((dir + "/" + name).c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("tok-123\n", f);
  std::fclose(f);
  auto c = parse_gateway_config(
      with_admin("admin: {address: 10.0.0.1, token_file: " + name + "}\n"), dir + "/g.yaml");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->admin->token, "tok-123");
  std::remove((dir + "/" + name).c_str());
}

TEST(AdminConfig, ErrorsNameFileLineAndField) {
  EXPECT_EQ(error_of(with_admin("admin:\n  address: 0.0.0.0\n")),
            "f.yaml:2:12: admin.address: 0.0.0.0 is not a loopback address: set admin.token "
            "or admin.token_file");
  EXPECT_EQ(error_of(with_admin("admin:\n  port: 99999\n")),
            "f.yaml:2:9: admin.port: 99999 is outside [0, 65535]");
  EXPECT_EQ(error_of(with_admin("admin:\n  tokn: x\n")), "f.yaml:2:3: admin.tokn: unknown field");
  EXPECT_EQ(error_of(with_admin("admin:\n  token_file: /nonexistent/admin.token\n")),
            "f.yaml:2:15: admin.token_file: cannot read /nonexistent/admin.token: No such file or "
            "directory");
  EXPECT_EQ(error_of(with_admin("admin:\n  token: a\n  token_file: b\n")),
            "f.yaml:2:3: admin: give token or token_file, not both");
}

}  // namespace admin_config_test
}  // namespace kvgate::gateway
