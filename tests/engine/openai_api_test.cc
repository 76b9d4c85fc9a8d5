#include "engine/openai_api.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace kvgate::engine_server {
namespace {

namespace json = boost::json;

CompletionRequest ok(std::string_view body, ApiKind kind) {
  auto r = parse_completion_request(body, kind);
  if (auto* e = std::get_if<ApiError>(&r)) ADD_FAILURE() << e->message;
  return std::get<CompletionRequest>(r);
}

std::string err(std::string_view body, ApiKind kind) {
  auto r = parse_completion_request(body, kind);
  auto* e = std::get_if<ApiError>(&r);
  return e ? e->message : "";
}

TEST(OpenAiApi, ParsesCompletionAndChatFields) {
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
  ASSERT_EQ(chat.messages.size(), 2u);
  EXPECT_EQ(chat.messages[1].content, "a\nb");
  EXPECT_EQ(chat.max_tokens, 3u);  // max_completion_tokens wins
  auto pd = ok(R"({"prompt":"x","kv_transfer_params":{"do_remote_prefill":true,
                  "remote_block_ids":[1,2],"remote_rack":"r","remote_port":9}})",
               ApiKind::kCompletion);
  ASSERT_TRUE(pd.kv_transfer);
  EXPECT_TRUE(pd.kv_transfer->do_remote_prefill);
  EXPECT_EQ(pd.kv_transfer->remote_block_ids.size(), 2u);
  EXPECT_EQ(pd.kv_transfer->remote_rack, "r");
  EXPECT_EQ(pd.kv_transfer->remote_port, 9);
}

TEST(OpenAiApi, RejectsBadBodiesWithMessages) {
  EXPECT_NE(err("{", ApiKind::kCompletion).find("JSON"), std::string::npos);
  EXPECT_NE(err(R"({"prompt":"x","n":2})", ApiKind::kCompletion).find("n=1"), std::string::npos);
  EXPECT_NE(err(R"({"prompt":"x","max_tokens":-1})", ApiKind::kCompletion), "");
  EXPECT_NE(err(R"({"prompt":["a","b"]})", ApiKind::kCompletion), "");
  EXPECT_NE(err(R"({"prompt":[1,-2]})", ApiKind::kCompletion), "");
  EXPECT_NE(err(R"({"messages":[{"role":"user","content":5}]})", ApiKind::kChat), "");
  EXPECT_NE(err(R"({"model":3,"prompt":"x"})", ApiKind::kCompletion), "");
  EXPECT_NE(err(R"({"prompt":"x","stream":"yes"})", ApiKind::kCompletion), "");
}

TEST(OpenAiApi, RendersResponsesAndChunks) {
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

TEST(OpenAiApi, ReturnTokenIdsAndTemperatureAsVllmHasThem) {
  auto parsed = parse_completion_request(
      R"({"prompt":"x","return_token_ids":true,"temperature":0})", ApiKind::kCompletion);
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(parsed));
  const CompletionRequest& r = std::get<CompletionRequest>(parsed);
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

TEST(TextCodec, WordCodecIsStableAndPrefixPreserving) {
  auto codec = make_word_codec(151643);
  auto a = *codec->encode("the quick brown fox");
  auto b = *codec->encode("the quick  brown\nfox jumps");
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 5u);
  EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin()));
  for (auto t : b) EXPECT_LT(t, 151643u);
  std::vector<ChatMessage> conv = {{"user", "hello there"}};
  auto one = *codec->encode_chat(conv, true);
  conv.push_back({"assistant", "hi"});
  conv.push_back({"user", "more"});
  auto two = *codec->encode_chat(conv, true);
  // A conversation that grows keeps its earlier tokens (all but the generation prompt).
  EXPECT_TRUE(std::equal(one.begin(), one.end() - 3, two.begin()));
  EXPECT_EQ(output_token_text(5).front(), ' ');
}

}  // namespace
}  // namespace kvgate::engine_server
