// YamlReader: typed reads from yaml-cpp nodes whose errors name file:line:column: field,
// the format of every kvgate config error ("fleet.yaml:12:7: pools.main.x: expected ...").
// Reads throw YamlError; the public parsers (discovery_config.h, endpoint_list.h and the
// gateway's config.h, whose parser is a YamlReader too) catch it and return a Result, so
// it never leaves them.
#pragma once

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace kvgate::discovery {

struct YamlError {
  std::string message;
};

class YamlReader {
 public:
  explicit YamlReader(std::string_view file, std::filesystem::path dir = ".")
      : file_(file), dir_(std::move(dir)) {}

  [[noreturn]] void fail(const YAML::Node& node, std::string_view field,
                         std::string_view message) const;
  void only_keys(const YAML::Node& node, std::string_view field,
                 std::initializer_list<std::string_view> known) const;
  std::string text(const YAML::Node& node, std::string_view field) const;
  int64_t integer(const YAML::Node& node, std::string_view field, int64_t lo, int64_t hi) const;
  double number(const YAML::Node& node, std::string_view field) const;
  bool boolean(const YAML::Node& node, std::string_view field) const;
  std::chrono::milliseconds millis(const YAML::Node& node, std::string_view field, int64_t lo,
                                   int64_t hi) const;
  // Relative to the config file's directory.
  std::string path(const YAML::Node& node, std::string_view field) const;
  std::vector<std::string> strings(const YAML::Node& node, std::string_view field) const;
  const std::string& file() const { return file_; }
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::string file_;
  std::filesystem::path dir_;
};

}  // namespace kvgate::discovery
