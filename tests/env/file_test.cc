#include "env/file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
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

}  // namespace
}  // namespace kvgate::env
