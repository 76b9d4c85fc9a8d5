#include "openai/engine_api.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace kvgate::openai {
namespace {

namespace json = boost::json;

CompletionRequest ok(std::string_view body, ApiKind kind) {
  auto r = parse_completion_request(body, kind);
  if (!r) {
    ADD_FAILURE() << r.error();
  }
  return *r;
}

std::string err(std::string_view body, ApiKind kind) {
  auto r = parse_completion_request(body, kind);
  return r ? std::string() : r.error();
}

TEST(EngineApi, ParsesCompletionAndChatFields) {
  auto c = ok(R"({"model":"m","prompt":"hi","max_tokens":5,"stream":true,
                 "stream_options":{"include_usage":true},"priority":-1})",
              ApiKind::kCompletion);
  EXPECT_EQ(c.model, "m");
  EXPECT_EQ(c.prompt_text, "hi");
  EXPECT_EQ(c.max_tokens, 5u);
  EXPECT_TRUE(c.stream && c.include_usage);
  EXPECT_EQ(c.priority, -1);
  auto ids = ok(R"({"prompt":[1,2,3]})", ApiKind::kCompletion);
  EXPECT_EQ(*ids.prompt_tokens, (std::vector<kv::TokenId>{1, 2, 3}));
  auto chat = ok(R"({"messages":[{"role":"system","content":"s"},
                    {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
                    "max_completion_tokens":3,"max_tokens":9})",
                 ApiKind::kChat);
  ASSERT_EQ(chat.chat.messages.size(), 2u);
  EXPECT_EQ(chat.chat.messages[1].content, "a\nb");
  EXPECT_FALSE(chat.add_special_tokens);  // vLLM's chat default
  EXPECT_TRUE(c.add_special_tokens);      // and its completions default
  EXPECT_EQ(chat.max_tokens, 3u);         // max_completion_tokens wins
  auto pd = ok(R"({"prompt":"x","kv_transfer_params":{"do_remote_prefill":true,
                  "remote_block_ids":[1,2],"remote_rack":"r","remote_port":9}})",
               ApiKind::kCompletion);
  ASSERT_TRUE(pd.kv_transfer);
  EXPECT_TRUE(pd.kv_transfer->do_remote_prefill);
  EXPECT_EQ(pd.kv_transfer->remote_block_ids.size(), 2u);
  EXPECT_EQ(pd.kv_transfer->remote_rack, "r");
  EXPECT_EQ(pd.kv_transfer->remote_port, 9);
}

TEST(EngineApi, RejectsBadBodiesWithMessages) {
  EXPECT_NE(err("{", ApiKind::kCompletion).find("JSON"), std::string::npos);
  EXPECT_NE(err(R"({"prompt":"x","n":2})", ApiKind::kCompletion).find("n=1"), std::string::npos);
  EXPECT_NE(err(R"({"prompt":"x","max_tokens":-1})", ApiKind::kCompletion), "");
  EXPECT_NE(err(R"({"prompt":["a","b"]})", ApiKind::kCompletion), "");
  EXPECT_NE(err(R"({"prompt":[1,-2]})", ApiKind::kCompletion), "");
  EXPECT_NE(err(R"({"messages":[{"role":"user","content":5}]})", ApiKind::kChat), "");
  EXPECT_NE(err(R"({"model":3,"prompt":"x"})", ApiKind::kCompletion), "");
  EXPECT_NE(err(R"({"prompt":"x","stream":"yes"})", ApiKind::kCompletion), "");
  // kInvalidArgument (400), the parameter at fault as the error's field.
  auto zero = parse_completion_request(R"({"prompt":"x","max_tokens":0})", ApiKind::kCompletion);
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(kvgate::http_status(zero.code()), 400);
  EXPECT_EQ(zero.error(), "'max_tokens' must be at least 1");
  EXPECT_EQ(zero.failure().field, "max_tokens");
  auto body = parse_completion_request("[]", ApiKind::kCompletion);
  ASSERT_FALSE(body.ok());
  EXPECT_EQ(body.error(), "request body must be a JSON object");
  EXPECT_EQ(body.failure().field, "");
}

