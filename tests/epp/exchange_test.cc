// The Endpoint Picker's message handling (epp/exchange.h) without gRPC or a gateway: a
// fake Picker stands for the gateway's front door and router.
#include "epp/exchange.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kvgate::epp {
namespace exchange_test {

namespace core_pb = ::envoy::config::core::v3;

struct FakePicker final : Picker {
  // Refuses with `refusal` when set, else picks 10.0.0.7:8000.
  std::optional<io::HttpResponse> refusal;
  bool strip_usage = true;
  std::vector<std::string> runners_up = {"10.0.0.8:8000", "[fd00::9]:8000"};
  gateway::PickKind kind = gateway::PickKind::kRouted;
  openai::Dialect dialect = openai::Dialect::kOpenAi;
  bool stream = true;
  std::optional<uint32_t> rank;  // the pick's data-parallel rank
  std::string prefill;           // a disaggregated pick's prefill endpoint
  std::vector<gateway::ExternalRequest> asked;
  std::vector<gateway::ExternalOutcome> settled;

  gateway::ExternalPick pick(gateway::ExternalRequest request,
                             const std::function<bool()>&) override {
    asked.push_back(request);
    gateway::ExternalPick p;
    if (refusal) {
      p.answer = *refusal;
      return p;
    }
    auto e = std::make_shared<gateway::EndpointAddress>();
    e->host = "10.0.0.7";
    e->port = 8000;
    p.destination = gateway::destination_of(*e);
    p.endpoint = std::move(e);
    p.body = request.http.body + " ";  // "as it goes upstream": differs from the input
    p.stream = stream;
    p.kind = kind;
    p.dialect = dialect;
    p.strip_usage_chunk = strip_usage;
    p.dp_rank = rank;
    p.prefill = prefill;
    // The runners-up the gateway would list, as many as asked.
    const size_t asked_for = request.fallbacks;
    for (size_t i = 0; i < asked_for && i < runners_up.size(); ++i) {
      p.fallbacks.push_back(runners_up[i]);
    }
    return p;
  }
  void done(gateway::ExternalPick, gateway::ExternalOutcome outcome) override {
    settled.push_back(std::move(outcome));
  }
  Nanos now() const override { return 0; }
  std::vector<std::string> served_by;  // Picker::served's endpoints, in order
  void served(gateway::ExternalPick& pick, const std::string& endpoint) override {
    served_by.push_back(endpoint);
    pick.destination = endpoint;  // as the gateway's: the pick now names it
  }
};

pb::ProcessingRequest headers(bool eos = false) {
  pb::ProcessingRequest r;
  core_pb::HeaderMap* m = r.mutable_request_headers()->mutable_headers();
  auto add = [&](const char* k, const char* v) {
    core_pb::HeaderValue* h = m->add_headers();
    h->set_key(k);
    h->set_raw_value(v);
  };
  add(":method", "POST");
  add(":path", "/v1/chat/completions?x=1");
  add("content-type", "application/json");
  r.mutable_request_headers()->set_end_of_stream(eos);
  return r;
}

pb::ProcessingRequest body(const std::string& chunk, bool eos) {
  pb::ProcessingRequest r;
  r.mutable_request_body()->set_body(chunk);
  r.mutable_request_body()->set_end_of_stream(eos);
  return r;
}

std::string header_of(const pb::HeaderMutation& m, const std::string& key) {
  for (const core_pb::HeaderValueOption& o : m.set_headers()) {
    if (o.header().key() == key) return o.header().raw_value();
  }
  return "<absent>";
}

// The destination the response's dynamic metadata (envoy.lb) names.
std::string lb_destination(const pb::ProcessingResponse& r) {
  return r.dynamic_metadata()
      .fields()
      .at(std::string("envoy.lb"))
      .struct_value()
      .fields()
      .at(std::string("x-gateway-destination-endpoint"))
      .string_value();
}

const std::function<bool()> kNever = [] { return false; };

TEST(EppExchange, HoldsTheBodyThenAnswersWithThePickInHeaderAndMetadata) {
  FakePicker picker;
  Exchange x(picker, 1 << 20);
  auto r = x.on_request(headers(), kNever);
  ASSERT_TRUE(r) << r.error();
  EXPECT_TRUE(r->empty());
  r = x.on_request(body("{\"model\":", false), kNever);
  ASSERT_TRUE(r) << r.error();
  EXPECT_TRUE(r->empty());
  r = x.on_request(body("\"sim\"}", true), kNever);
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->size(), 2u);
  ASSERT_EQ(picker.asked.size(), 1u);
  EXPECT_EQ(picker.asked[0].http.body, "{\"model\":\"sim\"}");
  EXPECT_EQ(picker.asked[0].http.method, "POST");
  EXPECT_EQ(picker.asked[0].http.path, "/v1/chat/completions");
  EXPECT_EQ(picker.asked[0].http.query, "x=1");
  EXPECT_EQ(picker.asked[0].http.header("content-type").value_or(""), "application/json");
  EXPECT_FALSE(picker.asked[0].subset.has_value());

