// Test helpers: the real Qwen3 / Llama 3 tokenizer files that scripts/bootstrap extracts to
// .deps/fixtures/, and a small synthetic byte-level tokenizer.json.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "core/tokenizer/tokenizer.h"

namespace kvgate::tokenizer::testing {

// KVGATE_SOURCE_DIR, else the first of ., .., ../.. that holds .deps/fixtures (the unit
// tests run from the repo root or from build/<dir>).
inline std::string source_dir() {
  if (const char* d = std::getenv("KVGATE_SOURCE_DIR")) return d;
  for (const char* d : {".", "..", "../.."}) {
    if (std::ifstream(std::string(d) + "/.deps/fixtures/qwen3/tokenizer_config.json")) return d;
  }
  return ".";
}

inline std::optional<std::string> read_fixture(const std::string& model, const std::string& file) {
  std::ifstream in(source_dir() + "/.deps/fixtures/" + model + "/" + file, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Loaded once per test binary; nullptr when the fixture is absent.
inline const Tokenizer* fixture_tokenizer(const std::string& model) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto it = cache.find(model);
  if (it != cache.end()) return it->second.get();
  std::unique_ptr<Tokenizer> t;
  if (auto text = read_fixture(model, "tokenizer.json")) {
    auto r = Tokenizer::load(*text);
    EXPECT_TRUE(r.ok()) << r.error();
    if (r) t = std::make_unique<Tokenizer>(std::move(*r));
  }
  return cache.emplace(model, std::move(t)).first->second.get();
}

#define KVGATE_REQUIRE_FIXTURE(var, model)                    \
  const ::kvgate::tokenizer::Tokenizer* var =                 \
      ::kvgate::tokenizer::testing::fixture_tokenizer(model); \
  if (!var) GTEST_SKIP() << "fixture " model " absent: run scripts/bootstrap first"

// A tiny tokenizer.json: the 256 byte tokens, merges "h e", "he l", "hel l", "hell o",
// "Ġ w" (Ġ is the byte-level space), an added special token <|end|> (id 300) and a
// non-special <x> (id 301, lstrip + rstrip). `patch` replaces a "@FIELD@" placeholder.
inline std::string tiny_tokenizer_json(const std::string& normalizer = "null",
                                       const std::string& regex_variant = "qwen") {
  std::string vocab;
  auto byte_char = [](int b) -> std::string {
    auto shown = [](int c) {
      return (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
    };
    int cp = b;
    if (!shown(b)) {
      int n = 0;
      for (int k = 0; k < b; ++k)
        if (!shown(k)) ++n;
      cp = 256 + n;
    }
    std::string s;
    if (cp < 0x80) {
      if (cp == '"' || cp == '\\') s += '\\';
      s += static_cast<char>(cp);
    } else {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return s;
  };
  for (int b = 0; b < 256; ++b) vocab += "\"" + byte_char(b) + "\": " + std::to_string(b) + ",";
  vocab += R"("he": 256, "hel": 257, "hell": 258, "hello": 259, "Ġw": 260)";
  const std::string qwen =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+)";
  const std::string regex = regex_variant == "qwen" ? qwen : regex_variant;
  return R"({"version": "1.0", "added_tokens": [
    {"id": 300, "content": "<|end|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
    {"id": 301, "content": "<x>", "single_word": false, "lstrip": true, "rstrip": true, "normalized": false, "special": false}],
  "normalizer": )" +
         normalizer + R"(,
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": ")" +
         regex + R"("}, "behavior": "Isolated", "invert": false},
    {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]},
  "post_processor": null,
  "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
  "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": "",
    "end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
    "vocab": {)" +
         vocab + R"(}, "merges": ["h e", "he l", ["hel", "l"], "hell o", "Ġ w"]}})";
}

}  // namespace kvgate::tokenizer::testing
