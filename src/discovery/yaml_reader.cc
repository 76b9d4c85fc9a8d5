#include "discovery/yaml_reader.h"

#include <fmt/format.h>

#include <charconv>

namespace kvgate::discovery {

void YamlReader::fail(const YAML::Node& node, std::string_view field,
                      std::string_view message) const {
  YAML::Mark mark = node.Mark();
  if (mark.is_null()) throw YamlError{fmt::format("{}: {}: {}", file_, field, message)};
  throw YamlError{
      fmt::format("{}:{}:{}: {}: {}", file_, mark.line + 1, mark.column + 1, field, message)};
}

void YamlReader::only_keys(const YAML::Node& node, std::string_view field,
                           std::initializer_list<std::string_view> known) const {
  if (!node.IsMap()) fail(node, field, "expected a mapping");
  for (const auto& kv : node) {
    const std::string& key = kv.first.Scalar();
    bool ok = false;
    for (std::string_view k : known) ok = ok || k == key;
    if (!ok) fail(kv.first, fmt::format("{}.{}", field, key), "unknown field");
  }
}

std::string YamlReader::text(const YAML::Node& node, std::string_view field) const {
  if (!node.IsScalar()) fail(node, field, "expected a string");
  return node.Scalar();
}

int64_t YamlReader::integer(const YAML::Node& node, std::string_view field, int64_t lo,
                            int64_t hi) const {
  if (!node.IsScalar()) fail(node, field, "expected an integer");
  const std::string& s = node.Scalar();
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) {
    fail(node, field, fmt::format("expected an integer, got '{}'", s));
  }
  if (v < lo || v > hi) fail(node, field, fmt::format("{} is outside [{}, {}]", v, lo, hi));
  return v;
}

double YamlReader::number(const YAML::Node& node, std::string_view field) const {
  if (!node.IsScalar()) fail(node, field, "expected a number");
  const std::string& s = node.Scalar();
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) {
    fail(node, field, fmt::format("expected a number, got '{}'", s));
  }
  return v;
}

bool YamlReader::boolean(const YAML::Node& node, std::string_view field) const {
  std::string s = text(node, field);
  if (s == "true") return true;
  if (s == "false") return false;
  fail(node, field, fmt::format("expected true or false, got '{}'", s));
}

std::chrono::milliseconds YamlReader::millis(const YAML::Node& node, std::string_view field,
                                             int64_t lo, int64_t hi) const {
  return std::chrono::milliseconds(integer(node, field, lo, hi));
}

std::string YamlReader::path(const YAML::Node& node, std::string_view field) const {
  std::string p = text(node, field);
  if (p.empty()) fail(node, field, "empty path");
  std::filesystem::path fp(p);
  return fp.is_absolute() ? p : (dir_ / fp).lexically_normal().string();
}

std::vector<std::string> YamlReader::strings(const YAML::Node& node, std::string_view field) const {
  if (!node.IsSequence()) fail(node, field, "expected a list");
  std::vector<std::string> out;
  for (size_t i = 0; i < node.size(); ++i) {
    out.push_back(text(node[i], fmt::format("{}[{}]", field, i)));
  }
  return out;
}

}  // namespace kvgate::discovery
