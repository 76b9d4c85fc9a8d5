#include "core/metrics/prometheus_text.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/metrics/histogram.h"

namespace kvgate::metrics {
namespace {

TEST(PrometheusText, WriterOutputParsesBack) {
  PrometheusWriter w;
  const Labels l = {{"model_name", "qwen \"7b\"\\x"}, {"engine", "0"}};
  w.gauge("vllm:num_requests_running", "Number of requests.", l, 3);
  w.counter("vllm:prompt_tokens_total", "Prompt tokens.", l, 1234);
  Histogram h({0.01, 0.1, 1});
  h.observe(0.005);
  h.observe(0.05);
  h.observe(0.1);
  h.observe(7);
  w.histogram("vllm:time_to_first_token_seconds", "TTFT.", l, h.snapshot());
  auto m = parse_prometheus_text(w.text());
  ASSERT_TRUE(m) << m.error();
  EXPECT_EQ(m->value("vllm:num_requests_running", {{"model_name", "qwen \"7b\"\\x"}}), 3);
  EXPECT_EQ(m->value("vllm:prompt_tokens_total"), 1234);
  EXPECT_EQ(m->type_of("vllm:prompt_tokens_total"), "counter");
  EXPECT_EQ(m->type_of("vllm:time_to_first_token_seconds"), "histogram");
  EXPECT_EQ(m->value("vllm:time_to_first_token_seconds_bucket", {{"le", "0.01"}}), 1);
  EXPECT_EQ(m->value("vllm:time_to_first_token_seconds_bucket", {{"le", "0.1"}}), 3);
  EXPECT_EQ(m->value("vllm:time_to_first_token_seconds_bucket", {{"le", "1"}}), 3);
  EXPECT_EQ(m->value("vllm:time_to_first_token_seconds_bucket", {{"le", "+Inf"}}), 4);
  EXPECT_EQ(m->value("vllm:time_to_first_token_seconds_count"), 4);
  EXPECT_DOUBLE_EQ(*m->value("vllm:time_to_first_token_seconds_sum"), 7.155);
  EXPECT_EQ(m->all("vllm:time_to_first_token_seconds_bucket").size(), 4u);
}

TEST(PrometheusText, ParsesForeignExposition) {
  const char* text =
      "# A comment\n"
      "# HELP http_requests_total The total.\\nSecond line\n"
      "# TYPE http_requests_total counter\n"
      "http_requests_total{method=\"post\",code=\"200\"} 1027 1395066363000\n"
      "http_requests_total{method=\"post\",code=\"400\",} 3\r\n"
      "\n"
      "  go_gc{quantile=\"0.5\"}  NaN\n"
      "x -Inf\n"
      "y 1.5e-3\n";
  auto m = parse_prometheus_text(text);
  ASSERT_TRUE(m) << m.error();
  EXPECT_EQ(m->samples.size(), 5u);
  EXPECT_EQ(m->find("http_requests_total")->timestamp_ms, 1395066363000);
  EXPECT_EQ(m->value("http_requests_total", {{"code", "400"}}), 3);
  EXPECT_TRUE(std::isnan(*m->value("go_gc")));
  EXPECT_EQ(m->value("y"), 0.0015);
  EXPECT_EQ(m->families[0].help, "The total.\nSecond line");
}

TEST(PrometheusText, RejectsBrokenLines) {
  for (const char* bad :
       {"x{a=\"1\" 1\n", "x{a=1} 1\n", "x abc\n", "{a=\"1\"} 1\n", "x 1 2 3\n", "x{a=\"1} 2\n"}) {
    EXPECT_FALSE(parse_prometheus_text(bad)) << bad;
  }
}

}  // namespace
}  // namespace kvgate::metrics
