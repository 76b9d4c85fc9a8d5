#include "openai/anthropic.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "openai/sse_tap.h"

namespace kvgate::openai::anthropic {
namespace {

namespace json = boost::json;

json::value chat_of(std::string_view body) {
  auto r = messages_to_chat(body);
  if (!r) {
    ADD_FAILURE() << r.error();
    return nullptr;
  }
  return json::parse(*r);
}

TEST(Anthropic, MessagesBecomeTheChatRequestVllmRenders) {
  json::value c = chat_of(R"({"model":"m","max_tokens":7,"stream":true,"temperature":0,
      "stop_sequences":["END"],
      "system":[{"type":"text","text":"Be "},{"type":"text","text":"brief."}],
      "tools":[{"name":"get","description":"d","input_schema":{"type":"object"}}],
      "messages":[{"role":"user","content":"hi"},
                  {"role":"assistant","content":[{"type":"text","text":"calling"},
                      {"type":"tool_use","id":"t1","name":"get","input":{"q":1}}]},
                  {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1",
                      "content":[{"type":"text","text":"42"}]},{"type":"text","text":"thanks"},
                      {"type":"image","source":{"type":"base64","media_type":"image/png","data":"QQ=="}}]}]})");
  EXPECT_EQ(c, json::parse(R"({"model":"m","max_tokens":7,
      "messages":[{"role":"system","content":"Be brief."},
                  {"role":"user","content":"hi"},
                  {"role":"assistant","content":[{"type":"text","text":"calling"}],
                   "tool_calls":[{"id":"t1","type":"function",
                                  "function":{"name":"get","arguments":"{\"q\":1}"}}]},
                  {"role":"tool","tool_call_id":"t1","content":"42"},
                  {"role":"user","content":[{"type":"text","text":"thanks"},
                      {"type":"image_url","image_url":{"url":"data:image/png;base64,QQ=="}}]}],
      "stream":true,"stop":["END"],"temperature":0,
      "tools":[{"type":"function","function":{"name":"get","description":"d",
                "parameters":{"type":"object"}}}]})"));
}

// count_tokens: the Messages body without max_tokens, rendered alike (stream not read).
TEST(Anthropic, CountTokensBodyIsTheMessagesChatWithoutMaxTokens) {
  auto r = count_tokens_to_chat(R"({"model":"m","system":"Be brief.","stream":true,
      "messages":[{"role":"user","content":"hi"}]})");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(json::parse(*r),
            json::parse(R"({"model":"m","messages":[{"role":"system","content":"Be brief."},
                {"role":"user","content":"hi"}]})"));
  // A max_tokens given is ignored; the rest is checked as for Messages.
  EXPECT_TRUE(count_tokens_to_chat(
                  R"({"model":"m","max_tokens":0,"messages":[{"role":"user","content":"x"}]})")
                  .ok());
  for (std::string_view bad : {R"({"messages":[{"role":"user","content":"x"}]})",
                               R"({"model":"m"})", R"({"model":"m","messages":[]})",
                               R"({"model":"m","messages":[{"role":"bot","content":"x"}]})"}) {
    auto e = count_tokens_to_chat(bad);
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(kvgate::http_status(e.code()), 400);
  }
  EXPECT_EQ(
      json::parse(render_count_tokens(42)),
      json::parse(R"({"input_tokens":42,"context_management":{"original_input_tokens":42}})"));
}

TEST(Anthropic, RefusesWhatTheApiRefusesNamingTheField) {
  struct Case {
    std::string_view body, field;
  };
  for (
      const Case& c :
      {Case{R"({"max_tokens":1,"messages":[]})", "model"},
       Case{R"({"model":"m","messages":[{"role":"user","content":"x"}]})", "max_tokens"},
       Case{R"({"model":"m","max_tokens":0,"messages":[{"role":"user","content":"x"}]})",
            "max_tokens"},
       Case{R"({"model":"m","max_tokens":1})", "messages"},
       Case{R"({"model":"m","max_tokens":1,"messages":[]})", "messages"},
       Case{R"({"model":"m","max_tokens":1,"messages":[{"role":"bot","content":"x"}]})",
            "messages.0.role"},
       Case{R"({"model":"m","max_tokens":1,"messages":[{"role":"user"}]})", "messages.0.content"},
       Case{R"({"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"text":"x"}]}]})",
            "messages.0.content.0"},
       Case{
           R"({"model":"m","max_tokens":1,"stream":"yes","messages":[{"role":"user","content":"x"}]})",
           "stream"},
       Case{"[1]", "JSON object"}, Case{"{", "not valid JSON"}}) {
    auto r = messages_to_chat(c.body);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(kvgate::http_status(r.code()), 400);
    EXPECT_NE(r.error().find(c.field), std::string::npos) << r.error();
  }
  // The path the message names is the error's field; none for the body as a whole.
  auto role =
      messages_to_chat(R"({"model":"m","max_tokens":1,"messages":[{"role":"bot","content":"x"}]})");
  ASSERT_FALSE(role.ok());
  EXPECT_EQ(role.error(), "messages.0.role: must be 'user' or 'assistant'");
  EXPECT_EQ(role.failure().field, "messages.0.role");
  auto body = messages_to_chat("[1]");
  ASSERT_FALSE(body.ok());
  EXPECT_EQ(body.failure().field, "");
}