  const pb::ProcessingResponse& h = (*r)[0];
  ASSERT_TRUE(h.has_request_headers());
  const pb::CommonResponse& c = h.request_headers().response();
  EXPECT_TRUE(c.clear_route_cache());
  EXPECT_EQ(header_of(c.header_mutation(), "x-gateway-destination-endpoint"), "10.0.0.7:8000");
  EXPECT_EQ(header_of(c.header_mutation(), "content-length"), "16");
  EXPECT_EQ(lb_destination(h), "10.0.0.7:8000");
  const pb::ProcessingResponse& b = (*r)[1];
  ASSERT_TRUE(b.has_request_body());
  const pb::StreamedBodyResponse& s =
      b.request_body().response().body_mutation().streamed_response();
  EXPECT_EQ(s.body(), "{\"model\":\"sim\"} ");
  EXPECT_TRUE(s.end_of_stream());
  EXPECT_EQ(x.destination(), "10.0.0.7:8000");
}

TEST(EppExchange, FallbacksFollowThePickInHeaderAndMetadata) {
  FakePicker picker;
  Exchange x(picker, ExchangeOptions{.max_body_bytes = 1 << 20, .fallbacks = 2});
  ASSERT_TRUE(x.on_request(headers(), kNever));
  auto r = x.on_request(body("{}", true), kNever);
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(picker.asked.size(), 1u);
  EXPECT_EQ(picker.asked[0].fallbacks, 2);
  ASSERT_EQ(r->size(), 2u);
  const pb::ProcessingResponse& h = (*r)[0];
  const std::string list = "10.0.0.7:8000,10.0.0.8:8000,[fd00::9]:8000";
  EXPECT_EQ(
      header_of(h.request_headers().response().header_mutation(), "x-gateway-destination-endpoint"),
      list);
  EXPECT_EQ(lb_destination(h), list);
  EXPECT_EQ(x.destination(), "10.0.0.7:8000");  // the pick alone

  // Not asked: the pick alone.
  FakePicker alone;
  Exchange y(alone, 1 << 20);
  ASSERT_TRUE(y.on_request(headers(), kNever));
  r = y.on_request(body("{}", true), kNever);
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(alone.asked.size(), 1u);
  EXPECT_EQ(alone.asked[0].fallbacks, 0);
  EXPECT_EQ(header_of((*r)[0].request_headers().response().header_mutation(),
                      "x-gateway-destination-endpoint"),
            "10.0.0.7:8000");
}

bool removes(const pb::HeaderMutation& m, const std::string& key) {
  for (const std::string& k : m.remove_headers()) {
    if (k == key) return true;
  }
  return false;
}

