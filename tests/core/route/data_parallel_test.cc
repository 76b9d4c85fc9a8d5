// Data-parallel ranks as endpoints (core/route/data_parallel.h): the rank URL, the
// expansion of an engine into its ranks, vLLM's KV event port offset, and a scrape read
// for one rank (core/route/scrape.h).
#include "core/route/data_parallel.h"

#include <gtest/gtest.h>

#include "core/metrics/prometheus_text.h"
#include "core/route/scrape.h"

namespace kvgate::route {
// Named after the file, not anonymous: the tests compile in unity batches.
namespace data_parallel_test {

TEST(DataParallel, ARanksUrlIsTheAddressWithItsRank) {
  EXPECT_EQ(dp_rank_url("http://10.0.0.7:8000", 3), "http://10.0.0.7:8000#dp3");
  const DpUrl r = split_dp_url("http://10.0.0.7:8000#dp3");
  EXPECT_EQ(r.address, "http://10.0.0.7:8000");
  EXPECT_EQ(r.rank, 3u);
  const DpUrl plain = split_dp_url("http://10.0.0.7:8000");
  EXPECT_EQ(plain.address, "http://10.0.0.7:8000");
  EXPECT_FALSE(plain.rank);
  // Not a rank: the URL is taken whole.
  EXPECT_FALSE(split_dp_url("http://a:1#dp").rank);
  EXPECT_FALSE(split_dp_url("http://a:1#dpx").rank);
  EXPECT_FALSE(split_dp_url("http://a:1#dp1x").rank);
}

TEST(DataParallel, AnEngineExpandsIntoOneEndpointPerRank) {
  EndpointSpec spec{.url = "http://a:8000", .role = Role::kDecode, .zone = "z1"};
  const std::vector<EndpointSpec> ranks = expand_data_parallel(spec, 4);
  ASSERT_EQ(ranks.size(), 4u);
  for (uint32_t r = 0; r < 4; ++r) {
    EXPECT_EQ(ranks[r].url, "http://a:8000#dp" + std::to_string(r));
    EXPECT_EQ(split_dp_url(ranks[r].url).rank, r);
    EXPECT_EQ(ranks[r].role, Role::kDecode);
    EXPECT_EQ(ranks[r].zone, "z1");
  }
  // Size 1: the engine is not data-parallel; its URL names no rank (no header is sent).
  const std::vector<EndpointSpec> one = expand_data_parallel(spec, 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].url, "http://a:8000");
}

TEST(DataParallel, KvEventPortsAreOffsetByTheRankAsVllmDoes) {
  EXPECT_EQ(dp_rank_zmq_endpoint("tcp://*:5557", 0), "tcp://*:5557");
  EXPECT_EQ(dp_rank_zmq_endpoint("tcp://*:5557", 2), "tcp://*:5559");
  EXPECT_EQ(dp_rank_zmq_endpoint("tcp://10.0.0.7:5558", 1), "tcp://10.0.0.7:5559");
  EXPECT_EQ(dp_rank_zmq_endpoint("inproc://cache", 1), "inproc://cache_dp1");
  EXPECT_EQ(dp_rank_zmq_endpoint("", 3), "");
  // An ephemeral port (0 or *): each rank binds its own.
  EXPECT_EQ(dp_rank_zmq_endpoint("tcp://127.0.0.1:*", 1), "tcp://127.0.0.1:*");
  EXPECT_EQ(dp_rank_zmq_endpoint("tcp://127.0.0.1:0", 1), "tcp://127.0.0.1:0");
}

TEST(DataParallel, ARankReadsOnlyItsEngineSeriesOfAScrape) {
  auto m = metrics::parse_prometheus_text(
      "vllm:num_requests_waiting{engine=\"0\"} 2\n"
      "vllm:num_requests_waiting{engine=\"1\"} 3\n"
      "vllm:num_requests_running{engine=\"0\"} 4\n"
      "vllm:num_requests_running{engine=\"1\"} 6\n"
      "vllm:kv_cache_usage_perc{engine=\"0\"} 0.2\n"
      "vllm:kv_cache_usage_perc{engine=\"1\"} 0.6\n"
      "vllm:time_to_first_token_seconds_sum{engine=\"0\"} 1.5\n"
      "vllm:time_to_first_token_seconds_count{engine=\"0\"} 3\n"
      "vllm:time_to_first_token_seconds_sum{engine=\"1\"} 4\n"
      "vllm:time_to_first_token_seconds_count{engine=\"1\"} 8\n");
  ASSERT_TRUE(m) << m.error();
  auto one = read_scrape(*m, 1);
  ASSERT_TRUE(one) << one.error();
  EXPECT_EQ(one->waiting, 3u);
  EXPECT_EQ(one->running, 6u);
  EXPECT_DOUBLE_EQ(one->kv_usage, 0.6);
  auto latency = read_latency_totals(*m, 1);
  ASSERT_TRUE(latency);
  EXPECT_DOUBLE_EQ(latency->ttft_sum, 4);
  EXPECT_EQ(latency->ttft_count, 8u);
  auto all = read_scrape(*m);
  ASSERT_TRUE(all) << all.error();
  EXPECT_EQ(all->waiting, 5u);
  // A rank the page does not have: its gauges are missing.
  EXPECT_FALSE(read_scrape(*m, 2));
}

}  // namespace data_parallel_test
}  // namespace kvgate::route
