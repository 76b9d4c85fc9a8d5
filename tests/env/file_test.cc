#include "env/file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace kvgate::env {
namespace {

TEST(ReadFile, ReadsEveryByte) {
  char path[] = "/tmp/kvgate-read-file-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  std::string data(200'000, 'x');
  data[7] = '\0';  // binary: a NUL does not end it
  data.back() = '\n';
  ASSERT_EQ(write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  close(fd);
  auto got = read_file(path);
  std::remove(path);
  ASSERT_TRUE(got.ok()) << got.error();
  EXPECT_EQ(*got, data);
}

TEST(ReadFile, NamesTheFileAndTheReason) {
  auto got = read_file("/nonexistent/kvgate/file.yaml");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error(), "cannot read /nonexistent/kvgate/file.yaml: No such file or directory");
}

TEST(WriteFiles, CreatesTheDirectoryAndReplacesWhatWasThere) {
  char base[] = "/tmp/kvgate-write-files-XXXXXX";
  ASSERT_NE(mkdtemp(base), nullptr);
  const std::string dir = std::string(base) + "/out/run";
  ASSERT_TRUE(write_files(dir, {{"a.csv", "old"}}).ok());
  auto written = write_files(dir, {{"a.csv", "x,y\n"}, {"b.svg", "<svg/>"}});
  ASSERT_TRUE(written.ok()) << written.error();
  EXPECT_EQ(*written, (std::vector<std::string>{dir + "/a.csv", dir + "/b.svg"}));
  EXPECT_EQ(*read_file(dir + "/a.csv"), "x,y\n");
  EXPECT_EQ(*read_file(dir + "/b.svg"), "<svg/>");
  // A directory that cannot be made is an error naming it.
  auto bad = write_files(dir + "/a.csv/sub", {{"c", ""}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find(dir + "/a.csv/sub"), std::string::npos) << bad.error();
  std::filesystem::remove_all(base);
}

}  // namespace
}  // namespace kvgate::env
