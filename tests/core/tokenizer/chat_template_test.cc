#include "core/tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include "fixtures.h"

namespace kvgate::tokenizer {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace chat_template_test {

ChatTemplate load_fixture(const std::string& model) {
  auto config = testing::read_fixture(model, "tokenizer_config.json");
  if (!config) return *ChatTemplate::from_template("", "");  // never reached: callers skip
  auto t = ChatTemplate::load(*config);
  EXPECT_TRUE(t.ok()) << t.error();
  return *t;
}

#define REQUIRE_CONFIG(model)                                 \
  if (!testing::read_fixture(model, "tokenizer_config.json")) \
  GTEST_SKIP() << "fixture " model " absent: run scripts/bootstrap first"

ChatRequest request(const std::string& json) {
  auto r = parse_chat_request(json);
  EXPECT_TRUE(r.ok()) << r.error();
  return *r;
}

TEST(ChatTemplate, Qwen3ChatMLWithSystemAndGenerationPrompt) {
  REQUIRE_CONFIG("qwen3");
  ChatTemplate t = load_fixture("qwen3");
  EXPECT_EQ(t.family_name(), "qwen3");
  auto req = request(R"({"messages": [{"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]})");
  EXPECT_EQ(*t.render(req),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\na\nb<|im_end|>\n"
            "<|im_start|>assistant\n");
  req.enable_thinking = false;
  const std::string tail = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
  const std::string out = *t.render(req);
  EXPECT_EQ(out.substr(out.size() - tail.size()), tail);
}

TEST(ChatTemplate, Qwen3ThinkBlocksFollowPythonStripSemantics) {
  REQUIRE_CONFIG("qwen3");
  ChatTemplate t = load_fixture("qwen3");
  // The last assistant turn after the last query keeps its reasoning; lstrip('\n') keeps
  // the leading spaces (Python semantics, which vLLM's Jinja has).
  auto req = request(R"({"messages": [{"role": "user", "content": "q"},
      {"role": "assistant", "content": "<think>\nplan\n</think>\n\n  answer"}],
      "add_generation_prompt": false})");
  EXPECT_EQ(*t.render(req),
            "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\nplan\n</think>\n\n"
            "  answer<|im_end|>\n");
  // An earlier assistant turn drops its reasoning.
  req.messages.push_back(ChatMessage{"user", "next", std::nullopt, {}});
  EXPECT_NE(t.render(req)->find("<|im_start|>assistant\n  answer<|im_end|>"), std::string::npos);
}

TEST(ChatTemplate, Qwen3ToolsAndToolCalls) {
  REQUIRE_CONFIG("qwen3");
  ChatTemplate t = load_fixture("qwen3");
  auto req = request(R"({"messages": [{"role": "user", "content": "weather?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function",
        "function": {"name": "get", "arguments": {"city": "Zürich", "n": 1.0}}}]},
      {"role": "tool", "content": "sunny"}],
      "tools": [{"type": "function", "function": {"name": "get", "parameters": {"x": [1, 2.5]}}}]})");
  const std::string out = *t.render(req);
  // vLLM passes the tool as its pydantic model prints it: a missing description is null.
  EXPECT_NE(out.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get\", "
                     "\"description\": null, \"parameters\": {\"x\": [1, 2.5]}}}\n</tools>"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("<|im_start|>assistant\n<tool_call>\n{\"name\": \"get\", \"arguments\": "
                     "{\"city\": \"Zürich\", \"n\": 1.0}}\n</tool_call><|im_end|>\n"
                     "<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n"),
            std::string::npos)
      << out;
}

TEST(ChatTemplate, Llama3HeadersBosAndTrim) {
  REQUIRE_CONFIG("llama3");
  ChatTemplate t = load_fixture("llama3");
  EXPECT_EQ(t.family_name(), "llama3");
  auto req = request(R"({"messages": [{"role": "system", "content": " sys\n"},
      {"role": "user", "content": "\u3000hi\u0085"}]})");
  EXPECT_EQ(*t.render(req),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nsys<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, AnyTemplateLoadsThroughTheEngine) {
  auto t =
      ChatTemplate::load(R"({"chat_template": "{{ messages[0].content }}", "eos_token": "E"})");
  ASSERT_TRUE(t.ok()) << t.error();
  EXPECT_EQ(t->family(), TemplateFamily::kGeneral);
  EXPECT_EQ(t->describe(), "general engine");
  EXPECT_EQ(*t->render(request(R"({"messages": [{"role": "user", "content": "hi"}]})")), "hi");
  auto bad = ChatTemplate::load(R"({"chat_template": "{% if %}"})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(
      bad.error(),
      "tokenizer_config.json: chat_template:1:7: expected an expression, got end of statement "
      "block");
  EXPECT_FALSE(ChatTemplate::load("{}").ok());
  EXPECT_FALSE(ChatTemplate::load("not json").ok());
  EXPECT_FALSE(parse_chat_request("{").ok());
  EXPECT_FALSE(parse_chat_request(R"({"messages": []})").ok());
  EXPECT_FALSE(parse_chat_request(R"({"messages": [{"content": "x"}]})").ok());
  EXPECT_FALSE(parse_chat_request(R"({"messages": [{"role": "user", "content": 3}]})").ok());
  EXPECT_FALSE(parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}],
      "add_generation_prompt": true, "continue_final_message": true})")
                   .ok());
}

TEST(PythonStrip, StripsPythonWhitespaceOnly) {
  EXPECT_EQ(python_strip(" \t\n\x1c x \xC2\x85"), "x");
  EXPECT_EQ(python_strip("\xEF\xBB\xBFx"), "\xEF\xBB\xBFx");  // U+FEFF is not Python space
  EXPECT_EQ(python_strip("   "), "");
}

}  // namespace chat_template_test
}  // namespace kvgate::tokenizer
