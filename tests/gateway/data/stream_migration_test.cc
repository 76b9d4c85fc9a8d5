// MigratingStream: what the client sees of a stream whose engine failed and whose answer
// went on elsewhere, without any I/O: the token ids the gateway asked for are hidden, the
// continuation request carries prompt and streamed ids, and the continuation's chunks and
// usage are rewritten into the original answer's.
#include "gateway/data/stream_migration.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace kvgate::gateway {
namespace {

namespace json = boost::json;

std::vector<json::object> events(const std::string& sse) {
  std::vector<json::object> out;
  size_t pos = 0;
  while ((pos = sse.find("data: ", pos)) != std::string::npos) {
    const size_t end = sse.find("\n\n", pos);
    const std::string payload = sse.substr(pos + 6, end - pos - 6);
    if (payload != "[DONE]") out.push_back(json::parse(payload).as_object());
    pos = end;
  }
  return out;
}

const std::string kChatBody =
    R"({"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5,)"
    R"("temperature":0,"seed":3,"stream":true,"stream_options":{"include_usage":true}})";

// The first leg of a chat stream as vLLM sends it with return_token_ids: the role chunk
// with the prompt's ids, then two tokens.
const std::string kFirstLeg =
    R"(data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"m","prompt_token_ids":[10,11,12],"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null,"token_ids":[]}],"usage":null})"
    "\n\n"
    R"(data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"content":"a"},"logprobs":null,"finish_reason":null,"token_ids":[100]}],"usage":null})"
    "\n\n"
    R"(data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"content":"b"},"logprobs":null,"finish_reason":null,"token_ids":[101]}],"usage":null})"
    "\n\n";

TEST(StreamMigration, FirstLegHidesTheTokenIdsTheGatewayAskedForAndLearnsThem) {
  auto m = MigratingStream::start(kChatBody, openai::ApiKind::kChat);
  ASSERT_TRUE(m);
  EXPECT_EQ(json::parse(m->first_body()).at("return_token_ids"), true);
  std::string out;
  // Split anywhere: only whole events come out.
  m->feed(std::string_view(kFirstLeg).substr(0, 100), out);
  EXPECT_TRUE(out.empty());
  // Half of the third event, as a dying engine might leave it.
  const size_t cut = kFirstLeg.size() - 40;
  m->feed(std::string_view(kFirstLeg).substr(100, cut - 100), out);
  auto got = events(out);
  ASSERT_EQ(got.size(), 2u);
  for (const json::object& e : got) {
    EXPECT_FALSE(e.contains("prompt_token_ids"));
    EXPECT_FALSE(e.at("choices").at(0).as_object().contains("token_ids"));
  }
  EXPECT_EQ(m->prompt_tokens(), 3u);
  EXPECT_EQ(m->generated(), 1u);  // the third event never completed
  EXPECT_TRUE(m->can_continue());
  EXPECT_EQ(m->remaining(), 4u);

  const json::value c = json::parse(m->continuation_body());
  EXPECT_EQ(c.at("prompt"), json::parse("[10,11,12,100]"));
  EXPECT_EQ(c.at("max_tokens"), 4);
  EXPECT_EQ(c.at("temperature"), 0);
  EXPECT_EQ(c.at("seed"), 3);
  EXPECT_EQ(c.at("model"), "m");
  EXPECT_EQ(c.at("return_token_ids"), true);
  EXPECT_FALSE(c.as_object().contains("messages"));
}

