// Data-parallel ranks end to end (route/data_parallel.h): a real `kvgate engine
// --data-parallel-size 2` (two engine cores behind one address, vLLM's data-parallel
// serving), first by itself, then behind `kvgate serve` routing on KV events.
//
// The engine: X-data-parallel-rank pins a request to its rank (the answer names it in
// x-kvgate-dp-rank; out of range is a 400, as vLLM answers); each rank has its own cache
// (a prompt repeated on rank 1 hits there, rank 0 never saw it), its own KV event
// publisher whose batches carry its data_parallel_rank, and its own /metrics series
// (engine="r").
//
// The gateway: the engine's two ranks are two endpoints (URL#dp0, URL#dp1), each
// subscribed to its rank's publisher. A prompt cached on one rank (sent there directly,
// pinned by the header) is in the index under that rank only; routed through the
// gateway, it goes to that rank every time, which the engine's per-rank request counts
// confirm (the gateway set the header); a prompt cached on the other rank goes there.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "support/kv_engine.h"

namespace kvgate::testing {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace gateway_data_parallel_test {

const std::vector<std::string> kTwoRanks = {"--time-scale", "0.01", "--data-parallel-size", "2"};

// Where rank `rank` (> 0) bound its KV event sockets: the engine prints "kvgate engine kv
// events of rank R on ..." and "... kv replay of rank R on ..." after rank 0's lines.
Result<KvEventEndpoints> rank_endpoints(ChildProcess& engine, uint32_t rank) {
  const std::string of = " of rank " + std::to_string(rank) + " on ";
  auto pub = engine.wait_for_line("kv events" + of, std::chrono::seconds(60));
  if (!pub) return Error(pub.error());
  auto rep = engine.wait_for_line("kv replay" + of, std::chrono::seconds(60));
  if (!rep) return Error(rep.error());
  return KvEventEndpoints{pub->substr(pub->find("tcp://")), rep->substr(rep->find("tcp://"))};
}

std::string completion(const std::string& prompt) {
  return R"({"model":"sim","prompt":")" + prompt + R"(","max_tokens":1,"temperature":0})";
}

// A completion sent straight to the engine at `url`, pinned to `rank` when given.
io::HttpClientResponse complete_on(const std::string& url, const std::string& prompt,
                                   std::optional<std::string> rank) {
  std::vector<io::HttpHeader> headers = {{"Content-Type", "application/json"}};
  if (rank) headers.push_back({"X-data-parallel-rank", *rank});
  auto r = io::http_fetch("POST", url + "/v1/completions", completion(prompt), headers,
                          std::chrono::seconds(30));
  if (!r) {
    ADD_FAILURE() << r.error();
    return {};
  }
  return *r;
}

std::string served_rank(const io::HttpClientResponse& r) {
  const std::string* h = r.header("x-kvgate-dp-rank");
  return h ? *h : std::string("none");
}

// Requests rank `rank` of the engine at `url` finished.
double finished_on(const std::string& url, uint32_t rank) {
  return metric_at(url, "vllm:request_success_total",
                   {{"engine", std::to_string(rank)}, {"finished_reason", "length"}});
}

TEST(EngineDataParallel, EachRankHasItsOwnCacheEventsAndMetrics) {
  KvEngine e(kTwoRanks);
  ASSERT_FALSE(e.url.empty());
  auto rank1 = rank_endpoints(*e.proc, 1);
  ASSERT_TRUE(rank1) << rank1.error();
  EXPECT_NE(rank1->publisher, e.publisher);

  const std::string prompt = words_prompt("pinned", 64);
  for (const char* rank : {"1", "1", "0"}) {
    auto r = complete_on(e.url, prompt, rank);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(served_rank(r), rank);
  }
  // The second request on rank 1 hit rank 1's cache; rank 0 computed the prompt anew.
  EXPECT_GT(metric_at(e.url, "vllm:prefix_cache_hits_total", {{"engine", "1"}}), 0);
  EXPECT_EQ(metric_at(e.url, "vllm:prefix_cache_hits_total", {{"engine", "0"}}), 0);
  EXPECT_EQ(finished_on(e.url, 1), 2);
  EXPECT_EQ(finished_on(e.url, 0), 1);

  // vLLM's reading of the header: out of range is refused, a value that is not an
  // integer is ignored (the balancer picks).
  auto out = complete_on(e.url, prompt, "2");
  EXPECT_EQ(out.status, 400) << out.body;
  EXPECT_NE(out.body.find("out of range"), std::string::npos) << out.body;
  auto junk = complete_on(e.url, prompt, "x");
  EXPECT_EQ(junk.status, 200) << junk.body;
  EXPECT_TRUE(served_rank(junk) == "0" || served_rank(junk) == "1") << served_rank(junk);

  // Each rank's publisher says which rank it is, in every batch.
  for (const auto& [replay, rank] : {std::pair{e.replay, 0}, std::pair{rank1->replay, 1}}) {
    const auto batches = replay_kv_events(replay);
    EXPECT_FALSE(batches.empty()) << "rank " << rank;
    for (const auto& [seq, batch] : batches) {
      EXPECT_EQ(batch.data_parallel_rank, rank) << "rank " << rank << " batch " << seq;
    }
  }
}

// One pool over the engine's two ranks, each an endpoint with its own KV events, routing
// with kv-cost on the precise index.
std::string ranks_yaml(const KvEngine& e, const KvEventEndpoints& rank1) {
  return "listeners:\n  - address: 127.0.0.1\n    port: 0\n" + kLoopbackAdmin +
         "timeouts: {header_ms: 2000, drain_ms: 2000, connect_ms: 1000}\n"
         "pools:\n  main:\n    block_size: 16\n    scrape_interval_ms: 50\n"
         "    tokenizer: " +
         fixture_tokenizer_dir() +
         "/tokenizer.json\n"
         "    router:\n      policy: kv-cost\n      overlap: precise\n    endpoints:\n"
         "      - url: " +
         e.url + "#dp0\n        kv_events: {publisher: " + e.publisher + ", replay: " + e.replay +
         "}\n      - url: " + e.url + "#dp1\n        kv_events: {publisher: " + rank1.publisher +
         ", replay: " + rank1.replay + "}\nmodels:\n  - name: sim\n    pool: main\n";
}

TEST(GatewayDataParallel, RanksAreRoutedAsEnginesOnTheirOwnKvEvents) {
  KvEngine e(kTwoRanks);
  ASSERT_FALSE(e.url.empty());
  auto rank1 = rank_endpoints(*e.proc, 1);
  ASSERT_TRUE(rank1) << rank1.error();
  AdminGateway gw(ranks_yaml(e, *rank1));
  ASSERT_FALSE(gw.gw.url.empty() || gw.admin_url.empty());
  const std::vector<std::string> rank_url = {e.url + "#dp0", e.url + "#dp1"};

  // ZeroMQ's slow joiner: each rank's batches reach the index before the test begins.
  for (uint32_t r = 0; r < 2; ++r) {
    bool joined = false;
    for (int i = 0; i < 100 && !joined; ++i) {
      const std::string p = words_prompt("join" + std::to_string(i) + "r" + std::to_string(r), 40);
      complete_on(e.url, p, std::to_string(r));
      joined = eventually([&] { return gw.matched_blocks(p, rank_url[r]) > 0; },
                          std::chrono::milliseconds(200));
    }
    ASSERT_TRUE(joined) << rank_url[r] << ": no KV event batch reached the gateway";
  }

  // A prompt cached on rank r, sent there directly: the index has it under rank r only,
  // and the gateway sends it there every time.
  for (uint32_t r : {1u, 0u}) {
    const std::string prompt = words_prompt("cached" + std::to_string(r) + "x", 96);
    ASSERT_EQ(complete_on(e.url, prompt, std::to_string(r)).status, 200);
    ASSERT_TRUE(eventually([&] { return gw.matched_blocks(prompt, rank_url[r]) >= 4; }))
        << gw.matched_blocks(prompt, rank_url[r]);
    EXPECT_EQ(gw.matched_blocks(prompt, rank_url[1 - r]), 0);
    const double here = finished_on(e.url, r), there = finished_on(e.url, 1 - r);
    for (int i = 0; i < 3; ++i) {
      auto resp = gw.gw.post("/v1/completions", completion(prompt));
      ASSERT_EQ(resp.status, 200) << resp.body;
      const std::string* endpoint = resp.header("x-kvgate-endpoint");
      ASSERT_NE(endpoint, nullptr);
      EXPECT_EQ(*endpoint, rank_url[r]) << i;
    }
    // The engine ran them on rank r: the gateway named the rank in the header.
    EXPECT_EQ(finished_on(e.url, r) - here, 3);
    EXPECT_EQ(finished_on(e.url, 1 - r) - there, 0);
  }
  EXPECT_EQ(gw.gw.proc->stop(), 0) << gw.gw.proc->errors();
}

}  // namespace gateway_data_parallel_test
}  // namespace kvgate::testing
