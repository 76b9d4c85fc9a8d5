// `kvgate serve --check` and `kvgate tokenize --config` say, per pool, where its routing
// token ids come from (local fast or general path, engine fallback, none) and why; a
// refused tokenizer.json or chat template falls back to the engines unless the pool
// says `tokenize: local`.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "../core/tokenizer/fixtures.h"
#include "support/gateway_fixture.h"

namespace kvgate::testing {
namespace {

struct Exit {
  int status = -1;
  std::string out, err;
};

Exit run(const std::vector<std::string>& args) {
  auto p = ChildProcess::spawn(kvgate_bin(), args);
  if (!p) {
    ADD_FAILURE() << p.error();
    return {};
  }
  for (int i = 0; i < 2000 && (*p)->running(); ++i) {
    // Waits for the kvgate child to exit by itself.
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Exit r;
  r.status = (*p)->stop();
  r.out = (*p)->output();
  r.err = (*p)->errors();
  return r;
}

std::vector<std::string> lines_of(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(at, end - at);
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
    at = end + 1;
  }
  return out;
}

TEST(TokenizeReport, EachPoolSaysWhichPathItsIdsTakeAndWhy) {
  const std::string tok =
      write_temp_file("tokenizer.json", tokenizer::testing::tiny_tokenizer_json());
  std::string unigram = tokenizer::testing::tiny_tokenizer_json();
  unigram.replace(unigram.find(R"("type": "BPE")"), 13, R"("type": "Unigram")");
  const std::string refused_tok = write_temp_file("unigram.json", unigram);
  const std::string tpl =
      write_temp_file("tokenizer_config.json",
                      R"({"chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}"})");
  const std::string bad_tpl =
      write_temp_file("bad_config.json", R"({"chat_template": "{% for m in %}"})");
  const std::string yaml =
      "listeners:\n  - port: 0\npools:\n"
      "  local:\n    tokenizer: " +
      tok + "\n    chat_template: " + tpl +
      "\n    endpoints: [http://127.0.0.1:1]\n"
      "  badtok:\n    tokenizer: " +
      refused_tok +
      "\n    endpoints: [http://127.0.0.1:1]\n"
      "  badtpl:\n    tokenizer: " +
      tok + "\n    chat_template: " + bad_tpl +
      "\n    endpoints: [http://127.0.0.1:1]\n"
      "  engine:\n    tokenize: engine\n    tokenizer: " +
      tok +
      "\n    endpoints: [http://127.0.0.1:1]\n"
      "  raw:\n    endpoints: [http://127.0.0.1:1]\n"
      "models:\n  - name: m\n    pool: local\n";
  const std::string config = write_temp_file("report.yaml", yaml);

  const Exit check = run({"serve", "--check", config});
  ASSERT_EQ(check.status, 0) << check.err;
  const std::vector<std::string> want = {
      "pool local: tokenizer " + tok + ": ",
      "pool local: chat template " + tpl + ": general engine",
      "pool badtok: tokenizer " + refused_tok +
          ": refused (tokenizer.json: model.type: unsupported \"Unigram\"",
      "pool badtok: chat template: engine fallback (the tokenizer was refused)",
      "pool badtpl: tokenizer " + tok + ": ",
      "pool badtpl: chat template " + bad_tpl + ": refused (",
      "pool engine: tokenizer: engine fallback (tokenize: engine)",
      "pool engine: chat template: engine fallback (tokenize: engine)",
      "pool raw: tokenizer: none: approximate routing on pseudo-tokens (4 bytes each)",
      "pool raw: chat template: none: chat requests route approximately on pseudo-tokens",
  };
  const std::vector<std::string> got = lines_of(check.out, "pool ");
  ASSERT_EQ(got.size(), want.size()) << check.out;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].rfind(want[i], 0), 0u) << "line " << i << ": " << got[i];
  }
  // A loaded tokenizer names its path; a refused file names what the pool does instead.
  EXPECT_TRUE(got[0].find(": fast path: ") != std::string::npos ||
              got[0].find(": general path: ") != std::string::npos)
      << got[0];
  for (size_t i : {2u, 5u}) {
    EXPECT_NE(got[i].find("-> engine fallback (POST /tokenize to the pool's engines)"),
              std::string::npos)
        << got[i];
  }
  // And logs why (spdlog's default logger writes to stdout).
  EXPECT_NE((check.out + check.err).find("[warning] pool badtok: tokenizer"), std::string::npos)
      << check.out << check.err;

  // `kvgate tokenize --config` prints the same lines.
  const Exit report = run({"tokenize", "--config", config});
  ASSERT_EQ(report.status, 0) << report.err;
  EXPECT_EQ(lines_of(report.out, "pool "), got);

  // With `tokenize: local` a refused file fails the check, as it would fail the start.
  const std::string strict =
      write_temp_file("strict.yaml",
                      "listeners:\n  - port: 0\npools:\n  p:\n    tokenize: local\n"
                      "    tokenizer: " +
                          refused_tok +
                          "\n    endpoints: [http://127.0.0.1:1]\nmodels:\n  - name: m\n"
                          "    pool: p\n");
  const Exit failed = run({"serve", "--check", strict});
  EXPECT_EQ(failed.status, 2);
  EXPECT_NE(failed.err.find("pool p: " + refused_tok + ": tokenizer.json: model.type"),
            std::string::npos)
      << failed.err;
}

}  // namespace
}  // namespace kvgate::testing
