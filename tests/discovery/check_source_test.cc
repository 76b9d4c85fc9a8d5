// check_source: what a source's start() would refuse, found without starting it, with
// start()'s message word for word (`kvgate serve --check` prints it). On real temp
// directories, inotify and files; nothing goes over the network.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include "../integration/support/recording_sink.h"
#include "discovery/source.h"

namespace kvgate::discovery {
// Named after the file, not anonymous: the tests compile in unity batches.
namespace check_source_test {

// start()'s answer for `config`: its error, or ok (the source is stopped again).
Status start_status(const SourceConfig& config) {
  kvgate::testing::RecordingSink sink;
  auto source = make_source(config, sink);
  if (!source) return Error(source.error());
  Status s = (*source)->start();
  (*source)->stop();
  return s;
}

SourceConfig file_source(const std::string& path) {
  return {.kind = "file", .name = "file", .params = FileSourceConfig{.path = path}};
}

SourceConfig kubernetes_source(KubernetesSourceConfig k) {
  k.selector = "app=vllm";
  return {.kind = "kubernetes", .name = "kubernetes", .params = std::move(k)};
}

// Sets an environment variable for the scope and puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

class CheckSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("check_source." + std::to_string(::getpid()) + "." +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::permissions(dir_ / "locked", std::filesystem::perms::owner_all, ec);
    std::filesystem::remove_all(dir_, ec);
  }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
};

TEST_F(CheckSourceTest, AFileThatDoesNotExistYetInAWatchableDirectoryIsOk) {
  const SourceConfig c = file_source(path("endpoints.yaml"));
  Status s = check_source(c);
  EXPECT_TRUE(s) << s.error();
  EXPECT_FALSE(std::filesystem::exists(path("endpoints.yaml")));  // checking wrote nothing
  EXPECT_TRUE(start_status(c));  // serve starts it too (empty, waiting for the file)
  write("endpoints.yaml", "endpoints: [http://10.0.0.1:8000]\n");
  EXPECT_TRUE(check_source(c));
}

TEST_F(CheckSourceTest, ADirectoryThatCannotBeWatchedIsRefusedAsStartRefusesIt) {
  const SourceConfig c = file_source(path("no/such/endpoints.yaml"));
  Status checked = check_source(c);
  ASSERT_FALSE(checked);
  EXPECT_EQ(checked.error(), "discovery file " + path("no/such/endpoints.yaml") +
                                 ": cannot watch " + path("no/such") +
                                 ": No such file or directory");
  Status started = start_status(c);
  ASSERT_FALSE(started);
  EXPECT_EQ(checked.error(), started.error());
}

TEST_F(CheckSourceTest, ADirectoryWithoutReadPermissionIsRefusedAsStartRefusesIt) {
  if (::geteuid() == 0) GTEST_SKIP() << "root may watch any directory";
  std::filesystem::create_directories(dir_ / "locked");
  std::filesystem::permissions(dir_ / "locked", std::filesystem::perms::none);
  const SourceConfig c = file_source(path("locked/endpoints.yaml"));
  Status checked = check_source(c);
  ASSERT_FALSE(checked);
  EXPECT_NE(checked.error().find("cannot watch " + path("locked") + ": Permission denied"),
            std::string::npos)
      << checked.error();
  Status started = start_status(c);
  ASSERT_FALSE(started);
  EXPECT_EQ(checked.error(), started.error());
}

TEST_F(CheckSourceTest, DnsHasNothingToTryBeyondItsConfig) {
  // A name that cannot resolve: not an error at start (the source reports it later), so
  // not an error here; and nothing is queried.
  const SourceConfig c{.kind = "dns",
                       .name = "dns",
                       .params = DnsSourceConfig{.name = "engines.invalid", .port = 8000}};
  EXPECT_TRUE(check_source(c));
}

TEST_F(CheckSourceTest, AKubeconfigThatCannotBeReadIsRefusedAsStartRefusesIt) {
  const SourceConfig c = kubernetes_source({.kubeconfig = path("kubeconfig")});
  Status checked = check_source(c);
  ASSERT_FALSE(checked);
  EXPECT_TRUE(checked.error().starts_with(path("kubeconfig") + ": ")) << checked.error();
  Status started = start_status(c);
  ASSERT_FALSE(started);
  EXPECT_EQ(checked.error(), started.error());

  // A kubeconfig naming a CA file that is not there: refused the same way.
  write("kubeconfig",
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters:\n- name: k\n  cluster: {server: 'https://127.0.0.1:6443', "
        "certificate-authority: ca.crt}\n"
        "contexts:\n- name: c\n  context: {cluster: k, user: u}\n"
        "users:\n- name: u\n  user: {token: t}\n");
  checked = check_source(c);
  ASSERT_FALSE(checked);
  EXPECT_NE(checked.error().find("certificate-authority"), std::string::npos) << checked.error();
  started = start_status(c);
  ASSERT_FALSE(started);
  EXPECT_EQ(checked.error(), started.error());

  // With the CA there it is ok: no request is sent (no API server listens here).
  write("ca.crt", "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n");
  Status ok = check_source(c);
  EXPECT_TRUE(ok) << ok.error();
}

TEST_F(CheckSourceTest, InClusterCredentialsMustBeReadableAsAtStart) {
  KubernetesSourceConfig k;
  k.token_file = path("token");
  k.ca_file = path("ca.crt");
  k.namespace_file = path("namespace");
  const SourceConfig c = kubernetes_source(k);
  {
    const ScopedEnv host("KUBERNETES_SERVICE_HOST", nullptr);
    Status checked = check_source(c);
    ASSERT_FALSE(checked);
    EXPECT_EQ(checked.error(),
              "not running in a pod: KUBERNETES_SERVICE_HOST is unset (or give discovery a "
              "kubeconfig)");
    EXPECT_EQ(checked.error(), start_status(c).error());
  }
  const ScopedEnv host("KUBERNETES_SERVICE_HOST", "127.0.0.1");
  const ScopedEnv port("KUBERNETES_SERVICE_PORT", "6443");
  Status no_ca = check_source(c);
  ASSERT_FALSE(no_ca);
  EXPECT_TRUE(no_ca.error().starts_with("service account CA: ")) << no_ca.error();
  EXPECT_EQ(no_ca.error(), start_status(c).error());
  write("ca.crt", "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n");
  Status no_token = check_source(c);
  ASSERT_FALSE(no_token);
  EXPECT_TRUE(no_token.error().starts_with("service account token: ")) << no_token.error();
  EXPECT_EQ(no_token.error(), start_status(c).error());
  write("token", "s3cret\n");
  // The namespace file is optional (the namespace defaults), as at start.
  Status ok = check_source(c);
  EXPECT_TRUE(ok) << ok.error();
}

}  // namespace check_source_test
}  // namespace kvgate::discovery