TEST(EppExchange, ARankPickSetsTheRankHeaderAndAnyOtherRemovesIt) {
  FakePicker picker;
  picker.rank = 3;
  Exchange x(picker, 1 << 20);
  ASSERT_TRUE(x.on_request(headers(), kNever));
  auto r = x.on_request(body("{}", true), kNever);
  ASSERT_TRUE(r) << r.error();
  const pb::HeaderMutation& m = (*r)[0].request_headers().response().header_mutation();
  // The destination is the engine's address; the rank goes in vLLM's header.
  EXPECT_EQ(header_of(m, "x-gateway-destination-endpoint"), "10.0.0.7:8000");
  EXPECT_EQ(header_of(m, "x-data-parallel-rank"), "3");
  EXPECT_FALSE(removes(m, "x-data-parallel-rank"));

  // No rank: a client's own header of that name is removed.
  FakePicker plain;
  Exchange y(plain, 1 << 20);
  ASSERT_TRUE(y.on_request(headers(), kNever));
  r = y.on_request(body("{}", true), kNever);
  ASSERT_TRUE(r) << r.error();
  const pb::HeaderMutation& n = (*r)[0].request_headers().response().header_mutation();
  EXPECT_EQ(header_of(n, "x-data-parallel-rank"), "<absent>");
  EXPECT_TRUE(removes(n, "x-data-parallel-rank"));
}

TEST(EppExchange, ADisaggregatedPickNamesThePrefillEndpointForTheSidecar) {
  FakePicker picker;
  picker.prefill = "10.0.0.9:8000";
  Exchange x(picker, 1 << 20);
  ASSERT_TRUE(x.on_request(headers(), kNever));
  auto r = x.on_request(body("{}", true), kNever);
  ASSERT_TRUE(r) << r.error();
  const pb::ProcessingResponse& h = (*r)[0];
  const pb::HeaderMutation& m = h.request_headers().response().header_mutation();
  // The destination is the decode endpoint; the prefill endpoint goes in llm-d's header.
  EXPECT_EQ(header_of(m, "x-gateway-destination-endpoint"), "10.0.0.7:8000");
  EXPECT_EQ(lb_destination(h), "10.0.0.7:8000");
  EXPECT_EQ(header_of(m, "x-prefiller-host-port"), "10.0.0.9:8000");
  EXPECT_FALSE(removes(m, "x-prefiller-host-port"));

  // No remote prefill: a client's own header is removed (the sidecar then decodes alone).
  FakePicker local;
  Exchange y(local, 1 << 20);
  ASSERT_TRUE(y.on_request(headers(), kNever));
  r = y.on_request(body("{}", true), kNever);
  ASSERT_TRUE(r) << r.error();
  const pb::HeaderMutation& n = (*r)[0].request_headers().response().header_mutation();
  EXPECT_EQ(header_of(n, "x-prefiller-host-port"), "<absent>");
  EXPECT_TRUE(removes(n, "x-prefiller-host-port"));
}

TEST(EppExchange, ARefusalIsAnImmediateResponseWithServesAnswer) {
  FakePicker picker;
  picker.refusal = io::HttpResponse{429, "application/json", {{"Retry-After", "3"}}, "{}", {}};
  Exchange x(picker, 1 << 20);
  ASSERT_TRUE(x.on_request(headers(), kNever));
  auto r = x.on_request(body("{}", true), kNever);
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->size(), 1u);
  ASSERT_TRUE((*r)[0].has_immediate_response());
  const pb::ImmediateResponse& i = (*r)[0].immediate_response();
  EXPECT_EQ(static_cast<int>(i.status().code()), 429);
  EXPECT_EQ(i.body(), "{}");
  EXPECT_EQ(header_of(i.headers(), "Retry-After"), "3");
  EXPECT_EQ(header_of(i.headers(), "content-type"), "application/json");
  EXPECT_TRUE(picker.settled.empty());  // nothing was picked: nothing to settle
}

TEST(EppExchange, TooLongABodyIs413WithoutAsking) {
  FakePicker picker;
  Exchange x(picker, 8);
  ASSERT_TRUE(x.on_request(headers(), kNever));
  auto r = x.on_request(body("0123456789", false), kNever);
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ(static_cast<int>((*r)[0].immediate_response().status().code()), 413);
  EXPECT_TRUE(picker.asked.empty());
}

