// `kvgate engine` KV events: a real ZeroMQ SUB receives vLLM's three-frame messages and
// decodes them in both encodings; a DEALER replays what the SUB missed.
#include <gtest/gtest.h>

#include <zmq.hpp>

#include "core/kv/vllm_event_codec.h"
#include "support/kv_engine.h"

namespace kvgate::testing {
namespace {

uint64_t be64(const zmq::message_t& m) {
  uint64_t v = 0;
  for (size_t i = 0; i < m.size(); ++i) v = (v << 8) | static_cast<const uint8_t*>(m.data())[i];
  return v;
}

struct Message {
  std::string topic;
  uint64_t seq = 0;
  std::string payload;
};

bool recv_message(zmq::socket_t& sub, Message& out) {
  zmq::message_t t, s, p;
  if (!sub.recv(t)) return false;
  EXPECT_TRUE(t.more());
  EXPECT_TRUE(sub.recv(s));
  EXPECT_TRUE(s.more());
  EXPECT_TRUE(sub.recv(p));
  EXPECT_FALSE(p.more());
  EXPECT_EQ(s.size(), 8u);
  out = Message{t.to_string(), be64(s), p.to_string()};
  return true;
}

class EngineKvEvents : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineKvEvents, SubscriberDecodesStoredBlocksThenReplaysTheGap) {
  const std::string format = GetParam();
  EngineProcess e({"--time-scale", "0.01", "--kv-events-endpoint", "tcp://127.0.0.1:*",
                   "--replay-endpoint", "tcp://127.0.0.1:*", "--kv-events-format", format,
                   "--kv-events-topic", "kv@sim", "--block-size", "16"});
  ASSERT_FALSE(e.url.empty());
  auto pub_line = e.proc->wait_for_line("kv events on ");
  auto replay_line = e.proc->wait_for_line("kv replay on ");
  ASSERT_TRUE(pub_line && replay_line);
  const std::string pub_ep = pub_line->substr(pub_line->find("tcp://"));
  const std::string replay_ep = replay_line->substr(replay_line->find("tcp://"));

  // Published before anyone listens: lost to the SUB, kept for replay.
  const std::string first_prompt = words_prompt("first", 40);
  e.post("/v1/completions", R"({"prompt":")" + first_prompt + R"(","max_tokens":2})");

  zmq::context_t ctx;
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  sub.set(zmq::sockopt::subscribe, "kv@sim");
  sub.set(zmq::sockopt::rcvtimeo, 50);
  sub.connect(pub_ep);
  Message m;
  int probe = 0;
  while (!recv_message(sub, m)) {  // slow joiner: new prompts until one batch arrives
    ASSERT_LT(probe, 100);
    e.post("/v1/completions", R"({"prompt":")" +
                                  words_prompt("probe" + std::to_string(probe++), 20) +
                                  R"(","max_tokens":1})");
  }
  EXPECT_EQ(m.topic, "kv@sim");
  EXPECT_GT(m.seq, 0u);  // the deliberate gap: seq 0 went out before we subscribed
  // The encoding asked for: [ts, events, rank] (fixarray 3) or {ts, events, rank} (fixmap 3).
  EXPECT_EQ(static_cast<uint8_t>(m.payload[0]), format == "array" ? 0x93 : 0x83);
  auto batch = kv::decode_event_batch(m.payload);
  ASSERT_TRUE(batch) << batch.error();
  EXPECT_EQ(batch->data_parallel_rank, 0);
  EXPECT_GT(batch->ts, 1.7e9);

  // Replay from 0 through the ROUTER.
  const std::vector<std::pair<uint64_t, kv::EventBatch>> replayed = replay_kv_events(replay_ep);
  ASSERT_GE(replayed.size(), m.seq + 1);
  for (size_t i = 0; i < replayed.size(); ++i) EXPECT_EQ(replayed[i].first, i);
  EXPECT_EQ(replayed[m.seq].second, *batch);

  // Seq 0 holds the first prompt's two full blocks, chained from the root.
  const auto tokens = e.tokenize(first_prompt);
  ASSERT_EQ(tokens.size(), 40u);
  const auto& events = replayed[0].second.events;
  ASSERT_FALSE(events.empty());
  const auto& stored = std::get<kv::BlockStored>(events[0]);
  EXPECT_FALSE(stored.parent_block_hash.has_value());
  EXPECT_EQ(stored.block_size, 16u);
  EXPECT_EQ(stored.medium, "GPU");
  ASSERT_EQ(stored.block_hashes.size(), 2u);
  EXPECT_EQ(stored.token_ids, std::vector<uint32_t>(tokens.begin(), tokens.begin() + 32));
}

TEST_P(EngineKvEvents, EvictionsAreReportedAsBlockRemoved) {
  const std::string format = GetParam();
  EngineProcess e({"--time-scale", "0.01", "--kv-events-endpoint", "tcp://127.0.0.1:*",
                   "--replay-endpoint", "tcp://127.0.0.1:*", "--kv-events-format", format,
                   "--num-gpu-blocks", "8", "--max-model-len", "128"});
  ASSERT_FALSE(e.url.empty());
  auto replay_line = e.proc->wait_for_line("kv replay on ");
  ASSERT_TRUE(replay_line);
  // 8 blocks: the third 3-block prompt must evict blocks of the first.
  for (int i = 0; i < 4; ++i) {
    e.post("/v1/completions",
           R"({"prompt":")" + words_prompt("e" + std::to_string(i), 48) + R"(","max_tokens":1})");
  }
  const auto replayed = replay_kv_events(replay_line->substr(replay_line->find("tcp://")));
  size_t stored = 0, removed = 0;
  for (const auto& batch : replayed) {
    for (const auto& ev : batch.second.events) {
      if (auto* s = std::get_if<kv::BlockStored>(&ev)) stored += s->block_hashes.size();
      if (auto* r = std::get_if<kv::BlockRemoved>(&ev)) removed += r->block_hashes.size();
    }
  }
  EXPECT_EQ(stored, 4u * 3);
  EXPECT_GE(removed, 4u);  // 12 stored into 8 blocks
}

INSTANTIATE_TEST_SUITE_P(Formats, EngineKvEvents, ::testing::Values("array", "map"));

}  // namespace
}  // namespace kvgate::testing
