// Chat rendering through the Jinja engine: the context vLLM passes to a template
// (normalized messages, tools, documents, special tokens, kwargs), the list form of
// chat_template, continue_final_message and the request's own template.
#include <gtest/gtest.h>

#include "core/tokenizer/chat_template.h"
#include "fixtures.h"

namespace kvgate::tokenizer {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace chat_render_test {

ChatRequest request(const std::string& json) {
  auto r = parse_chat_request(json);
  EXPECT_TRUE(r.ok()) << r.error();
  return r.ok() ? std::move(*r) : ChatRequest{};
}

std::string render(const ChatTemplate& t, const std::string& json, ChatRenderOptions opt = {}) {
  auto out = t.render(request(json), opt);
  return out.ok() ? *out : "error: " + out.error();
}

ChatTemplate compile(const std::string& tpl, SpecialTokens tokens = {}) {
  auto t = ChatTemplate::from_template(tpl, std::move(tokens));
  EXPECT_TRUE(t.ok()) << t.error();
  return std::move(*t);
}

TEST(ChatRender, MessagesAsVllmBuildsThem) {
  ChatTemplate t = compile("{% for m in messages %}{{ m|tojson }}\n{% endfor %}");
  EXPECT_EQ(render(t, R"({"messages": [
      {"role": "user", "content": [{"type": "text", "text": "a"}, "b"], "name": "ann"},
      {"role": "assistant", "content": null, "reasoning": "think",
       "tool_calls": [{"id": "c1", "type": "function",
                       "function": {"name": "f", "arguments": "{\"x\":1.5,\"y\":[1]}"}}]},
      {"role": "tool", "content": "r", "tool_call_id": "c1", "reasoning_content": "dropped"},
      {"role": "assistant", "content": "x", "tool_calls": []}]})"),
            "{\"role\": \"user\", \"content\": \"a\\nb\", \"name\": \"ann\"}\n"
            "{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"c1\", "
            "\"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": {\"x\": 1.5, "
            "\"y\": [1]}}}], \"reasoning\": \"think\", \"reasoning_content\": \"think\"}\n"
            "{\"role\": \"tool\", \"content\": \"r\", \"tool_call_id\": \"c1\"}\n"
            "{\"role\": \"assistant\", \"content\": \"x\"}\n");
}

TEST(ChatRender, ToolCallArgumentsThatAreNotObjectsBecomeEmpty) {
  ChatTemplate t = compile(
      "{% for m in messages %}{% for c in m.tool_calls %}{{ c.function.arguments|tojson }};"
      "{% endfor %}{% endfor %}");
  EXPECT_EQ(render(t, R"({"messages": [{"role": "assistant", "content": "", "tool_calls": [
      {"function": {"name": "a", "arguments": "not json"}},
      {"function": {"name": "b", "arguments": "[1, 2]"}},
      {"function": {"name": "c", "arguments": ""}},
      {"function": {"name": "d"}},
      {"function": {"name": "e", "arguments": {"k": "v"}}}]}]})"),
            "{};{};{};{};{\"k\": \"v\"};");
  auto bad = parse_chat_request(R"({"messages": [{"role": "assistant", "tool_calls": [
      {"type": "custom", "function": {"name": "a"}}]}]})");
  EXPECT_FALSE(bad.ok());
}