TEST(EngineApi, RendersResponsesAndChunks) {
  const ResponseIds ids{"chatcmpl-1", 7, "m"};
  auto full = json::parse(render_response(ApiKind::kChat, ids, " a b", "length", {10, 2, 8}, ""));
  EXPECT_EQ(full.at("object").as_string(), "chat.completion");
  EXPECT_EQ(full.at("choices").at(0).at("message").at("content").as_string(), " a b");
  EXPECT_EQ(full.at("usage").at("total_tokens").as_int64(), 12);
  EXPECT_EQ(full.at("usage").at("prompt_tokens_details").at("cached_tokens").as_int64(), 8);
  EXPECT_TRUE(full.at("kv_transfer_params").is_null());
  const std::string chunk = render_chunk(ApiKind::kCompletion, ids, " x", false, "", true);
  ASSERT_EQ(chunk.substr(0, 6), "data: ");
  ASSERT_EQ(chunk.substr(chunk.size() - 2), "\n\n");
  auto c = json::parse(chunk.substr(6));
  EXPECT_EQ(c.at("object").as_string(), "text_completion");
  EXPECT_TRUE(c.at("usage").is_null());
  EXPECT_TRUE(c.at("choices").at(0).at("finish_reason").is_null());
  auto u = json::parse(render_usage_chunk(ApiKind::kChat, ids, {1, 2, 0}).substr(6));
  EXPECT_TRUE(u.at("choices").as_array().empty());
  EXPECT_EQ(u.at("usage").at("completion_tokens").as_int64(), 2);
}

TEST(EngineApi, ReturnTokenIdsAndTemperatureAsVllmHasThem) {
  auto parsed = parse_completion_request(
      R"({"prompt":"x","return_token_ids":true,"temperature":0})", ApiKind::kCompletion);
  ASSERT_TRUE(parsed.ok());
  const CompletionRequest& r = *parsed;
  EXPECT_TRUE(r.return_token_ids);
  EXPECT_EQ(r.temperature, 0.0);
  EXPECT_NE(err(R"({"prompt":"x","return_token_ids":1})", ApiKind::kCompletion), "");
  EXPECT_NE(err(R"({"prompt":"x","temperature":-1})", ApiKind::kCompletion), "");
  EXPECT_NE(err(R"({"prompt":"x","temperature":"hot"})", ApiKind::kCompletion), "");

  const ResponseIds ids{"chatcmpl-1", 7, "m"};
  const std::vector<kv::TokenId> prompt = {1, 2, 3};
  const kv::TokenId token = 42;
  // A chat's prompt ids at the top level of its first chunk; a chunk's own ids in its choice.
  const TokenIdFields first{{}, &prompt};
  auto role = json::parse(render_chunk(ApiKind::kChat, ids, "", true, "", false, &first).substr(6));
  EXPECT_EQ(role.at("prompt_token_ids"), json::parse("[1,2,3]"));
  EXPECT_TRUE(role.at("choices").at(0).at("token_ids").as_array().empty());
  const TokenIdFields one{std::span(&token, 1), nullptr};
  auto next =
      json::parse(render_chunk(ApiKind::kChat, ids, " a", false, "", false, &one).substr(6));
  EXPECT_FALSE(next.as_object().contains("prompt_token_ids"));
  EXPECT_EQ(next.at("choices").at(0).at("token_ids"), json::parse("[42]"));
  // A completion's prompt ids in its choice.
  const TokenIdFields both{std::span(&token, 1), &prompt};
  auto c =
      json::parse(render_chunk(ApiKind::kCompletion, ids, " a", false, "", false, &both).substr(6));
  EXPECT_EQ(c.at("choices").at(0).at("prompt_token_ids"), json::parse("[1,2,3]"));
  auto whole =
      json::parse(render_response(ApiKind::kChat, ids, " a", "length", {3, 1, 0}, "", &both));
  EXPECT_EQ(whole.at("prompt_token_ids"), json::parse("[1,2,3]"));
  EXPECT_EQ(whole.at("choices").at(0).at("token_ids"), json::parse("[42]"));
  // Without the flag, no ids at all (as before).
  auto plain = json::parse(render_chunk(ApiKind::kChat, ids, " a", false, "", false).substr(6));
  EXPECT_FALSE(plain.at("choices").at(0).as_object().contains("token_ids"));
}