TEST(EppExchange, SubsetHintAsListOrCommaSeparatedString) {
  pb::ProcessingRequest r = headers();
  auto& ns = (*r.mutable_metadata_context()
                   ->mutable_filter_metadata())[std::string("envoy.lb.subset_hint")];
  auto& v = (*ns.mutable_fields())[std::string("x-gateway-destination-endpoint-subset")];
  v.mutable_list_value()->add_values()->set_string_value("10.0.0.1:80");
  v.mutable_list_value()->add_values()->set_string_value("10.0.0.2:80");
  auto got = subset_hint(r);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, (std::vector<std::string>{"10.0.0.1:80", "10.0.0.2:80"}));
  v.set_string_value("10.0.0.3:80, 10.0.0.4:80");
  got = subset_hint(r);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, (std::vector<std::string>{"10.0.0.3:80", "10.0.0.4:80"}));
  v.mutable_list_value()->clear_values();
  got = subset_hint(r);
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(got->empty());
  EXPECT_FALSE(subset_hint(headers()).has_value());
}

TEST(EppExchange, MessagesOutOfOrderAreErrors) {
  FakePicker picker;
  {
    Exchange x(picker, 1 << 20);
    EXPECT_FALSE(x.on_request(pb::ProcessingRequest(), kNever));
  }
  {
    Exchange x(picker, 1 << 20);
    EXPECT_FALSE(x.on_request(body("{}", true), kNever));
  }
  {
    Exchange x(picker, 1 << 20);
    ASSERT_TRUE(x.on_request(headers(), kNever));
    EXPECT_FALSE(x.on_request(headers(), kNever));
  }
  {
    Exchange x(picker, 1 << 20);
    pb::ProcessingRequest r;
    r.mutable_response_headers();
    EXPECT_FALSE(x.on_request(r, kNever));
  }
  EXPECT_TRUE(picker.asked.empty());
}

// The server's form (on_message, then on_pick once the pick is decided) answers as
// on_request: the pick's headers and body first, then the message's own response.
TEST(EppExchange, TheAsynchronousFormHandsTheRequestOverAndAnswersAsOnRequest) {
  FakePicker picker;
  Exchange x(picker, 1 << 20);
  auto first = x.on_message(headers());
  ASSERT_TRUE(first) << first.error();
  EXPECT_FALSE(first->pick.has_value());
  EXPECT_TRUE(first->responses.empty());
  auto held = x.on_message(body("{\"model\":", false));
  ASSERT_TRUE(held) << held.error();
  EXPECT_FALSE(held->pick.has_value());
  pb::ProcessingRequest t;
  t.mutable_request_trailers();
  // Trailers end the body: the whole request is handed over, not picked here.
  auto whole = x.on_message(t);
  ASSERT_TRUE(whole) << whole.error();
  ASSERT_TRUE(whole->pick.has_value());
  EXPECT_TRUE(picker.asked.empty());
  EXPECT_EQ(whole->pick->http.body, "{\"model\":");
  EXPECT_EQ(whole->pick->http.path, "/v1/chat/completions");
  ASSERT_EQ(whole->responses.size(), 1u);
  EXPECT_TRUE(whole->responses[0].has_request_trailers());
  // No message while the pick is pending.
  pb::ProcessingRequest early;
  early.mutable_response_headers();
  EXPECT_FALSE(x.on_message(early));
  std::vector<pb::ProcessingResponse> out = x.on_pick(picker.pick(std::move(*whole->pick), kNever));
  ASSERT_EQ(out.size(), 2u);
  ASSERT_TRUE(out[0].has_request_headers());
  EXPECT_EQ(header_of(out[0].request_headers().response().header_mutation(),
                      "x-gateway-destination-endpoint"),
            "10.0.0.7:8000");
  ASSERT_TRUE(out[1].has_request_body());
  EXPECT_EQ(out[1].request_body().response().body_mutation().streamed_response().body(),
            "{\"model\": ");
  EXPECT_EQ(x.destination(), "10.0.0.7:8000");
  // The response path goes on as on_request's.
  auto response = x.on_message(early);
  ASSERT_TRUE(response) << response.error();
  ASSERT_EQ(response->responses.size(), 1u);
  EXPECT_TRUE(response->responses[0].has_response_headers());
  x.end();
  ASSERT_EQ(picker.settled.size(), 1u);
}