TEST(ChatRender, ToolsDocumentsKwargsAndSpecialTokens) {
  SpecialTokens tokens;
  tokens.named = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  tokens.additional = {"<x>"};
  ChatTemplate t = compile(
      "{{ bos_token }}{{ eos_token }}{{ unk_token is defined }}|{{ tools is none }}|"
      "{{ documents is none }}|{{ add_generation_prompt }}|{{ enable_thinking is defined }}|"
      "{{ custom }}|{{ additional_special_tokens }}",
      tokens);
  EXPECT_EQ(render(t, R"({"messages": [{"role": "user", "content": "q"}]})"),
            "<s></s>False|True|True|True|False||['<x>']");
  EXPECT_EQ(render(t, R"({"messages": [{"role": "user", "content": "q"}],
      "add_generation_prompt": false, "tools": [],
      "chat_template_kwargs": {"enable_thinking": false, "custom": "c", "bos_token": "B"}})"),
            "B</s>False|False|True|False|True|c|['<x>']");
  ChatTemplate tools = compile("{{ tools|tojson }}|{{ documents[0].title }}");
  EXPECT_EQ(render(tools, R"({"messages": [{"role": "user", "content": "q"}],
      "documents": [{"title": "T", "text": "x"}],
      "tools": [{"function": {"parameters": {}, "name": "f", "strict": true}, "x": 1}]})"),
            "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": null, "
            "\"parameters\": {}, \"strict\": true}, \"x\": 1}]|T");
}

TEST(ChatRender, ContentAsPartsWhenTheTemplateIteratesIt) {
  ChatTemplate t = compile(
      "{% for m in messages %}{% for p in m['content'] %}[{{ p.type }}:{{ p.text }}]{% endfor %};"
      "{% endfor %}");
  EXPECT_TRUE(t.content_as_parts());
  EXPECT_EQ(t.describe(), "general engine, content as parts");
  EXPECT_EQ(render(t, R"({"messages": [{"role": "user", "content": "s"},
      {"role": "assistant", "content": null},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]})"),
            "[text:s];;[text:a][text:b];");
  EXPECT_EQ(render(t, R"({"messages": [{"role": "user", "content": [
      {"type": "image_url", "image_url": {"url": "x"}}]}]})"),
            "error: messages[0].content: content part of type 'image_url' (kvgate renders text "
            "only)");
}

// A template that tests `content is string` and loops over parts otherwise (written for
// this check, ChatML-style). vLLM's default ("auto") sees the loop and passes a string
// content as one text part (chat_utils.py, _parse_chat_message_content), so the `trim` in
// the string branch never runs under vLLM and the whitespace stays: that is what the
// engine tokenizes, so it is what kvgate renders by default. transformers'
// apply_chat_template called directly with strings (and @huggingface/jinja) takes the
// string branch; an engine started with --chat-template-content-format string does too.
// Expected texts: Jinja2 3.1 with trim_blocks and lstrip_blocks, content as parts and as
// strings.
TEST(ChatRender, ContentFormatIsTheEnginesFlag) {
  ChatTemplate t = compile(
      "{%- for m in messages %}<|im_start|>{{ m.role }}\n{% if m.content is string %}{{ "
      "m.content | trim }}{% else %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endif "
      "%}\n{%- if loop.last %} [latest]{% endif %}<|im_end|>\n{% endfor %}{%- if "
      "add_generation_prompt %}<|im_start|>assistant\n{% endif %}");
  const std::string req =
      R"({"messages": [{"role": "user", "content": "a tab\t"},
          {"role": "assistant", "content": " x\u3000\n\n"},
          {"role": "user", "content": "\u00a0last\u000b\f\r"}]})";
  const std::string as_parts =
      "<|im_start|>user\na tab\t<|im_end|>\n<|im_start|>assistant\n x\u3000\n\n<|im_end|>\n"
      "<|im_start|>user\n\u00a0last\v\f\r [latest]<|im_end|>\n<|im_start|>assistant\n";
  const std::string as_string =
      "<|im_start|>user\na tab<|im_end|>\n<|im_start|>assistant\nx<|im_end|>\n"
      "<|im_start|>user\nlast [latest]<|im_end|>\n<|im_start|>assistant\n";
  using F = ChatRenderOptions::ContentFormat;
  EXPECT_EQ(render(t, req), as_parts);
  EXPECT_EQ(render(t, req, {.content_format = F::kOpenai}), as_parts);
  EXPECT_EQ(render(t, req, {.content_format = F::kString}), as_string);
  EXPECT_EQ(parse_content_format("string"), F::kString);
  EXPECT_EQ(parse_content_format("openai"), F::kOpenai);
  EXPECT_EQ(parse_content_format("auto"), F::kAuto);
  EXPECT_FALSE(parse_content_format("parts"));
}

