#include "openai/responses.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "openai/sse_tap.h"

namespace kvgate::openai::responses {
namespace {

namespace json = boost::json;

ChatForm form_of(std::string_view body) {
  auto r = to_chat(body);
  if (!r) {
    ADD_FAILURE() << r.error();
    return {};
  }
  return *r;
}

TEST(Responses, InputBecomesTheChatRequestVllmRenders) {
  ChatForm one = form_of(R"({"model":"m","input":"hi","instructions":"Be brief.",
      "max_output_tokens":9,"stream":true,"store":false})");
  EXPECT_EQ(json::parse(one.chat), json::parse(R"({"model":"m","max_tokens":9,"stream":true,
      "messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}]})"));
  EXPECT_TRUE(one.has_instructions);
  EXPECT_FALSE(one.store);
  EXPECT_EQ(one.previous_response_id, "");
  ChatForm items = form_of(R"({"model":"m","previous_response_id":"resp_1",
      "tools":[{"type":"function","name":"f","parameters":{"type":"object"}},{"type":"web_search"}],
      "input":[{"role":"developer","content":"rules"},
               {"type":"message","role":"user","content":[{"type":"input_text","text":"a"},
                   {"type":"input_image","image_url":"http://x/i.png"}]},
               {"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},
               {"type":"function_call_output","call_id":"c1","output":"42"},
               {"role":"assistant","content":[{"type":"output_text","text":"done"}]}]})");
  EXPECT_EQ(items.previous_response_id, "resp_1");
  EXPECT_TRUE(items.store);
  EXPECT_FALSE(items.has_instructions);
  EXPECT_EQ(json::parse(items.chat), json::parse(R"({"model":"m",
      "messages":[{"role":"system","content":"rules"},
                  {"role":"user","content":[{"type":"text","text":"a"},
                      {"type":"image_url","image_url":{"url":"http://x/i.png"}}]},
                  {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",
                      "function":{"name":"f","arguments":"{}"}}]},
                  {"role":"tool","tool_call_id":"c1","content":"42"},
                  {"role":"assistant","content":[{"type":"text","text":"done"}]}],
      "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]})"));
}

// vLLM's cache_salt goes into the chat request as it came (inspect_request checks it there).
TEST(Responses, CacheSaltIsCarriedIntoTheChatRequest) {
  ChatForm salted = form_of(R"({"model":"m","input":"hi","cache_salt":"tenant-a"})");
  EXPECT_EQ(json::parse(salted.chat), json::parse(R"({"model":"m","cache_salt":"tenant-a",
      "messages":[{"role":"user","content":"hi"}]})"));
  ChatForm plain = form_of(R"({"model":"m","input":"hi","cache_salt":null})");
  EXPECT_FALSE(json::parse(plain.chat).as_object().contains("cache_salt"));
}

TEST(Responses, RefusesBadBodiesNamingTheField) {
  for (std::string_view bad :
       {R"({"model":"m"})", R"({"input":7})", R"({"input":[]})", R"({"input":[1]})",
        R"({"input":[{"role":"bot","content":"x"}]})", R"({"input":[{"role":"user"}]})",
        R"({"input":[{"type":"function_call","name":"f"}]})", R"({"input":"x","stream":1})",
        R"({"input":"x","max_output_tokens":0})", R"({"input":"x","previous_response_id":3})", "[]",
        "{"}) {
    auto r = to_chat(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.code(), ErrorCode::kInvalidArgument) << bad;
    EXPECT_EQ(kvgate::http_status(r.code()), 400) << bad;
  }
  // The parameter or path the message names is the error's field.
  auto stream = to_chat(R"({"input":"x","stream":1})");
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.error(), "'stream' must be a boolean");
  EXPECT_EQ(stream.failure().field, "stream");
  auto role = to_chat(R"({"input":[{"role":"bot","content":"x"}]})");
  ASSERT_FALSE(role.ok());
  EXPECT_EQ(role.failure().field, "input.0.role");
}

