// A data-parallel `kvgate engine`'s /metrics: one page, each family once, a series per
// rank labelled engine="<rank>" as vLLM labels its engine cores; the gateway reads each
// rank's own series (core/route/scrape.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/metrics/prometheus_text.h"
#include "core/route/scrape.h"
#include "engine/engine_metrics_text.h"

namespace kvgate::engine_server {
// Named after the file, not anonymous: the tests compile in unity batches.
namespace engine_metrics_ranks_test {

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(EngineMetricsRanks, OneFamilyASeriesPerRank) {
  std::vector<EngineMetricsView> ranks(2);
  ranks[0].metrics.num_requests_running = 3;
  ranks[0].metrics.num_requests_waiting = 1;
  ranks[0].metrics.kv_cache_usage = 0.25;
  ranks[1].metrics.num_requests_running = 7;
  ranks[1].metrics.num_requests_waiting = 2;
  ranks[1].metrics.kv_cache_usage = 0.75;
  ranks[1].metrics.requests_finished = 5;
  EngineServerOptions options;
  options.served_model_name = "sim";
  const std::string text = render_engine_metrics(ranks, options, 0);
  EXPECT_EQ(occurrences(text, "# TYPE vllm:num_requests_running "), 1u) << text;
  EXPECT_EQ(occurrences(text, "# TYPE vllm:time_to_first_token_seconds "), 1u) << text;
  EXPECT_EQ(occurrences(text, "# TYPE vllm:cache_config_info "), 1u) << text;
  auto m = metrics::parse_prometheus_text(text);
  ASSERT_TRUE(m) << m.error();
  EXPECT_EQ(
      m->value("vllm:num_requests_running", {{"model_name", "sim"}, {"engine", "1"}}).value_or(-1),
      7);
  EXPECT_EQ(m->value("vllm:request_success_total",
                     {{"model_name", "sim"}, {"engine", "1"}, {"finished_reason", "length"}})
                .value_or(-1),
            5);
  for (uint32_t r = 0; r < 2; ++r) {
    auto s = route::read_scrape(*m, r);
    ASSERT_TRUE(s) << s.error();
    EXPECT_EQ(s->running, ranks[r].metrics.num_requests_running);
    EXPECT_EQ(s->waiting, ranks[r].metrics.waiting_gauge());
    EXPECT_DOUBLE_EQ(s->kv_usage, ranks[r].metrics.kv_cache_usage);
  }
}

}  // namespace engine_metrics_ranks_test
}  // namespace kvgate::engine_server
