// The fault matrix, KV events (ctest label `faults`): a real `kvgate engine` whose KV event
// batches are lost on the way to the gateway's subscriber (`--kv-events-drop-every`: every
// other batch is withheld from the PUB socket but kept for replay, as a PUB at its
// high-water mark or a reconnecting SUB loses vLLM's events). The gateway sees each gap,
// fills it from the engine's replay socket, and keeps routing on exactly what the engine
// holds, including blocks it only ever heard of through the replay.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <variant>

#include "support/kv_engine.h"

namespace kvgate::testing {
namespace {

// The sequence number of the batch that stored the first block of `tokens`, or -1.
int64_t batch_storing(const std::vector<std::pair<uint64_t, kv::EventBatch>>& batches,
                      const std::vector<uint32_t>& tokens) {
  if (tokens.size() < 16) return -1;
  const std::vector<uint32_t> first(tokens.begin(), tokens.begin() + 16);
  for (const auto& [seq, batch] : batches) {
    for (const auto& ev : batch.events) {
      const auto* s = std::get_if<kv::BlockStored>(&ev);
      if (s && !s->parent_block_hash && s->token_ids.size() >= 16 &&
          std::equal(first.begin(), first.end(), s->token_ids.begin())) {
        return static_cast<int64_t>(seq);
      }
    }
  }
  return -1;
}

TEST(Faults, KvEventsLostOnTheWayAreReplayedAndRoutingStaysPrecise) {
  constexpr uint64_t kDropEvery = 2;
  KvEngine lossy({"--time-scale", "0.01", "--kv-events-drop-every", std::to_string(kDropEvery)});
  KvEngine clean({"--time-scale", "0.01"});
  ASSERT_FALSE(lossy.url.empty() || clean.url.empty());
  AdminGateway gw(precise_pool_yaml({&lossy, &clean}));
  ASSERT_FALSE(gw.admin_url.empty());
  join_kv_events(gw, {&lossy, &clean});
  if (HasFatalFailure()) return;

  // Prefixes warmed straight on the lossy engine until one whose stored blocks went out in
  // a withheld batch: the gateway can only know of it through the replay, once the next
  // batch (a new prompt's) shows the gap.
  std::string lost_prefix;
  int64_t lost_seq = -1;
  for (int i = 0; i < 8 && lost_prefix.empty(); ++i) {
    const std::string prefix = words_prompt("lost" + std::to_string(i) + "x", 80);
    ASSERT_EQ(lossy.complete(prefix + "first").status, 200);
    ASSERT_EQ(lossy.complete(words_prompt("next" + std::to_string(i) + "x", 40)).status, 200);
    const int64_t seq = batch_storing(lossy.replay_all(), lossy.tokenize(prefix + "first"));
    ASSERT_GE(seq, 0) << "no batch stored " << prefix;
    if ((static_cast<uint64_t>(seq) + 1) % kDropEvery == 0) {
      lost_prefix = prefix;
      lost_seq = seq;
    }
  }
  ASSERT_FALSE(lost_prefix.empty()) << "no prefix went out in a withheld batch";
  std::printf("kv events: the blocks of the probed prefix were in withheld batch %lld\n",
              static_cast<long long>(lost_seq));
  ASSERT_TRUE(eventually([&] { return gw.matched_blocks(lost_prefix + "second", lossy.url) >= 4; }))
      << "the gateway never learnt what the withheld batch stored";

  // Routed by what the engines hold, alternating, so not by luck: the prefix known only
  // through the replay goes to the lossy engine and hits its cache; one warmed on the
  // clean engine goes there.
  const std::string clean_prefix = words_prompt("clean", 80);
  ASSERT_EQ(clean.complete(clean_prefix + "first").status, 200);
  ASSERT_TRUE(
      eventually([&] { return gw.matched_blocks(clean_prefix + "second", clean.url) >= 4; }));
  for (const auto& [prefix, engine] :
       {std::pair{lost_prefix, &lossy}, std::pair{clean_prefix, &clean}}) {
    auto r = gw.gw.post("/v1/completions",
                        R"({"model":"sim","prompt":")" + prefix + R"(second","max_tokens":2})");
    ASSERT_EQ(r.status, 200) << r.body;
    ASSERT_NE(r.header("x-kvgate-endpoint"), nullptr);
    EXPECT_EQ(*r.header("x-kvgate-endpoint"), engine->url);
    EXPECT_GE(
        parse_json(r.body).at("usage").at("prompt_tokens_details").at("cached_tokens").as_int64(),
        64);
  }

  // Counted: every gap seen on the lossy engine was filled by replay, none lost for good,
  // and no batch referred to a block the index had not heard of. (The counters are
  // exported periodically: both are read from one scrape, once they have caught up.)
  const metrics::Labels lossy_l = {{"pool", "main"}, {"endpoint", lossy.url}};
  const metrics::Labels clean_l = {{"pool", "main"}, {"endpoint", clean.url}};
  double gaps = 0, replayed = 0;
  ASSERT_TRUE(eventually([&] {
    auto r = io::http_fetch("GET", gw.gw.url + "/metrics");
    if (!r || r->status != 200) return false;
    auto m = metrics::parse_prometheus_text(r->body);
    if (!m) return false;
    gaps = m->value("kvgate_kv_event_gaps_total", lossy_l).value_or(0);
    replayed = m->value("kvgate_kv_event_replayed_total", lossy_l).value_or(0);
    return gaps >= 1 && replayed >= gaps;
  })) << gaps
      << " gaps, " << replayed << " replayed";
  std::printf("kv events: lossy engine: %.0f gaps, %.0f batches replayed\n", gaps, replayed);
  EXPECT_EQ(gw.gw.metric("kvgate_kv_event_missed_total", lossy_l), 0);
  EXPECT_EQ(gw.gw.metric("kvgate_kv_event_anomalies_total", lossy_l), 0);
  EXPECT_EQ(gw.gw.metric("kvgate_kv_event_gaps_total", clean_l), 0);
  EXPECT_EQ(gw.gw.metric("kvgate_kv_event_replayed_total", clean_l), 0);
  EXPECT_EQ(gw.gw.proc->stop(), 0) << gw.gw.proc->errors();
}

}  // namespace
}  // namespace kvgate::testing
