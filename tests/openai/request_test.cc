#include "openai/request.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace kvgate::openai {
namespace {

// The error, or one of status 500 and no param when there is none.
Error error_of(std::string_view body, ApiKind kind = ApiKind::kChat) {
  Inspection i = inspect_request(body, kind);
  return i.error ? *i.error : Error("no error");
}

TEST(OpenAiRequest, AcceptsAChatRequest) {
  Inspection i = inspect_request(
      R"({"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,
          "stream_options":{"include_usage":true},"max_tokens":5})",
      ApiKind::kChat);
  ASSERT_FALSE(i.error);
  EXPECT_EQ(i.request.model, "m");
  EXPECT_TRUE(i.request.stream);
  EXPECT_TRUE(i.request.client_wants_usage);
  EXPECT_EQ(i.request.max_tokens, 5u);
  EXPECT_EQ(i.request.prompt_text, "user\nhi\n");
}

TEST(OpenAiRequest, BadBodiesGet400WithTheParam) {
  EXPECT_EQ(http_status(error_of("{not json").code), 400);
  EXPECT_EQ(http_status(error_of("[1,2]").code), 400);
  EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":"x"}]})").field, "model");
  EXPECT_EQ(error_of(R"({"model":5,"messages":[]})").field, "model");
  EXPECT_EQ(error_of(R"({"model":"m","messages":[]})").field, "messages");
  EXPECT_EQ(error_of(R"({"model":"m","messages":"hi"})").field, "messages");
  EXPECT_EQ(error_of(R"({"model":"m","messages":[1]})").field, "messages[0]");
  EXPECT_EQ(error_of(R"({"model":"m","messages":[{"role":"user"}],"stream":"yes"})").field,
            "stream");
  EXPECT_EQ(error_of(R"({"model":"m","messages":[{"role":"user"}],"max_tokens":-1})").field,
            "max_tokens");
  EXPECT_EQ(error_of(R"({"model":"m"})", ApiKind::kCompletion).field, "prompt");
  EXPECT_EQ(error_of(R"({"model":"m","prompt":3})", ApiKind::kCompletion).field, "prompt");
  std::string deep(200, '[');
  EXPECT_EQ(http_status(error_of(deep).code), 400);
}

TEST(OpenAiRequest, RewriteSetsServedModelAndAsksForUsage) {
  std::string out =
      rewrite_request(R"({"model":"alias","prompt":"x","stream":true})", "served", /*stream=*/true);
  auto v = boost::json::parse(out).as_object();
  EXPECT_EQ(v["model"].as_string(), "served");
  EXPECT_EQ(v["stream_options"].as_object()["include_usage"].as_bool(), true);
  std::string plain = rewrite_request(R"({"model":"a","prompt":"x"})", "s", false);
  EXPECT_FALSE(boost::json::parse(plain).as_object().contains("stream_options"));
}

// upstream_body, case by case: what the engine gets must always carry the served model
// and, on streams, include_usage: true.
boost::json::object upstream_of(std::string_view body, std::string_view served) {
  Inspection i = inspect_request(body, ApiKind::kCompletion);
  EXPECT_FALSE(i.error);
  std::string out = upstream_body(body, i.request, served);
  boost::system::error_code ec;
  auto v = boost::json::parse(out, ec);
  EXPECT_FALSE(ec) << out;
  EXPECT_EQ(v.as_object().at("model").as_string(), served) << out;
  if (i.request.stream) {
    EXPECT_EQ(v.at("stream_options").at("include_usage"), true) << out;
  }
  return v.as_object();
}

TEST(OpenAiRequest, UpstreamBodyAvoidsReparsingWhereItCan) {
  // Nothing to change: byte for byte the client's body.
  const std::string same = R"({"model":"m", "prompt":"x","max_tokens":3})";
  Inspection i = inspect_request(same, ApiKind::kCompletion);
  EXPECT_EQ(upstream_body(same, i.request, "m"), same);
  const std::string asked =
      R"({"model":"m","prompt":"x","stream":true,"stream_options":{"include_usage":true}})";
  i = inspect_request(asked, ApiKind::kCompletion);
  EXPECT_EQ(upstream_body(asked, i.request, "m"), asked);
  // A stream without stream_options: spliced in, the rest kept as sent.
  auto spliced = upstream_of(R"(  {"model":"m","prompt":"x","stream":true})", "m");
  EXPECT_EQ(spliced.at("prompt").as_string(), "x");
  // stream_options present (null, or without include_usage, or false): rewritten.
  upstream_of(R"({"model":"m","prompt":"x","stream":true,"stream_options":null})", "m");
  upstream_of(R"({"model":"m","prompt":"x","stream":true,"stream_options":{}})", "m");
  auto kept = upstream_of(
      R"({"model":"m","prompt":"x","stream":true,"stream_options":{"include_usage":false,"k":1}})",
      "m");
  EXPECT_EQ(kept.at("stream_options").at("k"), 1);
  // An alias: the model is rewritten, streamed or not.
  upstream_of(R"({"model":"alias","prompt":"x"})", "served");
  upstream_of(R"({"model":"alias","prompt":"x","stream":true})", "served");
  // Duplicate keys: the last wins for the gateway as for Python's json, so the body
  // passed through names the model that was checked.
  auto dup = upstream_of(R"({"model":"other","prompt":"x","model":"m"})", "m");
  EXPECT_EQ(dup.at("model").as_string(), "m");
}

