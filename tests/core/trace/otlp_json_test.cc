#include "core/trace/otlp_json.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <limits>
#include <set>
#include <string>

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
  EXPECT_EQ(keys(first_span(r)),
            (Names{"traceId", "spanId", "flags", "name", "kind", "startTimeUnixNano",
                   "endTimeUnixNano", "attributes", "status"}));
  EXPECT_EQ(keys(first_span(r).at("status")), Names{"code"});
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
  EXPECT_EQ(out[0].at("status").as_object().if_contains("message"), nullptr);
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

}  // namespace otlp_json_test
}  // namespace kvgate::trace
