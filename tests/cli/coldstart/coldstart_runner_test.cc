#include "cli/coldstart/coldstart_runner.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace kvgate::coldstart {
namespace {

namespace fs = std::filesystem;

class EmptyDirectoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("kvgate-empty-dir-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

TEST_F(EmptyDirectoryTest, RemovesContentsAndKeepsTheDirectory) {
  fs::path cache = root_ / "cache";
  fs::create_directories(cache / "torch_compile_cache" / "abc");
  std::ofstream(cache / "torch_compile_cache" / "abc" / "kernel.so") << "x";
  std::ofstream(cache / "top") << "y";
  fs::path outside = root_ / "outside";
  std::ofstream(outside) << "z";
  ASSERT_TRUE(empty_directory(cache.string()));
  EXPECT_TRUE(fs::is_directory(cache));
  EXPECT_TRUE(fs::is_empty(cache));
  EXPECT_TRUE(fs::exists(outside));  // a sibling is untouched
}

TEST_F(EmptyDirectoryTest, CreatesAMissingDirectory) {
  fs::path cache = root_ / "a" / "b";
  ASSERT_TRUE(empty_directory(cache.string()));
  EXPECT_TRUE(fs::is_directory(cache));
}

TEST_F(EmptyDirectoryTest, RefusesRootAndFiles) {
  EXPECT_FALSE(empty_directory("/"));
  EXPECT_FALSE(empty_directory("/./"));
  fs::path file = root_ / "file";
  std::ofstream(file) << "x";
  Status s = empty_directory(file.string());
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().find("not a directory"), std::string::npos);
  EXPECT_TRUE(fs::exists(file));
}

TEST(RunColdstartTest, RejectsBadOptionsBeforeStartingAnything) {
  RunnerOptions o;
  o.command = {"/bin/true"};
  o.health_url = "localhost:8000/health";
  o.patterns = *preset_patterns("vllm");
  Result<ColdstartReport> r = run_coldstart(o, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("http://"), std::string::npos);
  o.health_url = "http://127.0.0.1:1/health";
  o.command.clear();
  EXPECT_FALSE(run_coldstart(o, nullptr).ok());
  o.command = {"/bin/true"};
  o.runs = 0;
  EXPECT_FALSE(run_coldstart(o, nullptr).ok());
}

}  // namespace
}  // namespace kvgate::coldstart