TEST(StreamMigration, ContinuationChunksAndUsageBecomeTheOriginalAnswers) {
  auto m = MigratingStream::start(kChatBody, openai::ApiKind::kChat);
  ASSERT_TRUE(m);
  std::string out;
  m->feed(kFirstLeg, out);
  ASSERT_EQ(m->generated(), 2u);
  m->begin_leg();
  out.clear();
  m->feed(
      R"(data: {"id":"cmpl-9","object":"text_completion","created":99,"model":"m","choices":[{"index":0,"text":"c","logprobs":null,"finish_reason":null,"stop_reason":null,"prompt_token_ids":[10,11,12,100,101],"token_ids":[102]}],"usage":null})"
      "\n\n"
      R"(data: {"id":"cmpl-9","object":"text_completion","created":99,"model":"m","choices":[{"index":0,"text":"d","logprobs":null,"finish_reason":null,"stop_reason":null,"token_ids":[103]}],"usage":null})"
      "\n\n"
      R"(data: {"id":"cmpl-9","object":"text_completion","created":99,"model":"m","choices":[{"index":0,"text":"e","logprobs":null,"finish_reason":"length","stop_reason":null,"token_ids":[104]}],"usage":null})"
      "\n\n"
      R"(data: {"id":"cmpl-9","object":"text_completion","created":99,"model":"m","choices":[],"usage":{"prompt_tokens":5,"total_tokens":8,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":4}}})"
      "\n\ndata: [DONE]\n\n",
      out);
  auto got = events(out);
  ASSERT_EQ(got.size(), 4u);
  std::string text;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(got[i].at("id"), "chatcmpl-1");
    EXPECT_EQ(got[i].at("object"), "chat.completion.chunk");
    EXPECT_EQ(got[i].at("created"), 7);
    EXPECT_TRUE(got[i].at("usage").is_null());
    text += std::string(got[i].at("choices").at(0).at("delta").at("content").as_string());
    EXPECT_FALSE(got[i].at("choices").at(0).as_object().contains("token_ids"));
  }
  EXPECT_EQ(text, "cde");
  EXPECT_EQ(got[2].at("choices").at(0).at("finish_reason"), "length");
  const json::value& u = got[3].at("usage");
  EXPECT_EQ(u.at("prompt_tokens"), 3);
  EXPECT_EQ(u.at("completion_tokens"), 5);
  EXPECT_EQ(u.at("total_tokens"), 8);
  EXPECT_EQ(u.at("prompt_tokens_details").at("cached_tokens"), 3);
  EXPECT_NE(out.find("data: [DONE]"), std::string::npos);
  EXPECT_TRUE(m->complete());
  EXPECT_FALSE(m->can_continue());
}

TEST(StreamMigration, CompletionStreamKeepsTheIdsTheClientAskedForAndEndsByItself) {
  const std::string body =
      R"({"model":"m","prompt":"x y","max_tokens":2,"stream":true,"return_token_ids":true})";
  auto m = MigratingStream::start(body, openai::ApiKind::kCompletion);
  ASSERT_TRUE(m);
  const std::string leg =
      R"(data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"a","logprobs":null,"finish_reason":null,"stop_reason":null,"prompt_token_ids":[5,6],"token_ids":[7]}]})"
      "\n\n"
      R"(data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"b","logprobs":null,"finish_reason":"length","stop_reason":null,"token_ids":[8]}]})"
      "\n\n";
  std::string out;
  m->feed(leg, out);
  EXPECT_EQ(out, leg);  // unchanged: the client asked for the ids
  // The engine died before its usage chunk and [DONE]: the answer is complete anyway.
  EXPECT_TRUE(m->complete());
  auto closing = events(m->closing_events());
  ASSERT_EQ(closing.size(), 1u);
  EXPECT_EQ(closing[0].at("usage").at("prompt_tokens"), 2);
  EXPECT_EQ(closing[0].at("usage").at("completion_tokens"), 2);
  EXPECT_EQ(closing[0].at("id"), "cmpl-1");
}

TEST(StreamMigration, AnEngineWithoutTokenIdsCannotBeContinued) {
  auto m = MigratingStream::start(kChatBody, openai::ApiKind::kChat);
  ASSERT_TRUE(m);
  std::string out;
  m->feed(
      R"(data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]})"
      "\n\n",
      out);
  EXPECT_FALSE(m->can_continue());
  EXPECT_FALSE(MigratingStream::start("not json", openai::ApiKind::kChat));
}

}  // namespace
}  // namespace kvgate::gateway