// Issue #38: vLLM passes content as parts only to a template that loops over the content
// of a loop variable over messages (content_format.h). A loop over a macro parameter's
// content is not one: there content is a string, and `trim` takes the trailing tab. The
// expected prompts are Python Jinja 3.1.6's over the context vLLM builds for each template.
TEST(ChatRender, ContentFormatFollowsVllmsRule) {
  const std::string req = R"({"messages": [{"role": "user", "content": "a tab\t"},
      {"role": "assistant", "content": " \u3000b\n\n"}]})";
  ChatTemplate macro = compile(
      "{%- macro part_texts(msg) %}\n"
      "{%- for part in msg.content %}{{ part.text }}{% endfor %}\n"
      "{%- endmacro %}\n"
      "{%- for m in messages %}\n"
      "<|im_start|>{{ m.role }}\n"
      "{% if m.content is string %}{{ m.content | trim }}"
      "{% else %}{{ part_texts(m) }}{% endif %}\n"
      "{%- if loop.last %} [latest]{% endif %}<|im_end|>\n"
      "{% endfor %}\n");
  EXPECT_FALSE(macro.content_as_parts());
  EXPECT_EQ(render(macro, req),
            "<|im_start|>user\na tab<|im_end|>\n<|im_start|>assistant\nb [latest]<|im_end|>\n");
  ChatTemplate loop = compile(
      "{% for m in messages %}<|im_start|>{{ m.role }}\n"
      "{% if m.content is string %}{{ m.content | trim }}"
      "{% else %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endif %}\n"
      "{%- if loop.last %} [latest]{% endif %}<|im_end|>\n"
      "{% endfor %}");
  EXPECT_TRUE(loop.content_as_parts());
  EXPECT_EQ(render(loop, req),
            "<|im_start|>user\na tab\t<|im_end|>\n<|im_start|>assistant\n \u3000b\n\n "
            "[latest]<|im_end|>\n");
}

TEST(ChatRender, ContinueFinalMessageCutsAtTheFinalText) {
  ChatTemplate keep = compile("{% for m in messages %}<{{ m.content }}>{% endfor %}");
  const std::string req = R"({"messages": [{"role": "user", "content": "q"},
      {"role": "assistant", "content": "Hel "}], "add_generation_prompt": false,
      "continue_final_message": true})";
  EXPECT_EQ(render(keep, req), "<q><Hel ");
  ChatTemplate trimmed = compile("{% for m in messages %}<{{ m.content|trim }}>{% endfor %}");
  EXPECT_EQ(render(trimmed, req), "<q><Hel");
  ChatTemplate drops = compile(
      "{% for m in messages %}{% if m.role == 'user' %}{{ m.content }}"
      "{% endif %}{% endfor %}");
  EXPECT_EQ(render(drops, req),
            "error: continue_final_message is set but the final message does not appear in the "
            "chat after applying the chat template");
}

