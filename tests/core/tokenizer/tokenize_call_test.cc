#include "core/tokenizer/tokenize_call.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace kvgate::tokenizer {
namespace {

namespace json = boost::json;

json::object body_of(const TokenizeCall& c) {
  EXPECT_TRUE(c.approximate.empty()) << c.error;
  return json::parse(c.body).as_object();
}

TEST(TokenizeCall, ChatFormCarriesTheRenderingFieldsTheRequestHasAndNothingElse) {
  const TokenizeCall c = build_tokenize_call(
      R"({"model":"alias","stream":true,"max_tokens":9,"temperature":0,
          "messages":[{"role":"system","content":"be brief"},
                      {"role":"user","content":[{"type":"text","text":"hi"},
                                                {"type":"image_url","image_url":{"url":"x"}}]}],
          "tools":[{"type":"function","function":{"name":"f"}}],
          "chat_template_kwargs":{"enable_thinking":false},
          "continue_final_message":false,"add_generation_prompt":true,
          "add_special_tokens":false,"chat_template":"{{ messages }}"})",
      /*chat=*/true, "served-name");
  const json::object b = body_of(c);
  EXPECT_EQ(b.at("model"), "served-name");
  EXPECT_EQ(b.at("messages").as_array().size(), 2u);
  // Content parts go as they came (the engine renders them).
  EXPECT_EQ(b.at("messages").at(1).at("content").as_array().size(), 2u);
  EXPECT_EQ(b.at("tools").at(0).at("function").at("name"), "f");
  EXPECT_EQ(b.at("chat_template_kwargs").at("enable_thinking"), false);
  EXPECT_EQ(b.at("continue_final_message"), false);
  EXPECT_EQ(b.at("add_generation_prompt"), true);
  EXPECT_EQ(b.at("add_special_tokens"), false);
  EXPECT_EQ(b.at("chat_template"), "{{ messages }}");
  for (const char* absent : {"stream", "max_tokens", "temperature", "prompt"}) {
    EXPECT_FALSE(b.contains(absent)) << absent;
  }
  EXPECT_EQ(c.chain.size(), 2u);
  EXPECT_EQ(c.text, "system\nbe brief\nuser\nhi\n");
  EXPECT_EQ(c.text_end, (std::vector<size_t>{16, 24}));
}

TEST(TokenizeCall, AbsentFieldsStayAbsentSoTheEngineAppliesItsOwnDefaults) {
  const json::object b =
      body_of(build_tokenize_call(R"({"messages":[{"role":"user","content":"x"}]})", true, "m"));
  EXPECT_EQ(b.size(), 2u);  // model and messages
  const json::object n = body_of(build_tokenize_call(
      R"({"messages":[{"role":"user","content":"x"}],"tools":null,"add_generation_prompt":null})",
      true, "m"));
  EXPECT_EQ(n.size(), 2u);
}

TEST(TokenizeCall, DocumentsTravelAsChatTemplateKwargs) {
  const json::object b = body_of(build_tokenize_call(
      R"({"messages":[{"role":"user","content":"x"}],"documents":[{"title":"t","text":"d"}],
          "chat_template_kwargs":{"enable_thinking":true}})",
      true, "m"));
  EXPECT_EQ(b.at("chat_template_kwargs").at("documents").at(0).at("title"), "t");
  EXPECT_EQ(b.at("chat_template_kwargs").at("enable_thinking"), true);
  EXPECT_FALSE(b.contains("documents"));
}

