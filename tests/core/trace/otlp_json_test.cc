#include "core/trace/otlp_json.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace kvgate::trace {
// Named after the file, not anonymous: the tests compile in unity batches.
namespace otlp_json_test {

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
  return s;
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

TEST(OtlpJson, NoSpansIsStillValid) {
  const boost::json::value v = boost::json::parse(otlp_json({}, "x"));
  EXPECT_TRUE(v.at("resourceSpans").at(0).at("scopeSpans").at(0).at("spans").as_array().empty());
}

}  // namespace otlp_json_test
}  // namespace kvgate::trace