// A refused pick handed over: the ImmediateResponse, and nothing to settle.
TEST(EppExchange, TheAsynchronousFormAnswersARefusalWithAnImmediateResponse) {
  FakePicker picker;
  picker.refusal = io::HttpResponse{429, "application/json", {}, "{}", {}};
  Exchange x(picker, 1 << 20);
  auto step = x.on_message(headers(/*eos=*/true));
  ASSERT_TRUE(step) << step.error();
  ASSERT_TRUE(step->pick.has_value());
  EXPECT_TRUE(step->responses.empty());
  std::vector<pb::ProcessingResponse> out = x.on_pick(picker.pick(std::move(*step->pick), kNever));
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(out[0].has_immediate_response());
  EXPECT_EQ(static_cast<int>(out[0].immediate_response().status().code()), 429);
  x.end();
  EXPECT_TRUE(picker.settled.empty());
}

TEST(EppExchange, StreamPassesThroughWithoutTheGatewaysUsageChunkAndSettlesItsUsage) {
  FakePicker picker;
  Exchange x(picker, 1 << 20);
  ASSERT_TRUE(x.on_request(headers(), kNever));
  ASSERT_TRUE(x.on_request(body("{}", true), kNever));
  pb::ProcessingRequest h;
  core_pb::HeaderMap* m = h.mutable_response_headers()->mutable_headers();
  core_pb::HeaderValue* s = m->add_headers();
  s->set_key(":status");
  s->set_raw_value("200");
  core_pb::HeaderValue* ct = m->add_headers();
  ct->set_key("content-type");
  ct->set_raw_value("text/event-stream");
  auto served = (*h.mutable_metadata_context()->mutable_filter_metadata())[std::string("envoy.lb")]
                    .mutable_fields();
  (*served)[std::string("x-gateway-destination-endpoint-served")].set_string_value("10.0.0.7:8000");
  auto r = x.on_request(h, kNever);
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_TRUE((*r)[0].has_response_headers());
  EXPECT_EQ(x.served(), "10.0.0.7:8000");

  const std::string token = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n";
  const std::string usage =
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\n";
  const std::string all = token + usage + "data: [DONE]\n\n";
  std::string passed;
  for (size_t at = 0; at < all.size(); at += 7) {
    pb::ProcessingRequest c;
    c.mutable_response_body()->set_body(all.substr(at, 7));
    c.mutable_response_body()->set_end_of_stream(at + 7 >= all.size());
    auto out = x.on_request(c, kNever);
    ASSERT_TRUE(out) << out.error();
    ASSERT_EQ(out->size(), 1u);
    passed += (*out)[0].response_body().response().body_mutation().streamed_response().body();
  }
  EXPECT_EQ(passed, token + "data: [DONE]\n\n");
  ASSERT_EQ(picker.settled.size(), 1u);
  EXPECT_EQ(picker.settled[0].status, 200);
  EXPECT_TRUE(picker.settled[0].usage.seen);
  EXPECT_EQ(picker.settled[0].usage.prompt_tokens, 3u);
  EXPECT_EQ(picker.settled[0].usage.completion_tokens, 1u);
}

// Response headers (status 200) whose envoy.lb metadata says `served` served the answer.
pb::ProcessingRequest response_served_by(const std::string& served) {
  pb::ProcessingRequest h;
  core_pb::HeaderValue* s = h.mutable_response_headers()->mutable_headers()->add_headers();
  s->set_key(":status");
  s->set_raw_value("200");
  h.mutable_response_headers()->set_end_of_stream(true);
  auto* lb = (*h.mutable_metadata_context()->mutable_filter_metadata())[std::string("envoy.lb")]
                 .mutable_fields();
  (*lb)[std::string("x-gateway-destination-endpoint-served")].set_string_value(served);
  return h;
}

