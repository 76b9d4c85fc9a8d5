// YamlReader: the one reader of kvgate's YAML configuration over yaml-cpp: the gateway's
// config file (its pools, router, autoscale and discovery sections), endpoint files, the
// simulator's scenarios, the admin API's policy bodies. Every error it words has one
// format, whoever reads:
//
//   FILE:LINE:COLUMN: FIELD.PATH: message
//   "fleet.yaml:12:7: pools.main.router.saturation.shed: expected true or false"
//
// "FILE:" is left out when the reader has no file name (a body of the admin API, a text
// in a test), "LINE:COLUMN:" when the node has no place in a text (one built in code).
//
// Two ways to read, one format:
//  - Values (error, expect_map, read): each step returns a Status, for readers written
//    step by step with KVGATE_TRY (the core's router and autoscale sections, scenarios).
//  - Throws (fail, only_keys, text, integer, ...): a bad value throws YamlError, for the
//    long parsers that would otherwise check every read (the gateway's config, discovery,
//    endpoint files). YamlError never leaves the parser: its public function catches it
//    (and YAML::Exception, worded by error(e)) and returns a Result (result.h):
//
//   const YamlReader y(file, dir);  // "fleet.yaml", "/etc/kvgate"
//   try {
//     y.only_keys(node, "cluster", {"redis", "max_len"});
//     if (auto v = node["max_len"]) c.max_len = y.integer(v, "cluster.max_len", 100, 10'000);
//     return c;
//   } catch (const YamlError& e) {
//     return Error(e.message);
//   } catch (const YAML::Exception& e) {
//     return y.error(e);
//   }
//
// Pure, so the core uses it too: the reader opens no file, and `dir` only anchors relative
// paths, joined as text (the core includes no <filesystem>, scripts/check-layers; nor
// <chrono>: durations are the callers' to type). Immutable after construction; a const
// reader may be shared between threads.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/common/result.h"

namespace kvgate {

// What the throwing reads throw: an error already in the reader's format.
struct YamlError {
  std::string message;
};

class YamlReader {
 public:
  // `file` names the file in errors (empty: no "FILE:" prefix); `dir` anchors the
  // relative paths that path() reads (the config file's directory).
  explicit YamlReader(std::string_view file = {}, std::string dir = ".")
      : file_(file), dir_(std::move(dir)) {}

  const std::string& file() const { return file_; }
  const std::string& dir() const { return dir_; }

  // "FILE:LINE:COLUMN: FIELD: message" at `node`'s place; an empty field is left out.
  // Both error()s are kInvalidArgument.
  // `node` may be undefined (a missing key): the error then has no place.
  Error error(const YAML::Node& node, std::string_view field, std::string_view message) const;
  // A yaml-cpp exception (a syntax error, a failed conversion) at its own place:
  // "FILE:LINE:COLUMN: FIELD: what yaml-cpp says".
  Error error(const YAML::Exception& e, std::string_view field = {}) const;

  // --- Values.

  // OK for a mapping whose keys are all in `known` or `more`; else "FIELD: expected a
  // mapping", or "FIELD.KEY: unknown field" at the first unknown key.
  Status expect_map(const YAML::Node& node, std::string_view field,
                    std::initializer_list<std::string_view> known,
                    std::initializer_list<std::string_view> more = {}) const;

  // Reads `map[key]` into `out` when present and not null, else leaves `out` unchanged.
  // A value of another type is "FIELD.KEY: expected a number" (or an integer, a whole
  // number, true or false, a string: the type of `out`). REQUIRES: T is arithmetic or
  // std::string.
  template <typename T>
  Status read(const YAML::Node& map, std::string_view key, T& out, std::string_view field) const;

  // --- Throws (YamlError).

  [[noreturn]] void fail(const YAML::Node& node, std::string_view field,
                         std::string_view message) const;
  // expect_map, thrown.
  void only_keys(const YAML::Node& node, std::string_view field,
                 std::initializer_list<std::string_view> known) const;
  std::string text(const YAML::Node& node, std::string_view field) const;
  // The value of the word `node` holds, one of `choices` ({word, value} pairs); else
  // "FIELD: expected A, B or C, got 'X'".
  template <typename T>
  T choice(const YAML::Node& node, std::string_view field,
           std::initializer_list<std::pair<std::string_view, T>> choices) const;
  int64_t integer(const YAML::Node& node, std::string_view field, int64_t lo, int64_t hi) const;
  double number(const YAML::Node& node, std::string_view field) const;
  bool boolean(const YAML::Node& node, std::string_view field) const;
  // A file's path: as written when absolute, else dir()/PATH, lexically normal
  // ("./a/../b.yaml" is "b.yaml"; POSIX paths).
  std::string path(const YAML::Node& node, std::string_view field) const;
  std::vector<std::string> strings(const YAML::Node& node, std::string_view field) const;

 private:
  // choice()'s error: the words it expected, and the one it got.
  [[noreturn]] void fail_choice(const YAML::Node& node, std::string_view field,
                                const std::vector<std::string_view>& words,
                                std::string_view got) const;

  std::string file_;
  std::string dir_;
};

template <typename T>
T YamlReader::choice(const YAML::Node& node, std::string_view field,
                     std::initializer_list<std::pair<std::string_view, T>> choices) const {
  const std::string s = text(node, field);
  std::vector<std::string_view> words;
  for (const auto& [word, value] : choices) {
    if (s == word) return value;
    words.push_back(word);
  }
  fail_choice(node, field, words, s);
}

template <typename T>
Status YamlReader::read(const YAML::Node& map, std::string_view key, T& out,
                        std::string_view field) const {
  static_assert(std::is_arithmetic_v<T> || std::is_same_v<T, std::string>,
                "YamlReader::read: an arithmetic type or std::string");
  if (!map.IsDefined() || !map.IsMap()) return error(map, field, "expected a mapping");
  const YAML::Node v = map[std::string(key)];
  if (!v || v.IsNull()) return {};
  std::string at(field);
  at.append(".").append(key);
  try {
    out = v.as<T>();
  } catch (const YAML::Exception&) {
    if constexpr (std::is_same_v<T, bool>) {
      return error(v, at, "expected true or false");
    } else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>) {
      return error(v, at, "expected a whole number");
    } else if constexpr (std::is_integral_v<T>) {
      return error(v, at, "expected an integer");
    } else if constexpr (std::is_floating_point_v<T>) {
      return error(v, at, "expected a number");
    } else {
      return error(v, at, "expected a string");
    }
  }
  return {};
}

}  // namespace kvgate
