// The file source on real files and inotify: rewrites in place and by rename, a partial
// write, invalid YAML, deletion.
#include "discovery/file_source.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "../integration/support/recording_sink.h"

namespace kvgate::discovery {
namespace {

using kvgate::testing::RecordingSink;
using std::chrono::milliseconds;

class FileSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("file_source." + std::to_string(::getpid()) + "." +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "endpoints.yaml").string();
  }
  void TearDown() override {
    source_.reset();
    std::filesystem::remove_all(dir_);
  }
  void write(const std::string& text) { std::ofstream(path_, std::ios::trunc) << text; }
  void write_by_rename(const std::string& text) {
    std::ofstream(path_ + ".tmp") << text;
    std::filesystem::rename(path_ + ".tmp", path_);
  }
  void start() {
    FileSourceConfig c;
    c.path = path_;
    c.settle = milliseconds(20);
    c.reread = milliseconds(60'000);  // only inotify brings changes in these tests
    source_ = std::make_unique<FileSource>(c, sink_);
    ASSERT_TRUE(source_->start().ok());
  }
  size_t errors() { return sink_.errors().size(); }
  bool wait_errors(size_t n) {
    return sink_.wait([n](const auto&, const auto& e) { return e.size() >= n; },
                      std::chrono::seconds(5));
  }

  std::filesystem::path dir_;
  std::string path_;
  RecordingSink sink_;
  std::unique_ptr<FileSource> source_;
};

TEST_F(FileSourceTest, RewritesInPlaceAndByRename) {
  write("endpoints:\n  - http://10.0.0.1:8000\n");
  start();
  ASSERT_TRUE(sink_.wait_for_urls({"http://10.0.0.1:8000"}));
  write("endpoints:\n  - http://10.0.0.1:8000\n  - http://10.0.0.2:8000\n");
  ASSERT_TRUE(sink_.wait_for_urls({"http://10.0.0.1:8000", "http://10.0.0.2:8000"}));
  const auto t0 = std::chrono::steady_clock::now();
  write_by_rename(R"(["http://10.0.0.3:8000"])");
  ASSERT_TRUE(sink_.wait_for_urls({"http://10.0.0.3:8000"}));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  EXPECT_EQ(errors(), 0u);
}

TEST_F(FileSourceTest, APartialWriteKeepsTheLastGoodSet) {
  write("[\"http://10.0.0.1:8000\"]");
  start();
  ASSERT_TRUE(sink_.wait_for_urls({"http://10.0.0.1:8000"}));
  const size_t reports = sink_.reports().size();
  write("[\"http://10.0.0.1:8000\", {\"url\": \"http://10.0.");  // a writer cut short
  ASSERT_TRUE(wait_errors(1));
  EXPECT_TRUE(sink_.errors().back().starts_with(path_ + ":")) << sink_.errors().back();
  EXPECT_EQ(sink_.reports().size(), reports);
  write("[\"http://10.0.0.1:8000\", {\"url\": \"http://10.0.0.2:8000\"}]");
  ASSERT_TRUE(sink_.wait_for_urls({"http://10.0.0.1:8000", "http://10.0.0.2:8000"}));
}

TEST_F(FileSourceTest, InvalidYamlIsReportedWithFileLineAndField) {
  write("endpoints:\n  - http://10.0.0.1:8000\n");
  start();
  ASSERT_TRUE(sink_.wait_for_urls({"http://10.0.0.1:8000"}));
  write("endpoints:\n  - http://10.0.0.1:8000\n  - url: http://10.0.0.2:8000\n    role: chef\n");
  ASSERT_TRUE(wait_errors(1));
  EXPECT_EQ(sink_.errors().back(),
            path_ + ":4:11: endpoints[1].role: expected both, prefill or decode");
  write("endpoints: [http://10.0.0.1:8000\n");  // not YAML at all
  ASSERT_TRUE(wait_errors(2));
  EXPECT_TRUE(sink_.errors().back().starts_with(path_ + ":")) << sink_.errors().back();
  EXPECT_EQ(kvgate::testing::RecordingSink::ready_urls(sink_.reports().back()),
            std::set<std::string>{"http://10.0.0.1:8000"});
}

TEST_F(FileSourceTest, DeletionKeepsTheSetUntilTheFileComesBack) {
  write("- http://10.0.0.1:8000\n");
  start();
  ASSERT_TRUE(sink_.wait_for_urls({"http://10.0.0.1:8000"}));
  const size_t reports = sink_.reports().size();
  std::filesystem::remove(path_);
  ASSERT_TRUE(wait_errors(1));
  EXPECT_NE(sink_.errors().back().find("cannot read"), std::string::npos);
  EXPECT_EQ(sink_.reports().size(), reports);
  write_by_rename("- http://10.0.0.4:8000\n");
  ASSERT_TRUE(sink_.wait_for_urls({"http://10.0.0.4:8000"}));
}

// A file a sidecar writes later: the source starts, says why it has nothing (an error to
// the sink, no report), and reports the set once the file is written.
TEST_F(FileSourceTest, AFileMissingAtStartStartsEmptyAndIsReadOnceWritten) {
  start();
  ASSERT_TRUE(wait_errors(1));
  EXPECT_NE(sink_.errors().front().find("cannot read " + path_), std::string::npos)
      << sink_.errors().front();
  EXPECT_TRUE(sink_.reports().empty());
  write_by_rename("endpoints: [http://10.0.0.5:8000]\n");
  ASSERT_TRUE(sink_.wait_for_urls({"http://10.0.0.5:8000"}));
}

TEST_F(FileSourceTest, AMissingDirectoryFailsAtStart) {
  FileSourceConfig c;
  c.path = (dir_ / "no" / "such" / "endpoints.yaml").string();
  FileSource s(c, sink_);
  Status st = s.start();
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().find("cannot watch"), std::string::npos);
}

}  // namespace
}  // namespace kvgate::discovery