TEST(EppExchange, AFallbackThatServedIsToldToThePickerBeforeTheAnswerSettles) {
  FakePicker picker;
  Exchange x(picker, ExchangeOptions{.max_body_bytes = 1 << 20, .fallbacks = 1});
  ASSERT_TRUE(x.on_request(headers(), kNever));
  ASSERT_TRUE(x.on_request(body("{}", true), kNever));
  auto r = x.on_request(response_served_by("10.0.0.8:8000"), kNever);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(x.served(), "10.0.0.8:8000");
  EXPECT_EQ(x.destination(), "10.0.0.7:8000");  // what was picked
  ASSERT_EQ(picker.served_by, std::vector<std::string>{"10.0.0.8:8000"});
  // Settled after (the headers ended the answer): the load was moved first.
  ASSERT_EQ(picker.settled.size(), 1u);

  // The pick served it: nothing to move.
  FakePicker same;
  Exchange y(same, 1 << 20);
  ASSERT_TRUE(y.on_request(headers(), kNever));
  ASSERT_TRUE(y.on_request(body("{}", true), kNever));
  ASSERT_TRUE(y.on_request(response_served_by("10.0.0.7:8000"), kNever));
  EXPECT_TRUE(same.served_by.empty());
  EXPECT_EQ(same.settled.size(), 1u);
}

TEST(EppExchange, APickWhoseAnswerNeverEndsIsSettledAsAClientThatLeft) {
  FakePicker picker;
  {
    Exchange x(picker, 1 << 20);
    ASSERT_TRUE(x.on_request(headers(), kNever));
    ASSERT_TRUE(x.on_request(body("{}", true), kNever));
  }
  ASSERT_EQ(picker.settled.size(), 1u);
  EXPECT_EQ(picker.settled[0].status, 0);
}

// The whole answer `answer` (status 200, JSON) through a picked exchange, in two chunks.
void answer_whole(Exchange& x, const std::string& answer) {
  pb::ProcessingRequest h;
  core_pb::HeaderValue* s = h.mutable_response_headers()->mutable_headers()->add_headers();
  s->set_key(":status");
  s->set_raw_value("200");
  ASSERT_TRUE(x.on_request(h, kNever));
  const size_t half = answer.size() / 2;
  for (int i = 0; i < 2; ++i) {
    pb::ProcessingRequest c;
    c.mutable_response_body()->set_body(i == 0 ? answer.substr(0, half) : answer.substr(half));
    c.mutable_response_body()->set_end_of_stream(i == 1);
    auto out = x.on_request(c, kNever);
    ASSERT_TRUE(out) << out.error();
  }
}

TEST(EppExchange, AResponsesAnswerSettlesWithItsIdForTheEndpointThatHoldsIt) {
  FakePicker picker;
  picker.dialect = openai::Dialect::kResponses;
  picker.stream = false;
  Exchange x(picker, 1 << 20);
  ASSERT_TRUE(x.on_request(headers(), kNever));
  ASSERT_TRUE(x.on_request(body("{}", true), kNever));
  answer_whole(x, R"({"id":"resp_42","object":"response","status":"completed",)"
                  R"("usage":{"input_tokens":5,"output_tokens":2,"total_tokens":7}})");
  ASSERT_EQ(picker.settled.size(), 1u);
  EXPECT_EQ(picker.settled[0].status, 200);
  EXPECT_EQ(picker.settled[0].response_id, "resp_42");
}

TEST(EppExchange, ARelayedAnswerPassesWithoutUsage) {
  FakePicker picker;
  picker.kind = gateway::PickKind::kRelay;
  picker.stream = false;
  Exchange x(picker, 1 << 20);
  ASSERT_TRUE(x.on_request(headers(), kNever));
  ASSERT_TRUE(x.on_request(body("{}", true), kNever));
  EXPECT_EQ(x.destination(), "10.0.0.7:8000");
  answer_whole(x, R"({"tokens":[1,2,3],"count":3,"usage":{"prompt_tokens":3}})");
  ASSERT_EQ(picker.settled.size(), 1u);
  EXPECT_EQ(picker.settled[0].status, 200);
  EXPECT_FALSE(picker.settled[0].usage.seen);
  EXPECT_FALSE(picker.settled[0].ttft.has_value());
}

}  // namespace exchange_test
}  // namespace kvgate::epp