TEST(TokenizeCall, AFollowUpSharesTheKeysOfItsEarlierTurns) {
  const TokenizeCall one = build_tokenize_call(
      R"({"messages":[{"role":"system","content":"s"},{"role":"user","content":"q1"}]})", true,
      "m");
  const TokenizeCall two = build_tokenize_call(
      R"({"max_tokens":5,"messages":[{"role":"system","content":"s"},{"role":"user","content":"q1"},
          {"role":"assistant","content":"a1"},{"role":"user","content":"q2"}]})",
      true, "m");
  ASSERT_EQ(one.chain.size(), 2u);
  ASSERT_EQ(two.chain.size(), 4u);
  EXPECT_EQ(one.chain[0], two.chain[0]);
  EXPECT_EQ(one.chain[1], two.chain[1]);
  EXPECT_FALSE(two.chain[2] == two.chain[1]);
  // Other rendering options, or another served model: other keys from the first message.
  for (const auto& [body, model] : std::vector<std::pair<std::string, std::string>>{
           {R"({"messages":[{"role":"system","content":"s"}],"add_generation_prompt":false})", "m"},
           {R"({"messages":[{"role":"system","content":"s"}],"tools":[]})", "m"},
           {R"({"messages":[{"role":"system","content":"s"}]})", "other"}}) {
    const TokenizeCall c = build_tokenize_call(body, true, model);
    ASSERT_EQ(c.chain.size(), 1u);
    EXPECT_FALSE(c.chain[0] == one.chain[0]) << body << " " << model;
  }
  // The same message with other content: another key.
  const TokenizeCall other = build_tokenize_call(
      R"({"messages":[{"role":"system","content":"s"},{"role":"user","content":"q9"}]})", true,
      "m");
  EXPECT_EQ(other.chain[0], one.chain[0]);
  EXPECT_FALSE(other.chain[1] == one.chain[1]);
}

TEST(TokenizeCall, CompletionFormTakesAStringPromptAndAddSpecialTokens) {
  const TokenizeCall c = build_tokenize_call(
      R"({"model":"x","prompt":"Hello","max_tokens":3,"add_special_tokens":false})", false, "m");
  const json::object b = body_of(c);
  EXPECT_EQ(b.at("model"), "m");
  EXPECT_EQ(b.at("prompt"), "Hello");
  EXPECT_EQ(b.at("add_special_tokens"), false);
  EXPECT_FALSE(b.contains("max_tokens"));
  EXPECT_EQ(c.chain.size(), 1u);
  EXPECT_EQ(c.text, "Hello");
  const TokenizeCall one = build_tokenize_call(R"({"prompt":["Hello"]})", false, "m");
  EXPECT_EQ(body_of(one).at("prompt"), "Hello");
  EXPECT_FALSE(body_of(one).contains("add_special_tokens"));  // the engine's default: true
}

TEST(TokenizeCall, PromptIdsNeedNoCallAndOthersAreRoutedApproximatelyWithAReason) {
  const TokenizeCall ids = build_tokenize_call(R"({"prompt":[1,2,4294967295]})", false, "m");
  ASSERT_TRUE(ids.given_ids);
  EXPECT_EQ(*ids.given_ids, (std::vector<uint32_t>{1, 2, 4294967295u}));
  EXPECT_TRUE(ids.approximate.empty());
  EXPECT_EQ(build_tokenize_call(R"({"prompt":["a","b"]})", false, "m").approximate,
            "batched_prompt");
  for (const char* bad : {"{", "[]", R"({"prompt":[1,-2]})", R"({"prompt":5})", R"({})"}) {
    EXPECT_EQ(build_tokenize_call(bad, false, "m").approximate, "bad_request") << bad;
  }
  for (const char* bad : {R"({"messages":[]})", R"({"messages":[3]})", R"({"messages":"x"})",
                          R"({"messages":[{"role":"user"}],"documents":[],
                              "chat_template_kwargs":[1]})"}) {
    EXPECT_EQ(build_tokenize_call(bad, true, "m").approximate, "bad_request") << bad;
  }
}

TEST(TokenizeCall, ParsesVllmsTokenizeResponse) {
  auto ids = parse_tokenize_response(
      R"({"count":3,"max_model_len":32768,"tokens":[151644,872,0],"token_strs":null})");
  ASSERT_TRUE(ids) << ids.error();
  EXPECT_EQ(*ids, (std::vector<uint32_t>{151644, 872, 0}));
  EXPECT_TRUE(parse_tokenize_response(R"({"tokens":[]})"));  // count is optional
  for (const char* bad :
       {"", "{", "[1,2]", R"({"count":1})", R"({"tokens":[1,-1]})", R"({"tokens":[1.5]})",
        R"({"tokens":[4294967296]})", R"({"tokens":"1"})", R"({"count":2,"tokens":[1]})"}) {
    EXPECT_FALSE(parse_tokenize_response(bad)) << bad;
  }
}

}  // namespace
}  // namespace kvgate::tokenizer
