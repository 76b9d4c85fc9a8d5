// What the fuzz targets share: a check that stops the run with a message (libFuzzer then
// saves the input that made it fail), fixture loading, and a deterministic way to cut
// an input into the pieces a socket might deliver.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace kvgate::fuzz {

[[noreturn]] inline void fail(const char* file, int line, const char* what,
                              const std::string& detail) {
  std::fprintf(stderr, "%s:%d: fuzz check failed: %s\n%s\n", file, line, what, detail.c_str());
  std::abort();
}

// CHECK(condition, detail): detail is only built when the check fails.
#define KVGATE_FUZZ_CHECK(cond, detail)                                     \
  do {                                                                      \
    if (!(cond)) ::kvgate::fuzz::fail(__FILE__, __LINE__, #cond, (detail)); \
  } while (0)

// A file of the source tree (tokenizer fixtures live under .deps/fixtures); aborts when
// it is missing, so a target never fuzzes without its subject.
inline std::string source_file(const std::string& relative) {
  const char* env = std::getenv("KVGATE_SOURCE_DIR");
  const std::string root = env ? env : KVGATE_SOURCE_DIR;
  std::ifstream in(root + "/" + relative, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "fuzz target: cannot read %s/%s\n", root.c_str(), relative.c_str());
    std::abort();
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Cuts `in` into pieces of 1 to 16 bytes, their sizes drawn from a hash of the input:
// the same input always gives the same pieces.
inline std::vector<std::string_view> pieces(std::string_view in) {
  std::vector<std::string_view> out;
  uint64_t h = 0xcbf29ce484222325ULL ^ in.size();
  for (unsigned char c : in) h = (h ^ c) * 0x100000001b3ULL;
  size_t at = 0;
  while (at < in.size()) {
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    const size_t n = 1 + static_cast<size_t>((h >> 40) % 16);
    out.push_back(in.substr(at, n));
    at += out.back().size();
  }
  return out;
}

}  // namespace kvgate::fuzz