TEST(ChatRender, ListFormTemplatesAndTheRequestsOwnTemplate) {
  auto t = ChatTemplate::load(R"({"bos_token": {"content": "<s>", "lstrip": false},
      "chat_template": [{"name": "default", "template": "D{{ bos_token }}"},
                        {"name": "tool_use", "template": "T{{ tools|length if tools else 0 }}"}]})");
  ASSERT_TRUE(t.ok()) << t.error();
  EXPECT_EQ(t->describe(), "general engine, named template 'tool_use' (general engine)");
  EXPECT_EQ(render(*t, R"({"messages": [{"role": "user", "content": "q"}]})"), "D<s>");
  EXPECT_EQ(render(*t, R"({"messages": [{"role": "user", "content": "q"}],
      "tools": [{"type": "function", "function": {"name": "f"}}]})"),
            "T1");
  const std::string own = R"({"messages": [{"role": "user", "content": "q"}],
      "chat_template": "mine {{ messages|length }}"})";
  EXPECT_EQ(render(*t, own),
            "error: chat_template: the request carries its own template, which vLLM refuses "
            "without --trust-request-chat-template");
  ChatRenderOptions trust;
  trust.trust_request_chat_template = true;
  EXPECT_EQ(render(*t, own, trust), "mine 1");
  EXPECT_EQ(render(*t, R"({"messages": [{"role": "user", "content": "q"}],
      "chat_template_kwargs": {"chat_template": "tool_use"}})",
                   trust),
            "T0");
  EXPECT_EQ(render(*t, R"({"messages": [{"role": "user", "content": "q"}],
      "chat_template": "{{ x.y }}"})",
                   trust),
            "error: chat_template:1:5: 'x' is undefined");
  EXPECT_FALSE(ChatTemplate::load(R"({"chat_template": [{"name": "x", "template": ""}]})").ok());
}

TEST(ChatRender, StrftimeNowTakesTheCallersClock) {
  ChatTemplate t = compile("{{ strftime_now('%d %b %Y') }}");
  ChatRenderOptions opt;
  opt.now_unix_seconds = 1700000000;
  EXPECT_EQ(render(t, R"({"messages": [{"role": "user", "content": "q"}]})", opt), "14 Nov 2023");
}

#define REQUIRE_CONFIG(model)                                 \
  if (!testing::read_fixture(model, "tokenizer_config.json")) \
  GTEST_SKIP() << "fixture " model " absent: run scripts/bootstrap first"

TEST(ChatRender, RealTemplatesOfOtherFamilies) {
  REQUIRE_CONFIG("deepseek_v3");
  REQUIRE_CONFIG("gemma3");
  auto ds = ChatTemplate::load(*testing::read_fixture("deepseek_v3", "tokenizer_config.json"));
  ASSERT_TRUE(ds.ok()) << ds.error();
  EXPECT_EQ(ds->describe(), "general engine");
  const std::string chat = R"({"messages": [{"role": "system", "content": "S"},
      {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"},
      {"role": "user", "content": "Q"}]})";
  EXPECT_EQ(render(*ds, chat),
            "<｜begin▁of▁sentence｜>S<｜User｜>Hi<｜Assistant｜>Yo<｜end▁of▁sentence｜><｜User｜>Q"
            "<｜Assistant｜>");
  auto gemma = ChatTemplate::load(*testing::read_fixture("gemma3", "tokenizer_config.json"));
  ASSERT_TRUE(gemma.ok()) << gemma.error();
  EXPECT_EQ(gemma->describe(), "general engine, content as parts");
  EXPECT_EQ(
      render(*gemma, chat),
      "<bos><start_of_turn>user\nS\n\nHi<end_of_turn>\n<start_of_turn>model\nYo<end_of_turn>\n"
      "<start_of_turn>user\nQ<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(render(*gemma, R"({"messages": [{"role": "user", "content": "a"},
      {"role": "user", "content": "b"}]})"),
            "error: chat_template:19:12: Conversation roles must alternate "
            "user/assistant/user/assistant/...");
}

TEST(ChatRender, InvalidUtf8IsRefusedUnlessTheJsonParserCheckedIt) {
  ChatTemplate t = compile("{% for m in messages %}{{ m.content }}{% endfor %}");
  EXPECT_TRUE(request(R"({"messages": [{"role": "user", "content": "h\u00e9"}]})").utf8_checked);
  ChatRequest made;  // not from JSON text: render checks it
  made.messages.emplace_back();
  made.messages.back().role = "user";
  made.messages.back().content = "bad \xff byte";
  auto bad = t.render(made);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(), "messages: invalid UTF-8");
  made.messages.back().content = "good";
  auto good = t.render(made);
  ASSERT_TRUE(good.ok()) << good.error();
  EXPECT_EQ(*good, "good");
}

}  // namespace chat_render_test
}  // namespace kvgate::tokenizer
