#include "core/trace/otlp_json.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <limits>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

namespace kvgate::trace {
// Named after the file, not anonymous: the tests compile in unity batches.
namespace otlp_json_test {

// The keys of a JSON object, to compare with the schema's field names exactly.
std::set<std::string> keys(const boost::json::value& v) {
  std::set<std::string> out;
  for (const auto& kv : v.as_object()) out.insert(std::string(kv.key()));
  return out;
}

using Names = std::set<std::string>;

const boost::json::value& first_span(const boost::json::value& request) {
  return request.at("resourceSpans").at(0).at("scopeSpans").at(0).at("spans").at(0);
}

Span sample_span() {
  Span s;
  s.trace_id = {0x4bf92f3577b34da6ULL, 0xa3ce929d0e0e4736ULL};
  s.span_id = 0x00f067aa0ba902b7ULL;
  s.parent_span_id = 0x1122334455667788ULL;
  s.name = "kvgate \"request\"";
  s.kind = SpanKind::kServer;
  s.start_unix_nanos = 1'700'000'000'000'000'000;
  s.end_unix_nanos = 1'700'000'000'001'000'000;
  s.attributes = {{"kvgate.endpoint", std::string("http://127.0.0.1:8001")},
                  {"kvgate.matched_blocks", int64_t{12}},
                  {"kvgate.cost", 0.5},
                  {"kvgate.retry", true}};
  s.status = SpanStatus::kError;
  s.status_message = "upstream failed";
  s.trace_state = "vendor=abc";
  s.trace_flags = kSampledFlag;
  s.parent_is_remote = true;
  return s;
}

// Every object's field names are exactly opentelemetry-proto's (trace.proto, common.proto,
// resource.proto), in the JSON encoding's lowerCamelCase.
TEST(OtlpJson, ExactFieldNamesOfTheSchema) {
  const Span spans[] = {sample_span()};
  const boost::json::value v = boost::json::parse(otlp_json(spans, "kvgate-test"));
  EXPECT_EQ(keys(v), Names{"resourceSpans"});
  const auto& rs = v.at("resourceSpans").at(0);
  EXPECT_EQ(keys(rs), (Names{"resource", "scopeSpans"}));
  EXPECT_EQ(keys(rs.at("resource")), Names{"attributes"});
  EXPECT_EQ(keys(rs.at("resource").at("attributes").at(0)), (Names{"key", "value"}));
  EXPECT_EQ(keys(rs.at("resource").at("attributes").at(0).at("value")), Names{"stringValue"});
  const auto& ss = rs.at("scopeSpans").at(0);
  EXPECT_EQ(keys(ss), (Names{"scope", "spans"}));
  EXPECT_EQ(keys(ss.at("scope")), Names{"name"});
  const auto& s = ss.at("spans").at(0);
  EXPECT_EQ(keys(s),
            (Names{"traceId", "spanId", "traceState", "parentSpanId", "flags", "name", "kind",
                   "startTimeUnixNano", "endTimeUnixNano", "attributes", "status"}));
  for (const auto& a : s.at("attributes").as_array()) {
    EXPECT_EQ(keys(a), (Names{"key", "value"}));
  }
  const auto& attrs = s.at("attributes").as_array();
  EXPECT_EQ(keys(attrs[0].at("value")), Names{"stringValue"});
  EXPECT_EQ(keys(attrs[1].at("value")), Names{"intValue"});
  EXPECT_EQ(keys(attrs[2].at("value")), Names{"doubleValue"});
  EXPECT_EQ(keys(attrs[3].at("value")), Names{"boolValue"});
  EXPECT_EQ(keys(s.at("status")), (Names{"code", "message"}));

  // A root span with no tracestate, unset status: the fields at their default are left out.
  Span root = sample_span();
  root.parent_span_id = 0;
  root.parent_is_remote = false;
  root.trace_state.clear();
  root.status = SpanStatus::kUnset;
  root.status_message.clear();
  root.attributes.clear();
  const Span roots[] = {root};
  const boost::json::value r = boost::json::parse(otlp_json(roots, "x"));
  EXPECT_EQ(keys(first_span(r)), (Names{"traceId", "spanId", "flags", "name", "kind",
                                        "startTimeUnixNano", "endTimeUnixNano", "attributes"}));
}

// Span.flags (fixed32, a JSON number): the W3C flags in bits 0-7, bit 8 "remoteness is
// known", bit 9 "the parent is remote".
TEST(OtlpJson, FlagsCarryTheTraceFlagsAndWhetherTheParentIsRemote) {
  Span s = sample_span();
  const Span remote[] = {s};
  EXPECT_EQ(first_span(boost::json::parse(otlp_json(remote, "x"))).at("flags").as_int64(), 0x301);
  s.parent_is_remote = false;
  s.trace_flags = 0;
  const Span local[] = {s};
  EXPECT_EQ(first_span(boost::json::parse(otlp_json(local, "x"))).at("flags").as_int64(), 0x100);
  EXPECT_EQ(first_span(boost::json::parse(otlp_json(remote, "x"))).at("traceState").as_string(),
            "vendor=abc");
}

// proto3 JSON: a double that is not finite is a string; strings are valid UTF-8 (a
// collector refuses a request that is not, so an invalid byte goes as U+FFFD).
TEST(OtlpJson, NonFiniteDoublesAndInvalidUtf8) {
  Span s = sample_span();
  s.attributes = {{"nan", std::numeric_limits<double>::quiet_NaN()},
                  {"inf", std::numeric_limits<double>::infinity()},
                  {"minus_inf", -std::numeric_limits<double>::infinity()},
                  {"valid", std::string("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80")},
                  {"invalid", std::string("a\xff b\xe2\x82 c\xed\xa0\x80 d\xc0\xaf")}};
  const Span spans[] = {s};
  // boost::json::parse rejects invalid UTF-8: that it parses is the first check.
  const boost::json::value v = boost::json::parse(otlp_json(spans, "x"));
  const auto& attrs = first_span(v).at("attributes").as_array();
  ASSERT_EQ(attrs.size(), 5u);
  EXPECT_EQ(attrs[0].at("value").at("doubleValue").as_string(), "NaN");
  EXPECT_EQ(attrs[1].at("value").at("doubleValue").as_string(), "Infinity");
  EXPECT_EQ(attrs[2].at("value").at("doubleValue").as_string(), "-Infinity");
  EXPECT_EQ(attrs[3].at("value").at("stringValue").as_string(),
            "h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80");
  const std::string r = "\xef\xbf\xbd";  // U+FFFD
  EXPECT_EQ(attrs[4].at("value").at("stringValue").as_string(),
            "a" + r + " b" + r + r + " c" + r + r + r + " d" + r + r);
}

TEST(OtlpJson, FieldNamesAndEncodings) {
  const Span spans[] = {sample_span()};
  const boost::json::value v = boost::json::parse(otlp_json(spans, "kvgate-test"));
  const auto& rs = v.at("resourceSpans").at(0);
  const auto& res_attr = rs.at("resource").at("attributes").at(0);
  EXPECT_EQ(res_attr.at("key").as_string(), "service.name");
  EXPECT_EQ(res_attr.at("value").at("stringValue").as_string(), "kvgate-test");
  const auto& ss = rs.at("scopeSpans").at(0);
  EXPECT_EQ(ss.at("scope").at("name").as_string(), "kvgate");
  const auto& s = ss.at("spans").at(0);
  EXPECT_EQ(s.at("traceId").as_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(s.at("spanId").as_string(), "00f067aa0ba902b7");
  EXPECT_EQ(s.at("parentSpanId").as_string(), "1122334455667788");
  EXPECT_EQ(s.at("name").as_string(), "kvgate \"request\"");
  EXPECT_EQ(s.at("kind").as_int64(), 2);
  EXPECT_EQ(s.at("startTimeUnixNano").as_string(), "1700000000000000000");
  EXPECT_EQ(s.at("endTimeUnixNano").as_string(), "1700000000001000000");
  const auto& attrs = s.at("attributes").as_array();
  ASSERT_EQ(attrs.size(), 4u);
  EXPECT_EQ(attrs[0].at("value").at("stringValue").as_string(), "http://127.0.0.1:8001");
  EXPECT_EQ(attrs[1].at("value").at("intValue").as_string(), "12");
  EXPECT_DOUBLE_EQ(attrs[2].at("value").at("doubleValue").to_number<double>(), 0.5);
  EXPECT_EQ(attrs[3].at("value").at("boolValue").as_bool(), true);
  EXPECT_EQ(s.at("status").at("code").as_int64(), 2);
  EXPECT_EQ(s.at("status").at("message").as_string(), "upstream failed");
}

TEST(OtlpJson, RootSpanHasNoParentField) {
  Span s = sample_span();
  s.parent_span_id = 0;
  s.kind = SpanKind::kClient;
  s.status = SpanStatus::kUnset;
  s.status_message.clear();
  const Span spans[] = {s, s};
  const boost::json::value v = boost::json::parse(otlp_json(spans, "x"));
  const auto& out = v.at("resourceSpans").at(0).at("scopeSpans").at(0).at("spans").as_array();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].as_object().if_contains("parentSpanId"), nullptr);
  EXPECT_EQ(out[0].at("kind").as_int64(), 3);
  EXPECT_EQ(out[0].as_object().if_contains("status"), nullptr);  // UNSET
}

// Every byte that needs a look (a quote, a backslash, a control byte, UTF-8 valid or not)
// at every offset of strings longer and shorter than the encoder's 8-byte scan: the JSON
// parses back to the text, an invalid byte as U+FFFD.
TEST(OtlpJson, EscapesAtEveryOffsetOfTheWordScan) {
  const std::pair<std::string, std::string> kCases[] = {{"\"", "\""},
                                                        {"\\", "\\"},
                                                        {"\n", "\n"},
                                                        {"\x01", "\x01"},
                                                        {"\x1f", "\x1f"},
                                                        {"\x7f", "\x7f"},
                                                        {"\xc3\xa9", "\xc3\xa9"},
                                                        {"\xff", "\xef\xbf\xbd"},
                                                        {"\xe2\x82", "\xef\xbf\xbd\xef\xbf\xbd"}};
  for (const auto& [special, decoded] : kCases) {
    for (size_t before = 0; before < 20; ++before) {
      for (size_t after : {size_t{0}, size_t{3}, size_t{11}}) {
        Span s = sample_span();
        s.name = std::string(before, 'a') + special + std::string(after, 'z');
        const boost::json::value v = boost::json::parse(otlp_json({&s, 1}, "kvgate"));
        EXPECT_EQ(std::string(first_span(v).at("name").as_string()),
                  std::string(before, 'a') + decoded + std::string(after, 'z'))
            << "before " << before << " after " << after;
      }
    }
  }
}

TEST(OtlpJson, NoSpansIsStillValid) {
  const boost::json::value v = boost::json::parse(otlp_json({}, "x"));
  EXPECT_TRUE(v.at("resourceSpans").at(0).at("scopeSpans").at(0).at("spans").as_array().empty());
}

// The spans a RequestSpans stands for, as Span records, by docs/tracing.md's rules: the
// reference its own encoding must match byte for byte.
std::vector<Span> as_spans(const RequestSpans& r) {
  const auto text = [&r](TextRef ref) { return std::string(r.text.view(ref)); };
  std::vector<Span> out;
  for (size_t i = 0; i < r.hops.size(); ++i) {
    const HopSpan& h = r.hops[i];
    Span s;
    s.trace_id = r.trace_id;
    s.span_id = h.span_id;
    s.parent_span_id = r.span_id;
    s.trace_state = text(r.trace_state);
    s.trace_flags = r.trace_flags;
    s.parent_is_remote = false;
    s.name = std::string(h.name);
    s.kind = SpanKind::kClient;
    s.start_unix_nanos = h.start_unix_nanos;
    s.end_unix_nanos = h.end_unix_nanos;
    const ServerAddress server = server_address(r.text.view(h.endpoint));
    s.attributes.push_back({"server.address", std::string(server.host)});
    if (server.port != 0) s.attributes.push_back({"server.port", int64_t{server.port}});
    if (h.attempt != 0) s.attributes.push_back({"kvgate.attempt", int64_t{h.attempt}});
    if (h.status != 0) s.attributes.push_back({"http.response.status_code", int64_t{h.status}});
    if (h.status <= 0 || h.status >= 500) {
      s.status = SpanStatus::kError;
      s.status_message = h.status == 0 ? text(h.error) : "HTTP " + std::to_string(h.status);
    }
    out.push_back(std::move(s));
  }
  Span s;
  s.trace_id = r.trace_id;
  s.span_id = r.span_id;
  s.parent_span_id = r.parent_span_id;
  s.trace_state = text(r.trace_state);
  s.trace_flags = r.trace_flags;
  s.parent_is_remote = r.parent_span_id != 0;
  s.name = "kvgate.request";
  s.kind = SpanKind::kServer;
  s.start_unix_nanos = r.start_unix_nanos;
  s.end_unix_nanos = r.end_unix_nanos;
  if (r.model) s.attributes.push_back({"kvgate.model", text(*r.model)});
  if (r.pool) s.attributes.push_back({"kvgate.pool", text(*r.pool)});
  if (r.path) s.attributes.push_back({"url.path", text(*r.path)});
  if (r.routing) {
    s.attributes.push_back({"kvgate.endpoint", text(r.endpoint)});
    s.attributes.push_back({"kvgate.route_us", r.routing->route_us});
    if (r.routing->prompt_blocks != 0) {
      s.attributes.push_back({"kvgate.matched_blocks", r.routing->matched_blocks});
      s.attributes.push_back({"kvgate.cached_blocks", r.routing->cached_blocks});
      s.attributes.push_back({"kvgate.prompt_blocks", r.routing->prompt_blocks});
    }
    s.attributes.push_back({"kvgate.prefill_tokens", r.routing->prefill_tokens});
    s.attributes.push_back({"kvgate.cost", r.routing->cost});
    if (r.routing->queued_us != 0) {
      s.attributes.push_back({"kvgate.queued_us", r.routing->queued_us});
    }
    if (r.routing->disaggregated) s.attributes.push_back({"kvgate.disaggregated", true});
  }
  if (r.http_status != 0) {
    s.attributes.push_back({"http.response.status_code", int64_t{r.http_status}});
  }
  s.attributes.push_back({"kvgate.hops", int64_t{r.hops_started}});
  if (r.http_status == 0 || r.http_status >= 500) {
    s.status = SpanStatus::kError;
    s.status_message = r.http_status == 0 ? "no answer" : "HTTP " + std::to_string(r.http_status);
  }
  out.push_back(std::move(s));
  return out;
}

// A routed request continuing a client's trace: a hop the engine refused, one that failed
// without an answer, one that answered; a hop that never ended counts in kvgate.hops.
// Filled into `r`, new or cleared.
void fill_routed(RequestSpans& r) {
  r.trace_id = {0x4bf92f3577b34da6ULL, 0xa3ce929d0e0e4736ULL};
  r.span_id = 0x00f067aa0ba902b7ULL;
  r.parent_span_id = 0x1122334455667788ULL;
  r.trace_flags = kSampledFlag;
  r.trace_state = r.text.add("vendor=abc,other=\"q\"");
  r.start_unix_nanos = 1'700'000'000'000'000'000;
  r.end_unix_nanos = 1'700'000'000'001'000'000;
  r.model = r.text.add("meta-llama/Llama-3.1-8B-Instruct");
  r.pool = r.text.add("chat");
  r.path = r.text.add("/v1/chat/completions?x=\xff");  // an invalid byte: U+FFFD in both
  r.endpoint = r.text.add("http://127.0.0.1:8001");
  r.routing = Routing{.route_us = 42,
                      .matched_blocks = 12,
                      .cached_blocks = 10,
                      .prompt_blocks = 20,
                      .prefill_tokens = 128,
                      .cost = 0.1,
                      .queued_us = 250,
                      .disaggregated = true};
  r.http_status = 200;
  r.hops_started = 4;
  const int32_t statuses[] = {503, 0, 200};
  for (int32_t i = 0; i < 3; ++i) {
    r.hops.push_back({.span_id = 0xa0b1c2d3e4f50617ULL + static_cast<uint64_t>(i),
                      .name = i == 2 ? "kvgate.decode" : "kvgate.upstream",
                      .endpoint = i == 0 ? r.endpoint : r.text.add("http://10.0.0.7:8000#dp1"),
                      .start_unix_nanos = 1'700'000'000'000'100'000 + i,
                      .end_unix_nanos = 1'700'000'000'000'200'000 + i,
                      .attempt = i,
                      .status = statuses[i],
                      .error = statuses[i] == 0 ? r.text.add("connect: refused") : TextRef{}});
  }
}

RequestSpans routed_request() {
  RequestSpans r;
  fill_routed(r);
  return r;
}

// A stored response's fetch: kvgate started the trace, no model, no routing, no answer.
// Filled into `r`, new or cleared.
void fill_stored(RequestSpans& r) {
  r.trace_id = {1, 2};
  r.span_id = 3;
  r.trace_flags = kSampledFlag;
  r.start_unix_nanos = 5;
  r.end_unix_nanos = 7;
  r.pool = r.text.add("chat");
  r.path = r.text.add("/v1/responses/resp_1");
  r.hops_started = 1;
  r.hops.push_back({.span_id = 4,
                    .name = "kvgate.stored",
                    .endpoint = r.text.add("http://127.0.0.1:8002"),
                    .start_unix_nanos = 6,
                    .end_unix_nanos = 6,
                    .attempt = 0,
                    .status = 502});
}

RequestSpans stored_request() {
  RequestSpans r;
  fill_stored(r);
  return r;
}

std::vector<Span> joined(std::vector<Span> a, const std::vector<Span>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Whole records as one batch: their runs for the records' encoder, and the Spans they
// stand for, for the reference.
struct Batch {
  std::vector<SpanRun> runs;
  std::vector<Span> spans;
};
Batch batch_of(const std::vector<RequestSpans>& records) {
  Batch b;
  for (const RequestSpans& r : records) {
    b.spans = joined(std::move(b.spans), as_spans(r));
    b.runs.push_back({&r, 0, r.span_count()});
  }
  return b;
}

// The gateway's compact record encodes byte for byte as the Spans it stands for, in runs
// that split a record or not, appended after what the buffer held.
TEST(OtlpJson, RequestSpansEncodeExactlyAsTheirSpans) {
  const RequestSpans a = routed_request();
  const RequestSpans b = stored_request();
  ASSERT_EQ(a.span_count(), 4u);
  ASSERT_EQ(b.span_count(), 2u);
  const std::vector<Span> spans = joined(as_spans(a), as_spans(b));
  const std::string expected = otlp_json(spans, "kvgate");

  std::string out;
  const SpanRun whole[] = {{&a, 0, 4}, {&b, 0, 2}};
  append_otlp_json(out, whole, "kvgate");
  EXPECT_EQ(out, expected);

  // The same spans in two requests, the first record split between them.
  out = "kept";
  const SpanRun head[] = {{&a, 0, 3}};
  append_otlp_json(out, head, "kvgate");
  EXPECT_EQ(out, "kept" + otlp_json(std::span<const Span>(spans).first(3), "kvgate"));
  out.clear();
  const SpanRun rest[] = {{&a, 3, 1}, {&b, 0, 2}};
  append_otlp_json(out, rest, "kvgate");
  EXPECT_EQ(out, otlp_json(std::span<const Span>(spans).subspan(3), "kvgate"));

  // It parses, and the server span carries the documented attributes in their order.
  const boost::json::value v = boost::json::parse(expected);
  const auto& out_spans = v.at("resourceSpans").at(0).at("scopeSpans").at(0).at("spans");
  ASSERT_EQ(out_spans.as_array().size(), 6u);
  std::vector<std::string> keys_in_order;
  for (const auto& attr : out_spans.at(3).at("attributes").as_array()) {
    keys_in_order.emplace_back(attr.at("key").as_string());
  }
  EXPECT_EQ(keys_in_order,
            (std::vector<std::string>{
                "kvgate.model", "kvgate.pool", "url.path", "kvgate.endpoint", "kvgate.route_us",
                "kvgate.matched_blocks", "kvgate.cached_blocks", "kvgate.prompt_blocks",
                "kvgate.prefill_tokens", "kvgate.cost", "kvgate.queued_us", "kvgate.disaggregated",
                "http.response.status_code", "kvgate.hops"}));
  EXPECT_EQ(out_spans.at(1).at("status").at("message").as_string(), "connect: refused");
  EXPECT_EQ(out_spans.at(4).at("status").at("message").as_string(), "HTTP 502");
  EXPECT_EQ(out_spans.at(5).at("status").at("message").as_string(), "no answer");
}

// What the decision did not have is left out: a round-robin pool's unkeyed prompt has no
// prefix terms, a request that did not wait no kvgate.queued_us, an aggregated one no
// kvgate.disaggregated; the same bytes as the reference.
TEST(OtlpJson, AttributesTheDecisionDidNotHaveAreLeftOut) {
  RequestSpans r = routed_request();
  r.routing->prompt_blocks = 0;
  r.routing->matched_blocks = 0;
  r.routing->cached_blocks = 0;
  r.routing->queued_us = 0;
  r.routing->disaggregated = false;
  std::string scratch;
  const SpanRun runs[] = {{&r, 0, r.span_count()}};
  const std::string_view json = write_otlp_json(scratch, runs, "kvgate");
  EXPECT_EQ(json, otlp_json(as_spans(r), "kvgate"));
  const boost::json::value v = boost::json::parse(json);
  const auto& server = v.at("resourceSpans").at(0).at("scopeSpans").at(0).at("spans").at(3);
  std::vector<std::string> keys;
  for (const auto& attr : server.at("attributes").as_array()) {
    keys.emplace_back(attr.at("key").as_string());
  }
  EXPECT_EQ(keys,
            (std::vector<std::string>{"kvgate.model", "kvgate.pool", "url.path", "kvgate.endpoint",
                                      "kvgate.route_us", "kvgate.prefill_tokens", "kvgate.cost",
                                      "http.response.status_code", "kvgate.hops"}));
}

// Times in one batch: the records' encoder keeps the last second's digits (json_cursor.h,
// UnixNanosWriter); across second boundaries, at a second's first and last nanosecond,
// nanoseconds with leading zeros, times below 1 s between them, in one request and split
// between two: the same bytes as the reference.
TEST(OtlpJson, RequestSpansTimesAcrossSecondsAsTheirSpans) {
  constexpr int64_t k1e9 = 1'000'000'000;
  const int64_t base = 1'700'000'000 * k1e9;
  std::vector<RequestSpans> records;
  for (int64_t i = 0; i < 40; ++i) {
    if (i % 7 == 3) {
      records.push_back(stored_request());  // times 5, 6, 7: below 1 s
      continue;
    }
    RequestSpans r = routed_request();
    r.start_unix_nanos = base + i * 337'000'001 + (i % 5 == 0 ? k1e9 - 1 - i : i);
    r.end_unix_nanos = r.start_unix_nanos + (i % 3) * 999'999'999 + 1;
    if (i % 11 == 0) r.end_unix_nanos = (base / k1e9 + i) * k1e9;  // a second's first
    records.push_back(r);
  }
  const auto [runs, spans] = batch_of(records);
  std::string scratch;
  EXPECT_EQ(write_otlp_json(scratch, runs, "kvgate"), otlp_json(spans, "kvgate"));
  // Split in two requests (a new writer each, over the same buffer).
  const size_t half = runs.size() / 2;
  size_t first_spans = 0;
  for (size_t i = 0; i < half; ++i) first_spans += runs[i].count;
  EXPECT_EQ(write_otlp_json(scratch, std::span<const SpanRun>(runs).first(half), "kvgate"),
            otlp_json(std::span<const Span>(spans).first(first_spans), "kvgate"));
  EXPECT_EQ(write_otlp_json(scratch, std::span<const SpanRun>(runs).subspan(half), "kvgate"),
            otlp_json(std::span<const Span>(spans).subspan(first_spans), "kvgate"));
}

// Past its inline room (text, hops) a record keeps everything, on the heap.
TEST(OtlpJson, RequestSpansBeyondTheirInlineRoom) {
  RequestSpans r = stored_request();
  const std::string long_path = "/v1/responses/" + std::string(300, 'r');
  r.path = r.text.add(long_path);
  for (int32_t i = 1; i < 7; ++i) {
    r.hops.push_back({.span_id = 100 + static_cast<uint64_t>(i),
                      .name = "kvgate.upstream",
                      .endpoint = r.text.add("http://10.0.0." + std::to_string(i) + ":8000"),
                      .start_unix_nanos = i,
                      .end_unix_nanos = i + 1,
                      .attempt = i,
                      .status = 200});
  }
  r.hops_started = 7;
  EXPECT_EQ(r.text.view(*r.path), long_path);
  EXPECT_EQ(r.text.view(*r.pool), "chat");
  EXPECT_EQ(r.hops.size(), 7u);
  EXPECT_EQ(r.text.view(r.hops[6].endpoint), "http://10.0.0.6:8000");
  std::string out;
  const SpanRun runs[] = {{&r, 0, r.span_count()}};
  append_otlp_json(out, runs, "kvgate");
  EXPECT_EQ(out, otlp_json(as_spans(r), "kvgate"));
  // A copy reads the same.
  const RequestSpans copy = r;
  EXPECT_EQ(copy.text.view(*copy.path), long_path);
}

// The exporter's form: the request written over a scratch buffer kept between batches,
// which is never shrunk; what it returns is the request alone.
TEST(OtlpJson, WrittenOverAScratchBuffer) {
  const RequestSpans a = routed_request();
  const RequestSpans b = stored_request();
  const std::vector<Span> spans = joined(as_spans(a), as_spans(b));
  std::string scratch;
  const SpanRun whole[] = {{&a, 0, 4}, {&b, 0, 2}};
  EXPECT_EQ(write_otlp_json(scratch, whole, "kvgate"), otlp_json(spans, "kvgate"));
  const size_t grown = scratch.size();
  // A smaller batch after it: the buffer keeps its size, the view is the new request.
  const SpanRun small[] = {{&b, 1, 1}};
  const std::string_view json = write_otlp_json(scratch, small, "kvgate");
  EXPECT_EQ(json, otlp_json(std::span<const Span>(spans).subspan(5), "kvgate"));
  EXPECT_EQ(json.data(), scratch.data());
  EXPECT_EQ(scratch.size(), grown);
  // Empty, and into a buffer that held other text.
  scratch.assign(3, 'x');
  EXPECT_EQ(write_otlp_json(scratch, {}, "svc"), otlp_json({}, "svc"));
}

// The records' strings (tracestate, model, pool, path, endpoints, a hop's error) with
// every byte that needs a look at every offset of the 8-byte scan: the same bytes as the
// reference. (A hop's name is a literal that needs no escape: HopSpan::name.)
TEST(OtlpJson, RecordStringsEscapeAsTheReference) {
  const std::string kSpecials[] = {"\"",   "\\",       "\n",   "\x01",     "\x1f",
                                   "\x7f", "\xc3\xa9", "\xff", "\xe2\x82", "\xf0\x9f\x98\x80"};
  for (const std::string& special : kSpecials) {
    for (size_t before = 0; before < 18; ++before) {
      for (size_t after : {size_t{0}, size_t{5}, size_t{9}}) {
        const std::string text = std::string(before, 'a') + special + std::string(after, 'z');
        RequestSpans r = routed_request();
        r.trace_state = r.text.add(text);
        r.model = r.text.add(text);
        r.pool = r.text.add(text);
        r.path = r.text.add(text);
        r.endpoint = r.text.add(text);
        r.hops.push_back({.span_id = 99,
                          .name = "kvgate.upstream",
                          .endpoint = r.text.add(text),
                          .attempt = 3,
                          .error = r.text.add(text)});
        std::string out;
        const SpanRun runs[] = {{&r, 0, r.span_count()}};
        append_otlp_json(out, runs, text);
        EXPECT_EQ(out, otlp_json(as_spans(r), text)) << "before " << before << " after " << after;
      }
    }
  }
}

// Many records in one batch whose strings recur (the encoder copies a string that is the
// same as the last one of its kind and needed no escape, without a look): the same text
// again, one that differs by a byte or in length, one that needs escapes twice in a row,
// an empty one, and the endpoints of the hops and the server span alternating: the same
// bytes as the reference.
TEST(OtlpJson, RecurringRecordStringsAsTheReference) {
  const std::vector<std::string> texts = {
      "chat-model", "chat-model", "chat-modem", "chat-model",  "chat-mode",   "",
      "",           "say \"hi\"", "say \"hi\"", "caf\xc3\xa9", "caf\xc3\xa9", "bad\xff",
      "bad\xff",    "chat-model", "tab\there",  "chat-model"};
  std::vector<RequestSpans> records;
  records.reserve(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    RequestSpans r = routed_request();
    const std::string& t = texts[i];
    r.model = r.text.add(t);
    r.pool = r.text.add(texts[(i + 3) % texts.size()]);
    r.path = r.text.add(i % 2 == 0 ? "/v1/chat/completions" : t);
    const std::string endpoint = "http://10.0.0." + std::to_string(i % 3) + ":8000";
    r.endpoint = r.text.add(endpoint);
    r.hops.push_back({.span_id = 500 + i,
                      .name = "kvgate.upstream",
                      .endpoint = r.text.add(i % 4 == 0 ? t : endpoint),
                      .attempt = 0,
                      .status = 200});
    records.push_back(std::move(r));
  }
  const auto [runs, spans] = batch_of(records);
  std::string out;
  append_otlp_json(out, runs, "kvgate");
  EXPECT_EQ(out, otlp_json(spans, "kvgate"));
}

// Hop names, copied as they are (no escape needed: HopSpan::name): the gateway's, and
// plain text of every length, the edges of what needs no escape (space, '~', 0x7f)
// included: the same bytes as the reference, which escapes what needs it.
TEST(OtlpJson, HopNamesAsTheReference) {
  std::vector<std::string> names = {
      "kvgate.upstream",  "kvgate.decode", "kvgate.prefill", "kvgate.tokenize",
      "kvgate.migration", "kvgate.relay",  "kvgate.stored",  ""};
  for (size_t n = 1; n <= 40; ++n) {
    std::string name;
    for (size_t i = 0; i < n; ++i) {
      const auto c = static_cast<char>(0x20 + (i * 7 + n) % 0x60);  // 0x20 to 0x7f
      name += c == '"' || c == '\\' ? '_' : c;
    }
    names.push_back(name);
  }
  names.push_back(std::string(17, ' ') + "~\x7f");
  for (const std::string& name : names) {
    RequestSpans r = stored_request();
    r.hops.push_back({.span_id = 99,
                      .name = name,
                      .endpoint = r.text.add("http://127.0.0.1:8003"),
                      .attempt = 1,
                      .status = 200});
    std::string out;
    const SpanRun runs[] = {{&r, 0, r.span_count()}};
    append_otlp_json(out, runs, "kvgate");
    EXPECT_EQ(out, otlp_json(as_spans(r), "kvgate")) << name;
  }
}

// Costs (the server span's double, kvgate.cost) written without {fmt} and with it (an
// exponent, many digits, minus zero): the same bytes as the reference.
TEST(OtlpJson, CostsAsTheReference) {
  for (const double cost : {0.0, -0.0, 1.0, -3.0, 0.1, 0.5, 123.456789, 1e-4, 9.99e-5, 1e15, 1e16,
                            1e300, -1e-300, 0.30000000000000004, 1234567.25}) {
    RequestSpans r = routed_request();
    r.routing->cost = cost;
    std::string out;
    const SpanRun runs[] = {{&r, 0, r.span_count()}};
    append_otlp_json(out, runs, "kvgate");
    EXPECT_EQ(out, otlp_json(as_spans(r), "kvgate")) << cost;
  }
}

// A hop's server.address and server.port from its endpoint's URL.
TEST(ServerAddress, HostAndPortOfAnEndpointUrl) {
  const auto is = [](std::string_view url, std::string_view host, int32_t port) {
    const ServerAddress a = server_address(url);
    EXPECT_EQ(a.host, host) << url;
    EXPECT_EQ(a.port, port) << url;
  };
  is("http://10.0.0.1:8000", "10.0.0.1", 8000);
  is("http://engine-0.engines.svc:8000/v1", "engine-0.engines.svc", 8000);
  is("https://engine.example", "engine.example", 443);
  is("http://engine/", "engine", 80);
  is("http://[::1]:9000/v1", "::1", 9000);
  is("http://[fe80::1]", "fe80::1", 80);
  is("http://user:secret@engine:81", "engine", 81);
  is("http://engine:8000?x=1", "engine", 8000);
  is("10.0.0.1:8000", "10.0.0.1", 8000);  // no scheme: the authority itself
  is("engine", "engine", 0);
  is("grpc://engine", "engine", 0);        // a scheme without a known port
  is("http://engine:70000", "engine", 0);  // not a port
  is("http://engine:80a", "engine", 0);
  is("http://engine:0", "engine", 0);
  is("http://[::1", "[::1", 0);  // an unclosed bracket: the authority as it is
  is("", "", 0);
}

// Every part of a record at its longest (all attributes, numbers at their extremes,
// strings all of bytes written 6 characters each, many hops): the same bytes as the
// reference, within the encoder's bounds (it asserts them in this build), in a buffer
// grown many times from nothing.
TEST(OtlpJson, RecordsAtTheirLongest) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int32_t kMin32 = std::numeric_limits<int32_t>::min();
  const std::string controls(300, '\x01');
  RequestSpans r;
  r.trace_id = {~0ULL, ~0ULL};
  r.span_id = ~0ULL;
  r.parent_span_id = ~0ULL;
  r.trace_flags = 0xff;
  r.trace_state = r.text.add(controls);
  r.start_unix_nanos = kMin;
  r.end_unix_nanos = kMin;
  r.model = r.text.add(controls);
  r.pool = r.text.add(controls);
  r.path = r.text.add(controls);
  r.endpoint = r.text.add(controls);
  r.routing = Routing{.route_us = kMin,
                      .matched_blocks = kMin,
                      .cached_blocks = kMin,
                      .prompt_blocks = kMin,
                      .prefill_tokens = kMin,
                      .cost = -std::numeric_limits<double>::max(),
                      .queued_us = kMin,
                      .disaggregated = false};
  r.http_status = kMin32;  // neither 0 nor 5xx: UNSET, as the reference has it
  r.hops_started = kMin32;
  const int32_t statuses[] = {0, kMin32, 599, 200};
  // Every other hop's URL with the longest port, its host an IPv6 literal's place.
  const std::string with_port = "https://[" + controls + "]:65535";
  for (int32_t i = 0; i < 8; ++i) {
    r.hops.push_back({.span_id = ~0ULL,
                      .name = "kvgate.upstream",
                      .endpoint = r.text.add(i % 2 ? with_port : controls),
                      .start_unix_nanos = kMin,
                      .end_unix_nanos = kMin,
                      .attempt = kMin32,
                      .status = statuses[i % 4],
                      .error = r.text.add(controls)});
  }
  const std::vector<Span> spans = as_spans(r);
  std::string out;
  const SpanRun runs[] = {{&r, 0, r.span_count()}};
  append_otlp_json(out, runs, controls);
  EXPECT_EQ(out, otlp_json(spans, controls));
  std::string scratch;
  EXPECT_EQ(write_otlp_json(scratch, runs, controls), out);
  // The server span with a status of its own (5xx), a NaN cost, no answer.
  r.http_status = 599;
  r.routing->cost = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(write_otlp_json(scratch, runs, controls), otlp_json(as_spans(r), controls));
  r.http_status = 0;
  r.routing->cost = -std::numeric_limits<double>::infinity();
  r.routing->disaggregated = true;
  EXPECT_EQ(write_otlp_json(scratch, runs, controls), otlp_json(as_spans(r), controls));
}

// How a record is used, for AClearedRecordIsAsNew: routed_request's or stored_request's
// fields, and past them a path of `path_bytes` (past the inline text, past what clear()
// keeps on the heap) and `more_hops` hops (past the inline ones, past what clear() keeps).
struct Use {
  bool routed = false;
  size_t path_bytes = 0;
  int32_t more_hops = 0;
};

void fill(RequestSpans& r, const Use& use) {
  if (use.routed) {
    fill_routed(r);
  } else {
    fill_stored(r);
  }
  if (use.path_bytes > 0) r.path = r.text.add("/v1/" + std::string(use.path_bytes, 'p'));
  for (int32_t i = 0; i < use.more_hops; ++i) {
    r.hops.push_back({.span_id = 500 + static_cast<uint64_t>(i),
                      .name = "kvgate.upstream",
                      .endpoint = r.text.add("http://10.0.1." + std::to_string(i) + ":8000"),
                      .start_unix_nanos = 10 + i,
                      .end_unix_nanos = 20 + i,
                      .attempt = i,
                      .status = i % 2 == 0 ? 200 : 0,
                      .error = i % 2 == 0 ? TextRef{} : r.text.add("reset by peer")});
  }
}

std::string encoded(const RequestSpans& r) {
  std::string out;
  const SpanRun runs[] = {{&r, 0, r.span_count()}};
  append_otlp_json(out, runs, "kvgate");
  return out;
}

// Every field of `r` as in a new record.
void expect_as_new(const RequestSpans& r) {
  RequestSpans fresh;  // not const: its inline text is not initialised
  EXPECT_EQ(r.trace_id, fresh.trace_id);
  EXPECT_EQ(r.span_id, fresh.span_id);
  EXPECT_EQ(r.parent_span_id, fresh.parent_span_id);
  EXPECT_EQ(r.trace_flags, fresh.trace_flags);
  EXPECT_EQ(r.trace_state.offset, 0u);
  EXPECT_EQ(r.trace_state.size, 0u);
  EXPECT_EQ(r.start_unix_nanos, fresh.start_unix_nanos);
  EXPECT_EQ(r.end_unix_nanos, fresh.end_unix_nanos);
  EXPECT_FALSE(r.model.has_value());
  EXPECT_FALSE(r.pool.has_value());
  EXPECT_FALSE(r.path.has_value());
  EXPECT_FALSE(r.routing.has_value());
  EXPECT_EQ(r.endpoint.offset, 0u);
  EXPECT_EQ(r.endpoint.size, 0u);
  EXPECT_EQ(r.http_status, fresh.http_status);
  EXPECT_EQ(r.hops_started, fresh.hops_started);
  EXPECT_TRUE(r.hops.empty());
  EXPECT_EQ(r.span_count(), 1u);
  // Its text starts over at offset 0, inline.
  RequestSpans probe = r;
  const TextRef first = probe.text.add("x");
  EXPECT_EQ(first.offset, 0u);
  EXPECT_EQ(probe.text.view(first), "x");
  EXPECT_EQ(encoded(r), encoded(fresh));
}

// A record cleared (RequestSpans::clear: the gateway recycles its records) after uses
// large and small (text and hops inline, past their inline room, past what clear() keeps
// on the heap) is as new: every field, and refilled it encodes byte for byte as the same
// request in a new record, and as the reference; so does a copy of it.
TEST(OtlpJson, AClearedRecordIsAsNew) {
  const Use uses[] = {{true, 5000, 20}, {false, 0, 0},     {true, 300, 4},  {false, 300, 0},
                      {true, 0, 0},     {false, 5000, 20}, {true, 300, 20}, {false, 0, 4},
                      {true, 5000, 0},  {false, 0, 0}};
  RequestSpans reused;
  for (const Use& use : uses) {
    SCOPED_TRACE(::testing::Message() << "routed " << use.routed << " path " << use.path_bytes
                                      << " hops " << use.more_hops);
    reused.clear();
    expect_as_new(reused);
    fill(reused, use);
    RequestSpans fresh;
    fill(fresh, use);
    EXPECT_EQ(reused.span_count(), fresh.span_count());
    EXPECT_EQ(encoded(reused), encoded(fresh));
    EXPECT_EQ(encoded(reused), otlp_json(as_spans(fresh), "kvgate"));
    const RequestSpans copy = reused;
    EXPECT_EQ(encoded(copy), encoded(fresh));
  }
  // Cleared twice, and a copy of a cleared record: still as new.
  reused.clear();
  reused.clear();
  expect_as_new(reused);
  const RequestSpans copy = reused;
  expect_as_new(copy);
}

// The gateway's form: a batch written a run at a time as requests end, taken whole. Its
// bytes are write_otlp_json's for the same runs, batch after batch (what the encoding
// keeps from one batch to the next changes nothing but the work), a record split between
// two batches included; the next batch is written over the body given back as its room.
TEST(OtlpJsonBatch, TakesWhatWriteOtlpJsonWritesForTheSameRuns) {
  constexpr int64_t k1e9 = 1'000'000'000;
  std::vector<RequestSpans> records;
  for (int64_t i = 0; i < 30; ++i) {
    RequestSpans r = i % 4 == 3 ? stored_request() : routed_request();
    r.start_unix_nanos = 1'700'000'000 * k1e9 + i * 400'000'001;
    r.end_unix_nanos = r.start_unix_nanos + 1'000;
    records.push_back(r);
  }
  const auto [runs, spans] = batch_of(records);
  OtlpJsonBatch batch("kvgate");
  std::string room;
  std::string scratch;
  size_t at = 0;                   // the next run's index
  std::optional<SpanRun> carried;  // the rest of the last batch's split record
  for (const size_t size : {7u, 1u, 12u, 10u}) {
    // The rest carried over, then `size` runs, the last one's spans split: its first in
    // this batch, the rest carried to the next.
    std::vector<SpanRun> taken;
    if (carried) taken.push_back(*carried);
    taken.insert(taken.end(), runs.begin() + static_cast<std::ptrdiff_t>(at),
                 runs.begin() + static_cast<std::ptrdiff_t>(at + size));
    SpanRun& last = taken.back();
    carried = SpanRun{last.record, last.first + 1, last.count - 1};
    last.count = 1;
    size_t expected_spans = 0;
    for (const SpanRun& run : taken) {
      batch.append(run);
      expected_spans += run.count;
    }
    EXPECT_EQ(batch.spans(), expected_spans);
    OtlpJsonBatch::Taken body = batch.take(std::move(room));
    EXPECT_TRUE(batch.empty());
    EXPECT_EQ(body.text(), write_otlp_json(scratch, taken, "kvgate"));
    EXPECT_NO_THROW((void)boost::json::parse(body.text()));
    room = std::move(body.buffer);
    at += size;
  }
  // What is left: the last split record's rest, then an empty batch.
  batch.append(*carried);
  EXPECT_EQ(batch.take().text(),
            write_otlp_json(scratch, std::span<const SpanRun>(&*carried, 1), "kvgate"));
  EXPECT_EQ(batch.take(std::string(5, 'x')).text(), otlp_json({}, "kvgate"));
  // A run of no spans adds nothing.
  batch.append({&records[0], 0, 0});
  EXPECT_TRUE(batch.empty());
  EXPECT_EQ(batch.take().text(), otlp_json({}, "kvgate"));
}

// A body given back as room is written over in place: no reallocation while the next
// request fits in its size, and the buffer keeps its size (the room), the bytes past the
// request as they were.
TEST(OtlpJsonBatch, WritesOverTheRoomItIsGiven) {
  const RequestSpans a = routed_request();
  OtlpJsonBatch batch("kvgate");
  std::string room(64 * 1024, 'x');
  const char* const data = room.data();
  batch.take(std::move(room));  // the empty request; `room` becomes the next buffer
  batch.append({&a, 0, a.span_count()});
  OtlpJsonBatch::Taken body = batch.take();
  EXPECT_EQ(body.buffer.data(), data);
  EXPECT_EQ(body.buffer.size(), 64u * 1024);
  EXPECT_EQ(body.buffer.back(), 'x');
  const SpanRun runs[] = {{&a, 0, a.span_count()}};
  std::string scratch;
  EXPECT_EQ(body.text(), write_otlp_json(scratch, runs, "kvgate"));
  // Given back, it is the room again: a smaller request leaves the rest of it.
  batch.take(std::move(body.buffer));
  OtlpJsonBatch::Taken empty = batch.take();
  EXPECT_EQ(empty.buffer.data(), data);
  EXPECT_EQ(empty.buffer.size(), 64u * 1024);
  EXPECT_EQ(empty.text(), otlp_json({}, "kvgate"));
}

}  // namespace otlp_json_test
}  // namespace kvgate::trace
