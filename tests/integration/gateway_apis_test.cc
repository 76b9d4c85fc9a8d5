// Issue #40's remaining APIs through `kvgate serve` in front of real `kvgate engine`s:
// Anthropic's POST /v1/messages/count_tokens (relayed to the pool, Anthropic's errors) and
// GET /v1/responses/{id} (fetched from the endpoint that answered the response; 404 in
// OpenAI's shape otherwise), and the engine's own side of both.
#include <gtest/gtest.h>

#include "support/gateway_fixture.h"

namespace kvgate::testing {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace gateway_apis_test {

const std::vector<std::string> kFast = {"--time-scale", "0.01", "--model", "sim"};

io::HttpClientResponse fetch(const std::string& method, const std::string& url) {
  auto r = io::http_fetch(method, url);
  if (!r) {
    ADD_FAILURE() << r.error();
    return {};
  }
  return *r;
}

TEST(GatewayApis, CountTokensIsRelayedAndMatchesTheMessagesUsage) {
  EngineProcess e1(kFast);
  EngineProcess e2(kFast);
  ASSERT_FALSE(e1.url.empty() || e2.url.empty());
  GatewayProcess gw(gateway_yaml({e1.url, e2.url}));
  ASSERT_FALSE(gw.url.empty());
  const std::string messages =
      R"("messages":[{"role":"user","content":"hello there, how many tokens is this?"}])";
  const std::string count_body = R"({"model":"sim","system":"Be brief.",)" + messages + "}";

  // The engine: the Messages body rendered as /v1/messages renders it, counted.
  auto direct = e1.post("/v1/messages/count_tokens", count_body);
  ASSERT_EQ(direct.status, 200) << direct.body;
  const int64_t n = parse_json(direct.body).at("input_tokens").as_int64();
  EXPECT_GT(n, 0);
  EXPECT_EQ(parse_json(direct.body).at("context_management").at("original_input_tokens").as_int64(),
            n);
  auto message = e1.post("/v1/messages",
                         R"({"model":"sim","max_tokens":2,"system":"Be brief.",)" + messages + "}");
  ASSERT_EQ(message.status, 200) << message.body;
  EXPECT_EQ(parse_json(message.body).at("usage").at("input_tokens").as_int64(), n);

  // Through the gateway: the same count, from one of the pool's endpoints.
  auto relayed = gw.post("/v1/messages/count_tokens", count_body);
  ASSERT_EQ(relayed.status, 200) << relayed.body;
  EXPECT_EQ(parse_json(relayed.body).at("input_tokens").as_int64(), n);
  ASSERT_NE(relayed.header("x-kvgate-endpoint"), nullptr);
  EXPECT_TRUE(*relayed.header("x-kvgate-endpoint") == e1.url ||
              *relayed.header("x-kvgate-endpoint") == e2.url);
  // The alias goes upstream as the served name.
  auto alias = gw.post("/v1/messages/count_tokens",
                       R"({"model":"sim-alias","system":"Be brief.",)" + messages + "}");
  ASSERT_EQ(alias.status, 200) << alias.body;
  EXPECT_EQ(parse_json(alias.body).at("input_tokens").as_int64(), n);

  // Errors are Anthropic's, the gateway's own included.
  auto missing = gw.post("/v1/messages/count_tokens", R"({"model":"sim"})");
  EXPECT_EQ(missing.status, 400) << missing.body;
  EXPECT_EQ(parse_json(missing.body).at("type").as_string(), "error");
  EXPECT_EQ(parse_json(missing.body).at("error").at("type").as_string(), "invalid_request_error");
  auto unknown = gw.post("/v1/messages/count_tokens", R"({"model":"nope",)" + messages + "}");
  EXPECT_EQ(unknown.status, 404) << unknown.body;
  EXPECT_EQ(parse_json(unknown.body).at("error").at("type").as_string(), "not_found_error");
  EXPECT_EQ(fetch("GET", gw.url + "/v1/messages/count_tokens").status, 405);
  EXPECT_EQ(gw.proc->stop(), 0) << gw.proc->errors();
}

TEST(GatewayApis, StoredResponsesAreFetchedFromTheEndpointThatAnsweredThem) {
  EngineProcess e1(kFast);
  EngineProcess e2(kFast);
  ASSERT_FALSE(e1.url.empty() || e2.url.empty());
  GatewayProcess gw(gateway_yaml({e1.url, e2.url}));
  ASSERT_FALSE(gw.url.empty());

  // A whole response: GET by id comes back from the endpoint that answered it, twice (the
  // round robin would have sent the second to the other engine, which does not have it).
  auto created =
      gw.post("/v1/responses", R"({"model":"sim","input":"hello","max_output_tokens":3})");
  ASSERT_EQ(created.status, 200) << created.body;
  ASSERT_NE(created.header("x-kvgate-endpoint"), nullptr);
  const std::string holder = *created.header("x-kvgate-endpoint");
  const std::string other = holder == e1.url ? e2.url : e1.url;
  const std::string id(parse_json(created.body).at("id").as_string());
  ASSERT_TRUE(id.starts_with("resp_")) << created.body;
  for (int i = 0; i < 2; ++i) {
    auto got = fetch("GET", gw.url + "/v1/responses/" + id);
    ASSERT_EQ(got.status, 200) << got.body;
    ASSERT_NE(got.header("x-kvgate-endpoint"), nullptr);
    EXPECT_EQ(*got.header("x-kvgate-endpoint"), holder);
    const boost::json::value v = parse_json(got.body);
    EXPECT_EQ(v.at("id").as_string(), id);
    EXPECT_EQ(v.at("object").as_string(), "response");
    EXPECT_EQ(v.at("output").as_array().size(), 1u);
    EXPECT_EQ(v.at("usage").at("output_tokens").as_int64(), 3);
  }
  // The engine's own side: the holder answers, the other does not have it (vLLM's 404).
  EXPECT_EQ(fetch("GET", holder + "/v1/responses/" + id).status, 200);
  EXPECT_EQ(fetch("GET", other + "/v1/responses/" + id).status, 404);

  // A streamed response is remembered from its events.
  auto streamed = gw.post(
      "/v1/responses", R"({"model":"sim","input":"hi again","max_output_tokens":2,"stream":true})");
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  const size_t at = streamed.body.find("\"id\":\"resp_");
  ASSERT_NE(at, std::string::npos) << streamed.body;
  const std::string stream_id =
      streamed.body.substr(at + 6, streamed.body.find('"', at + 6) - (at + 6));
  auto got_stream = fetch("GET", gw.url + "/v1/responses/" + stream_id);
  ASSERT_EQ(got_stream.status, 200) << got_stream.body;
  EXPECT_EQ(parse_json(got_stream.body).at("status").as_string(), "incomplete");  // length

  // Unknown ids, and responses not stored: 404 in OpenAI's shape.
  auto unknown = fetch("GET", gw.url + "/v1/responses/resp_0123456789abcdef");
  EXPECT_EQ(unknown.status, 404) << unknown.body;
  EXPECT_EQ(parse_json(unknown.body).at("error").at("type").as_string(), "invalid_request_error");
  auto unstored = gw.post("/v1/responses",
                          R"({"model":"sim","input":"x","max_output_tokens":1,"store":false})");
  ASSERT_EQ(unstored.status, 200) << unstored.body;
  const std::string unstored_id(parse_json(unstored.body).at("id").as_string());
  EXPECT_EQ(fetch("GET", gw.url + "/v1/responses/" + unstored_id).status, 404);
  // Only GET (vLLM has no DELETE); a deeper path is no route.
  EXPECT_EQ(fetch("DELETE", gw.url + "/v1/responses/" + id).status, 405);
  EXPECT_EQ(fetch("GET", gw.url + "/v1/responses/" + id + "/input_items").status, 404);
  EXPECT_EQ(gw.proc->stop(), 0) << gw.proc->errors();
}

}  // namespace gateway_apis_test
}  // namespace kvgate::testing