TEST(Responses, AContinuationPutsTheStoredConversationBeforeTheNewInput) {
  ChatForm next = form_of(R"({"model":"m","instructions":"sys2","input":"more"})");
  const std::string stored = messages_of(R"({"messages":[{"role":"user","content":"first"}]})");
  EXPECT_EQ(json::parse(stored), json::parse(R"([{"role":"user","content":"first"}])"));
  EXPECT_EQ(json::parse(continue_chat(next.chat, next.has_instructions, stored, " answer")),
            json::parse(R"({"model":"m","messages":[{"role":"system","content":"sys2"},
                {"role":"user","content":"first"},{"role":"assistant","content":" answer"},
                {"role":"user","content":"more"}]})"));
  EXPECT_EQ(messages_of("not json"), "[]");
}

TEST(Responses, ReadAnswerOfNoResponseIsEmpty) {
  for (std::string_view text : {"not json", "[]", R"({"object":"response"})"}) {
    const Answered read = read_answer(text);
    EXPECT_EQ(read.id, "") << text;
    EXPECT_FALSE(read.usage.seen) << text;
  }
}

TEST(Responses, EngineAnswersAndTheGatewaysTapAgree) {
  Answer a{.id = "resp_1",
           .item_id = "msg_1",
           .created_at = 5,
           .model = "m",
           .previous_response_id = "resp_0",
           .max_output_tokens = 2,
           .incomplete = true};
  const Usage usage{.prompt_tokens = 10, .completion_tokens = 2, .cached_tokens = 4, .seen = true};
  const std::string whole = render_response(a, " x y", usage);
  json::value w = json::parse(whole);
  EXPECT_EQ(w.at("object").as_string(), "response");
  EXPECT_EQ(w.at("status").as_string(), "incomplete");
  EXPECT_EQ(w.at("incomplete_details").at("reason").as_string(), "max_output_tokens");
  EXPECT_EQ(w.at("previous_response_id").as_string(), "resp_0");
  EXPECT_EQ(w.at("output").at(0).at("content").at(0).at("text").as_string(), " x y");
  EXPECT_EQ(w.at("usage").at("total_tokens").to_number<int>(), 12);
  const Answered read = read_answer(whole);
  EXPECT_EQ(read.id, "resp_1");
  EXPECT_TRUE(read.usage.seen);
  EXPECT_EQ(read.usage.prompt_tokens, 10u);
  EXPECT_EQ(read.usage.completion_tokens, 2u);
  EXPECT_EQ(read.usage.cached_tokens, 4u);
  // The one-field readers (a stream's events) read the same.
  EXPECT_EQ(response_id(whole), read.id);
  const Usage parsed = parse_usage(whole);
  EXPECT_EQ(parsed.prompt_tokens, 10u);
  EXPECT_EQ(parsed.completion_tokens, 2u);
  EXPECT_EQ(parsed.cached_tokens, 4u);

  uint64_t seq = 0;
  std::string stream = render_stream_start(a, seq);
  stream += render_text_delta(a, " x", seq);
  stream += render_text_delta(a, " y", seq);
  stream += render_stream_end(a, " x y", usage, seq);
  EXPECT_EQ(seq, 10u);  // created, in_progress, item, part, 2 deltas, 4 closing events
  SseTap tap(/*strip_usage_chunk=*/true, Dialect::kResponses);
  std::string out;
  size_t tokens = 0;
  bool done = false;
  std::vector<std::string> names;
  for (size_t i = 0; i < stream.size(); i += 41) {
    SseTap::Step s = tap.feed(std::string_view(stream).substr(i, 41), out);
    tokens += s.token_events;
    done = done || s.done;
  }
  EXPECT_EQ(out, stream);
  EXPECT_EQ(tokens, 2u);
  EXPECT_TRUE(done);
  EXPECT_EQ(tap.response_id(), "resp_1");
  EXPECT_EQ(tap.usage().completion_tokens, 2u);
  EXPECT_EQ(tap.usage().cached_tokens, 4u);
  // Every event names itself twice, as the openai client reads it either way.
  for (size_t at = stream.find("event: "); at != std::string::npos;
       at = stream.find("event: ", at + 1)) {
    const std::string name = stream.substr(at + 7, stream.find('\n', at) - at - 7);
    const size_t data = stream.find("data: ", at) + 6;
    json::value e = json::parse(stream.substr(data, stream.find('\n', data) - data));
    EXPECT_EQ(e.at("type").as_string(), name);
    names.push_back(name);
  }
  EXPECT_EQ(names.front(), "response.created");
  EXPECT_EQ(names.back(), "response.completed");
}

}  // namespace
}  // namespace kvgate::openai::responses