TEST(Anthropic, ErrorsInAnthropicsShape) {
  EXPECT_EQ(json::parse(error_json(404, "no such model")),
            json::parse(R"({"type":"error","error":{"type":"not_found_error",
                "message":"no such model"}})"));
  EXPECT_EQ(error_type(400), "invalid_request_error");
  EXPECT_EQ(error_type(401), "authentication_error");
  EXPECT_EQ(error_type(403), "permission_error");
  EXPECT_EQ(error_type(413), "request_too_large");
  EXPECT_EQ(error_type(429), "rate_limit_error");
  EXPECT_EQ(error_type(500), "api_error");
  EXPECT_EQ(error_type(502), "api_error");
  EXPECT_EQ(error_type(503), "overloaded_error");
  EXPECT_EQ(error_type(504), "timeout_error");
  // An OpenAI-shaped body keeps its message; an Anthropic one passes as it is.
  EXPECT_EQ(json::parse(error_from_openai(
                429, R"({"error":{"message":"slow down","type":"x","param":null,"code":"c"}})")),
            json::parse(error_json(429, "slow down")));
  const std::string already = error_json(400, "bad");
  EXPECT_EQ(error_from_openai(400, already), already);
  EXPECT_EQ(json::parse(error_from_openai(502, "oops")), json::parse(error_json(502, "HTTP 502")));
}

TEST(Anthropic, EngineAnswersAndTheGatewaysTapAgree) {
  const Usage usage{.prompt_tokens = 12, .completion_tokens = 2, .cached_tokens = 8, .seen = true};
  json::value whole = json::parse(render_message("msg_1", "m", " a b", "max_tokens", usage));
  EXPECT_EQ(whole, json::parse(R"({"id":"msg_1","type":"message","role":"assistant","model":"m",
      "content":[{"type":"text","text":" a b"}],"stop_reason":"max_tokens","stop_sequence":null,
      "usage":{"input_tokens":12,"cache_read_input_tokens":8,"output_tokens":2}})"));
  const Usage parsed = parse_usage(json::serialize(whole));
  EXPECT_TRUE(parsed.seen);
  EXPECT_EQ(parsed.prompt_tokens, 12u);
  EXPECT_EQ(parsed.completion_tokens, 2u);
  EXPECT_EQ(parsed.cached_tokens, 8u);

  const std::string stream = render_stream_start("msg_1", "m", 12) + render_text_delta(" a") +
                             render_text_delta(" b") + render_stream_end("max_tokens", usage);
  EXPECT_EQ(stream.rfind("event: message_start\ndata: {", 0), 0u);
  // Fed in uneven pieces, passed through whole, read as Anthropic's events.
  SseTap tap(/*strip_usage_chunk=*/true, Dialect::kAnthropic);
  std::string out;
  size_t tokens = 0;
  bool done = false;
  for (size_t i = 0; i < stream.size(); i += 37) {
    SseTap::Step s = tap.feed(std::string_view(stream).substr(i, 37), out);
    tokens += s.token_events;
    done = done || s.done;
  }
  EXPECT_EQ(out, stream);
  EXPECT_EQ(tokens, 2u);
  EXPECT_TRUE(done);
  EXPECT_TRUE(tap.usage().seen);
  EXPECT_EQ(tap.usage().prompt_tokens, 12u);
  EXPECT_EQ(tap.usage().completion_tokens, 2u);
  EXPECT_EQ(tap.usage().cached_tokens, 8u);
  EXPECT_FALSE(tap.saw_error());
  tap.feed(render_error_event(529, "Overloaded"), out);
  EXPECT_TRUE(tap.saw_error());
}

}  // namespace
}  // namespace kvgate::openai::anthropic
