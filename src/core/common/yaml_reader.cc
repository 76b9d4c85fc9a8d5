#include "core/common/yaml_reader.h"

#include <fmt/format.h>

#include <charconv>
#include <vector>

namespace kvgate {
namespace {

// "FILE:LINE:COLUMN: FIELD: message", each part left out when it is empty or unknown.
std::string format_error(const std::string& file, const YAML::Mark& mark, std::string_view field,
                         std::string_view message) {
  std::string out = file;
  if (!mark.is_null())
    out += fmt::format("{}{}:{}", file.empty() ? "" : ":", mark.line + 1, mark.column + 1);
  if (!out.empty()) out += ": ";
  if (!field.empty()) out.append(field).append(": ");
  out.append(message);
  return out;
}

bool is_known(std::string_view key, std::initializer_list<std::string_view> keys) {
  for (std::string_view k : keys) {
    if (k == key) return true;
  }
  return false;
}

// `path` without "." parts, empty parts and the parts a ".." undoes: what
// std::filesystem::path::lexically_normal gives for a POSIX path, less a trailing slash.
std::string lexically_normal(const std::string& path) {
  const bool absolute = path.starts_with('/');
  std::vector<std::string_view> parts;
  std::string_view rest = path;
  while (!rest.empty()) {
    const size_t slash = rest.find('/');
    const std::string_view part = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (!parts.empty() && parts.back() != "..") {
        parts.pop_back();
        continue;
      }
      if (absolute) continue;  // "/.." is "/"
    }
    parts.push_back(part);
  }
  std::string out = absolute ? "/" : "";
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += '/';
    out.append(parts[i]);
  }
  return out.empty() ? "." : out;
}

}  // namespace

Error YamlReader::error(const YAML::Node& node, std::string_view field,
                        std::string_view message) const {
  // Mark() throws on an undefined node (a missing key): that error has no place.
  const YAML::Mark mark = node.IsDefined() ? node.Mark() : YAML::Mark::null_mark();
  return Error(ErrorCode::kInvalidArgument, format_error(file_, mark, field, message));
}

Error YamlReader::error(const YAML::Exception& e, std::string_view field) const {
  return Error(ErrorCode::kInvalidArgument, format_error(file_, e.mark, field, e.msg));
}

Status YamlReader::expect_map(const YAML::Node& node, std::string_view field,
                              std::initializer_list<std::string_view> known,
                              std::initializer_list<std::string_view> more) const {
  if (!node.IsDefined() || !node.IsMap()) return error(node, field, "expected a mapping");
  for (const auto& kv : node) {
    const std::string& key = kv.first.Scalar();
    if (!is_known(key, known) && !is_known(key, more)) {
      return error(kv.first, fmt::format("{}.{}", field, key), "unknown field");
    }
  }
  return {};
}

void YamlReader::fail(const YAML::Node& node, std::string_view field,
                      std::string_view message) const {
  throw YamlError{error(node, field, message).message};
}

void YamlReader::only_keys(const YAML::Node& node, std::string_view field,
                           std::initializer_list<std::string_view> known) const {
  if (Status s = expect_map(node, field, known); !s) throw YamlError{s.error()};
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

void YamlReader::fail_choice(const YAML::Node& node, std::string_view field,
                             const std::vector<std::string_view>& words,
                             std::string_view got) const {
  std::string expected;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) expected += i + 1 == words.size() ? " or " : ", ";
    expected += words[i];
  }
  fail(node, field, fmt::format("expected {}, got '{}'", expected, got));
}

bool YamlReader::boolean(const YAML::Node& node, std::string_view field) const {
  const std::string s = text(node, field);
  if (s == "true") return true;
  if (s == "false") return false;
  fail(node, field, fmt::format("expected true or false, got '{}'", s));
}

std::string YamlReader::path(const YAML::Node& node, std::string_view field) const {
  const std::string p = text(node, field);
  if (p.empty()) fail(node, field, "empty path");
  if (p.starts_with('/')) return p;
  return lexically_normal(dir_.empty() ? p : dir_ + "/" + p);
}

std::vector<std::string> YamlReader::strings(const YAML::Node& node, std::string_view field) const {
  if (!node.IsSequence()) fail(node, field, "expected a list");
  std::vector<std::string> out;
  for (size_t i = 0; i < node.size(); ++i) {
    out.push_back(text(node[i], fmt::format("{}[{}]", field, i)));
  }
  return out;
}

}  // namespace kvgate