TEST(OpenAiRequest, AuxBodiesGiveTheModelAndTheEmbeddingsSize) {
  Inspection e = inspect_aux_request(R"({"model":"m","input":["ab","cd"]})", AuxApi::kEmbeddings);
  ASSERT_FALSE(e.error);
  EXPECT_EQ(e.request.model, "m");
  EXPECT_EQ(e.request.prompt_text, "ab\ncd");
  EXPECT_EQ(e.request.given_tokens, 0u);
  Inspection ids = inspect_aux_request(R"({"input":[[1,2],[3]]})", AuxApi::kEmbeddings);
  ASSERT_FALSE(ids.error);
  EXPECT_EQ(ids.request.model, "");  // absent: the caller defaults it
  EXPECT_EQ(ids.request.given_tokens, 3u);
  EXPECT_EQ(inspect_aux_request(R"({"input":[4,5]})", AuxApi::kEmbeddings).request.given_tokens,
            2u);
  EXPECT_FALSE(inspect_aux_request(R"({"prompt":"x"})", AuxApi::kTokenize).error);
  EXPECT_FALSE(inspect_aux_request(R"({"model":null,"messages":[]})", AuxApi::kTokenize).error);
  EXPECT_FALSE(inspect_aux_request(R"({"tokens":[1]})", AuxApi::kDetokenize).error);
  Inspection count = inspect_aux_request(
      R"({"model":"m","messages":[{"role":"user","content":"x"}]})", AuxApi::kCountTokens);
  ASSERT_FALSE(count.error);
  EXPECT_EQ(count.request.model, "m");
}

TEST(OpenAiRequest, BadAuxBodiesGet400WithTheParam) {
  struct Case {
    std::string_view body;
    AuxApi api;
    std::string_view param;
  };
  for (const Case& c :
       {Case{"{", AuxApi::kEmbeddings, ""},
        Case{R"({"model":1,"input":"a"})", AuxApi::kEmbeddings, "model"},
        Case{R"({"model":"m"})", AuxApi::kEmbeddings, "input"},
        Case{R"({"input":[]})", AuxApi::kEmbeddings, "input"},
        Case{R"({"input":[{"a":1}]})", AuxApi::kEmbeddings, "input"},
        Case{R"({"input":"a","stream":true})", AuxApi::kEmbeddings, "stream"},
        Case{R"({"model":"m"})", AuxApi::kTokenize, "prompt"},
        Case{R"({"tokens":"1"})", AuxApi::kDetokenize, "tokens"},
        Case{R"({"model":"m"})", AuxApi::kCountTokens, "messages"},
        Case{R"({"model":"m","messages":"x"})", AuxApi::kCountTokens, "messages"}}) {
    Inspection i = inspect_aux_request(c.body, c.api);
    ASSERT_TRUE(i.error) << c.body;
    EXPECT_EQ(http_status(i.error->code), 400) << c.body;
    EXPECT_EQ(i.error->field, c.param) << c.body;
  }
}

TEST(OpenAiRequest, ScoreAndRerankBodiesGiveTheirPairsSize) {
  Inspection score =
      inspect_aux_request(R"({"model":"m","text_1":"q","text_2":["a","b"]})", AuxApi::kScore);
  ASSERT_FALSE(score.error);
  EXPECT_EQ(score.request.prompt_text, "q\na\nq\nb");
  Inspection rerank =
      inspect_aux_request(R"({"query":"q","documents":["a","b","c"]})", AuxApi::kRerank);
  ASSERT_FALSE(rerank.error);
  EXPECT_EQ(rerank.request.prompt_text, "q\na\nq\nb\nq\nc");
  struct Case {
    std::string_view body;
    AuxApi api;
    std::string_view param;
  };
  for (const Case& c : {Case{R"({"text_2":"a"})", AuxApi::kScore, "text_1"},
                        Case{R"({"text_1":["x","y"],"text_2":["a"]})", AuxApi::kScore, "text_2"},
                        Case{R"({"query":["q"],"documents":["a"]})", AuxApi::kRerank, "query"},
                        Case{R"({"query":"q","documents":"a"})", AuxApi::kRerank, "documents"}}) {
    Inspection i = inspect_aux_request(c.body, c.api);
    ASSERT_TRUE(i.error) << c.body;
    EXPECT_EQ(i.error->field, c.param) << c.body;
  }
}

}  // namespace
}  // namespace kvgate::openai
