// The hand-written Qwen3 and Llama 3 renderers are kept only because they equal the Jinja
// engine running the same template: this renders 2,000 generated conversations per
// template both ways and requires identical text.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cstdint>
#include <string>

#include "core/tokenizer/chat_template.h"
#include "fixtures.h"

namespace kvgate::tokenizer {
namespace {

namespace json = boost::json;

class Gen {
 public:
  explicit Gen(uint64_t seed) : s_(seed) {}
  uint64_t next() {  // splitmix64
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return next() % n; }
  template <typename T, size_t N>
  const T& pick(const T (&a)[N]) {
    return a[below(N)];
  }

 private:
  uint64_t s_;
};

constexpr const char* kTexts[] = {"Hello!",
                                  "What is 2+2?",
                                  "写一首诗。",
                                  "def f(x):\n    return x\n",
                                  "  padded  ",
                                  "\n\nleading newlines",
                                  "trailing\n\n",
                                  "emoji 🎉👍🏽",
                                  "tab\tnbsp\u00a0",
                                  "quote \"d\" 's'",
                                  "a\r\nb",
                                  "\u3000ideographic\u3000",
                                  "<tool_response>\nr\n</tool_response>",
                                  "",
                                  " ",
                                  "\x1c",
                                  "x</think>y",
                                  "<think>\nplan\n</think>\n\nanswer",
                                  "\n<think>\n\n</think>\n",
                                  "Ελληνικά"};

json::value tool_call(Gen& g) {
  json::object args{{"city", g.below(2) ? "Paris" : "東京"},
                    {"n", static_cast<int64_t>(g.below(9))}};
  json::object fn{{"name", g.below(2) ? "get_weather" : "search"}};
  if (g.below(2)) {
    fn["arguments"] = json::serialize(args);
  } else {
    fn["arguments"] = args;
  }
  return json::object{{"id", "call_1"}, {"type", "function"}, {"function", fn}};
}

std::string conversation(Gen& g) {
  json::array messages;
  if (g.below(2)) messages.push_back(json::object{{"role", "system"}, {"content", g.pick(kTexts)}});
  const size_t turns = 1 + g.below(7);
  for (size_t t = 0; t < turns; ++t) {
    const size_t k = g.below(8);
    if (k == 0) {
      messages.push_back(json::object{
          {"role", "user"},
          {"content", json::array{json::object{{"type", "text"}, {"text", g.pick(kTexts)}},
                                  json::object{{"type", "text"}, {"text", g.pick(kTexts)}}}}});
    } else if (k == 1 && !messages.empty()) {
      messages.push_back(json::object{{"role", "system"}, {"content", g.pick(kTexts)}});
    } else {
      messages.push_back(json::object{{"role", "user"}, {"content", g.pick(kTexts)}});
    }
    if (t + 1 == turns && g.below(2)) break;
    json::object a{{"role", "assistant"}, {"content", g.pick(kTexts)}};
    const size_t ak = g.below(5);
    if (ak == 0) a["reasoning_content"] = g.pick(kTexts);
    if (ak == 1) {
      json::array calls;
      for (size_t c = 0, n = 1 + g.below(2); c < n; ++c) calls.push_back(tool_call(g));
      a["tool_calls"] = calls;
      if (g.below(2)) a["content"] = nullptr;
    }
    messages.push_back(a);
    if (ak == 1) {
      for (size_t q = 0, n = 1 + g.below(2); q < n; ++q)
        messages.push_back(json::object{{"role", "tool"}, {"content", g.pick(kTexts)}});
    }
  }
  json::object req{{"messages", messages}};
  if (g.below(4) == 0) {
    json::array tools;
    for (size_t i = 0, n = 1 + g.below(2); i < n; ++i) {
      json::object fn{{"name", g.below(2) ? "get_weather" : "lookup"},
                      {"parameters", json::object{{"type", "object"}, {"ratio", 0.5}}}};
      if (g.below(2)) fn["description"] = g.pick(kTexts);
      tools.push_back(json::object{{"type", "function"}, {"function", fn}});
    }
    req["tools"] = tools;
  }
  if (const size_t gp = g.below(3); gp < 2) req["add_generation_prompt"] = gp == 0;
  if (const size_t e = g.below(3); e < 2)
    req["chat_template_kwargs"] = json::object{{"enable_thinking", e == 0}};
  return json::serialize(req);
}

void expect_fast_path_equals_engine(const std::string& model, TemplateFamily family,
                                    uint64_t seed) {
  auto config = testing::read_fixture(model, "tokenizer_config.json");
  if (!config) GTEST_SKIP() << "fixture " << model << " absent: run scripts/bootstrap first";
  auto tpl = ChatTemplate::load(*config);
  ASSERT_TRUE(tpl.ok()) << tpl.error();
  ASSERT_EQ(tpl->family(), family);
  ChatRenderOptions engine;
  engine.allow_fast_path = false;
  Gen g(seed);
  int compared = 0;
  for (int i = 0; i < 2000; ++i) {
    const std::string body = conversation(g);
    auto req = parse_chat_request(body);
    ASSERT_TRUE(req.ok()) << req.error();
    auto fast = tpl->render(*req);
    auto slow = tpl->render(*req, engine);
    ASSERT_EQ(fast.ok(), slow.ok()) << body << "\n" << (fast.ok() ? slow.error() : fast.error());
    if (!fast.ok()) continue;
    ASSERT_EQ(*fast, *slow) << body;
    ++compared;
  }
  EXPECT_GT(compared, 1900);
}

TEST(ChatFastPath, Qwen3EqualsTheEngine) {
  expect_fast_path_equals_engine("qwen3", TemplateFamily::kQwen3, 31);
}

TEST(ChatFastPath, Llama3EqualsTheEngine) {
  expect_fast_path_equals_engine("llama3", TemplateFamily::kLlama3, 32);
}

}  // namespace
}  // namespace kvgate::tokenizer