TokenizeRequest tok(std::string_view body) {
  auto r = parse_tokenize_request(body);
  if (!r) {
    ADD_FAILURE() << r.error();
  }
  return *r;
}

TEST(EngineApi, ParsesTokenizeAsVllmTakesIt) {
  auto p = tok(R"({"model":"m","prompt":"hi"})");
  EXPECT_EQ(p.model, "m");
  EXPECT_EQ(p.prompt, "hi");
  EXPECT_TRUE(p.add_special_tokens);  // TokenizeCompletionRequest's default
  EXPECT_FALSE(tok(R"({"prompt":"hi","add_special_tokens":false})").add_special_tokens);
  // The chat form: the whole chat request, as a chat completion's.
  auto c = tok(R"({"messages":[{"role":"system","content":"s"},
                  {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
                  {"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function",
                   "function":{"name":"f","arguments":"{\"x\":1}"}}]}],
                  "tools":[{"type":"function","function":{"name":"f"}}],
                  "chat_template_kwargs":{"enable_thinking":false,"custom":1},
                  "documents":[{"text":"d"}],"add_generation_prompt":false,
                  "continue_final_message":true,"return_token_strs":true})");
  EXPECT_FALSE(c.prompt);
  EXPECT_FALSE(c.add_special_tokens);  // TokenizeChatRequest's default
  EXPECT_TRUE(c.return_token_strs);
  ASSERT_EQ(c.chat.messages.size(), 3u);
  EXPECT_EQ(c.chat.messages[1].parts.size(), 2u);
  EXPECT_EQ(c.chat.messages[2].tool_calls.at(0).name, "f");
  EXPECT_EQ(c.chat.tools.size(), 1u);
  EXPECT_EQ(c.chat.enable_thinking, false);
  EXPECT_TRUE(c.chat.extra_kwargs.contains("custom"));
  EXPECT_FALSE(c.chat.documents.is_null());
  EXPECT_FALSE(c.chat.add_generation_prompt);
  EXPECT_TRUE(c.chat.continue_final_message);
  for (const char* bad :
       {"{", R"({})", R"({"prompt":3})", R"({"messages":[]})",
        R"({"prompt":"x","add_special_tokens":1})",
        R"({"messages":[{"role":"user","content":"x"}],"continue_final_message":true})"}) {
    auto r = parse_tokenize_request(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
}

TEST(EngineApi, RendersTokenizeResponseAsVllm) {
  const std::vector<kv::TokenId> ids = {7, 8, 9};
  auto r = json::parse(render_tokenize_response(ids, 4096));
  EXPECT_EQ(r,
            json::parse(R"({"count":3,"max_model_len":4096,"tokens":[7,8,9],"token_strs":null})"));
  const std::vector<std::string> strs = {"a", "b", "c"};
  EXPECT_EQ(json::parse(render_tokenize_response(ids, 1, &strs)).at("token_strs"),
            json::parse(R"(["a","b","c"])"));
}

EmbeddingRequest embedding_request(std::string_view body) {
  auto r = parse_embedding_request(body);
  if (!r) {
    ADD_FAILURE() << r.error();
  }
  return *r;
}

TEST(EngineApi, ParsesEmbeddingInputsInEveryShapeVllmTakes) {
  auto one = embedding_request(R"({"model":"m","input":"hello world"})");
  EXPECT_EQ(one.model, "m");
  ASSERT_EQ(one.inputs.size(), 1u);
  EXPECT_EQ(one.inputs[0].text, "hello world");
  EXPECT_FALSE(one.base64);  // "float" is the default
  auto texts = embedding_request(R"({"input":["a","b c"],"encoding_format":"base64"})");
  ASSERT_EQ(texts.inputs.size(), 2u);
  EXPECT_EQ(texts.inputs[1].text, "b c");
  EXPECT_TRUE(texts.base64);
  auto ids = embedding_request(R"({"input":[5,6,7],"dimensions":8})");
  ASSERT_EQ(ids.inputs.size(), 1u);  // one list of ids is one input
  EXPECT_FALSE(ids.inputs[0].text);
  EXPECT_EQ(ids.inputs[0].tokens, (std::vector<kv::TokenId>{5, 6, 7}));
  EXPECT_EQ(ids.dimensions, 8u);
  auto lists = embedding_request(R"({"input":[[1,2],[3]],"truncate_prompt_tokens":1})");
  ASSERT_EQ(lists.inputs.size(), 2u);
  EXPECT_EQ(lists.inputs[1].tokens, (std::vector<kv::TokenId>{3}));
  EXPECT_EQ(lists.truncate_prompt_tokens, 1u);
}

TEST(EngineApi, RefusesEmbeddingBodiesVllmRefuses) {
  for (std::string_view bad :
       {R"({"model":"m"})", R"({"input":null})", R"({"input":[]})", R"({"input":7})",
        R"({"input":[1,"a"]})", R"({"input":["a",[]]})", R"({"input":[[1,-2]]})",
        R"({"input":"a","encoding_format":"int8"})", R"({"input":"a","dimensions":0})",
        R"({"input":"a","truncate_prompt_tokens":0})", "[]", "{"}) {
    auto r = parse_embedding_request(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.code(), ErrorCode::kInvalidArgument) << bad;
    EXPECT_EQ(kvgate::http_status(r.code()), 400) << bad;
  }
}

TEST(EngineApi, DetokenizeAsVllm) {
  auto r = parse_detokenize_request(R"({"model":"m","tokens":[1,2,3]})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->model, "m");
  EXPECT_EQ(r->tokens, (std::vector<kv::TokenId>{1, 2, 3}));
  for (std::string_view bad : {R"({"model":"m"})", R"({"tokens":"1 2"})", R"({"tokens":[1.5]})"}) {
    EXPECT_FALSE(parse_detokenize_request(bad).ok()) << bad;
  }
  EXPECT_EQ(json::parse(render_detokenize_response("a b")), json::parse(R"({"prompt":"a b"})"));
}

TEST(EngineApi, ScoreAndRerankPairTheirTextsAsVllm) {
  auto one = parse_score_request(R"({"model":"m","text_1":"q","text_2":["a","b"]})");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->pairs, (std::vector<std::pair<std::string, std::string>>{{"q", "a"}, {"q", "b"}}));
  auto zip = parse_score_request(R"({"text_1":["x","y"],"text_2":["a","b"],
                                     "truncate_prompt_tokens":-1})");
  ASSERT_TRUE(zip.ok());
  EXPECT_EQ(zip->pairs, (std::vector<std::pair<std::string, std::string>>{{"x", "a"}, {"y", "b"}}));
  EXPECT_FALSE(zip->truncate_prompt_tokens);
  for (std::string_view bad : {R"({"text_1":"q"})", R"({"text_1":["x","y"],"text_2":["a"]})",
                               R"({"text_1":[],"text_2":"a"})", R"({"text_1":1,"text_2":"a"})"}) {
    EXPECT_FALSE(parse_score_request(bad).ok()) << bad;
  }
  auto rr = parse_rerank_request(R"({"model":"m","query":"q","documents":["a","b"],"top_n":1})");
  ASSERT_TRUE(rr.ok());
  EXPECT_EQ(rr->query, "q");
  EXPECT_EQ(rr->documents, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(rr->top_n, 1u);
  for (std::string_view bad :
       {R"({"documents":["a"]})", R"({"query":"q","documents":"a"})",
        R"({"query":"q","documents":[]})", R"({"query":"q","documents":["a"],"top_n":-1})"}) {
    EXPECT_FALSE(parse_rerank_request(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace kvgate::openai
