// Real `kvgate engine`s that publish their KV events, and a gateway pool that routes on
// them (`overlap: precise`): for the tests that check where requests go by what each
// engine holds. Every engine tokenizes with the qwen3 fixture, as the pool does, and binds
// its ZeroMQ PUB and replay ROUTER on ephemeral loopback ports (printed on its stdout).
//
//   KvEngine a({"--time-scale", "0.01"});
//   AdminGateway gw(precise_pool_yaml({&a}));
//   join_kv_events(gw, {&a});           // ZeroMQ's slow joiner is behind us
//   a.complete(prompt);                    // straight to the engine
//   EXPECT_TRUE(eventually([&] { return gw.matched_blocks(prompt, a.url) >= 4; }));
#pragma once

#include <zmq.hpp>

#include "core/kv/vllm_event_codec.h"
#include "engine_fixture.h"
#include "fault_fixture.h"

namespace kvgate::testing {

inline std::string fixture_tokenizer_dir() { return source_dir() + "/.deps/fixtures/qwen3"; }

// Every batch the replay ROUTER at `endpoint` still holds, in order, with its sequence
// number (asked for from 0, as a subscriber that lost everything would). A timeout or a
// batch that does not decode fails the test and ends the list there.
inline std::vector<std::pair<uint64_t, kv::EventBatch>> replay_kv_events(
    const std::string& endpoint) {
  std::vector<std::pair<uint64_t, kv::EventBatch>> out;
  zmq::context_t ctx;
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::rcvtimeo, 5000);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.connect(endpoint);
  (void)dealer.send(zmq::message_t(), zmq::send_flags::sndmore);
  (void)dealer.send(zmq::buffer(std::string(8, '\0')), zmq::send_flags::none);
  while (true) {
    zmq::message_t empty, seq, payload;
    if (!dealer.recv(empty) || !dealer.recv(seq) || !dealer.recv(payload)) {
      ADD_FAILURE() << "replay from " << endpoint << " timed out";
      return out;
    }
    if (seq.to_string() == std::string(8, '\xff')) return out;
    uint64_t s = 0;
    for (size_t i = 0; i < seq.size(); ++i) s = (s << 8) | static_cast<uint8_t*>(seq.data())[i];
    auto batch = kv::decode_event_batch(payload.to_string());
    if (!batch) {
      ADD_FAILURE() << batch.error();
      return out;
    }
    out.emplace_back(s, std::move(*batch));
  }
}

struct KvEngine : EngineProcess {
  std::string publisher;  // tcp://127.0.0.1:PORT
  std::string replay;

  // Loading the tokenizer takes seconds under the sanitizers on a busy machine.
  explicit KvEngine(const std::vector<std::string>& extra)
      : EngineProcess(args(extra), /*wait_healthy=*/true, std::chrono::seconds(60)) {
    if (!proc || url.empty()) return;
    auto endpoints = read_kv_event_endpoints(*proc, std::chrono::seconds(60));
    if (!endpoints) {
      ADD_FAILURE() << endpoints.error();
      url.clear();
      return;
    }
    publisher = endpoints->publisher;
    replay = endpoints->replay;
  }

  static std::vector<std::string> args(const std::vector<std::string>& extra) {
    std::vector<std::string> a = {"--model",
                                  "sim",
                                  "--tokenizer",
                                  fixture_tokenizer_dir(),
                                  "--block-size",
                                  "16",
                                  "--kv-events-endpoint",
                                  "tcp://127.0.0.1:*",
                                  "--replay-endpoint",
                                  "tcp://127.0.0.1:*"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

  std::string yaml_entry() const {
    return "      - url: " + url + "\n        kv_events: {publisher: " + publisher +
           ", replay: " + replay + "}\n";
  }

  // A completion sent straight to the engine: the gateway only hears of it through the
  // engine's KV events.
  io::HttpClientResponse complete(const std::string& prompt, int max_tokens = 1) {
    return post("/v1/completions", R"({"model":"sim","prompt":")" + prompt + R"(","max_tokens":)" +
                                       std::to_string(max_tokens) + R"(,"temperature":0})");
  }

  // Every batch the engine's replay socket still holds (replay_kv_events).
  std::vector<std::pair<uint64_t, kv::EventBatch>> replay_all() const {
    return replay_kv_events(replay);
  }
};

// One pool "main" for model "sim" over `engines`, routing with kv-cost on the precise
// index (KV events), scraping every 50 ms, with a loopback admin API; `pool_extra` lines
// go inside the pool.
inline std::string precise_pool_yaml(const std::vector<const KvEngine*>& engines,
                                     const std::string& pool_extra = "") {
  std::string y = "listeners:\n  - address: 127.0.0.1\n    port: 0\n" + kLoopbackAdmin +
                  "timeouts: {header_ms: 2000, drain_ms: 2000, connect_ms: 1000}\n"
                  "pools:\n  main:\n    block_size: 16\n    scrape_interval_ms: 50\n"
                  "    tokenizer: " +
                  fixture_tokenizer_dir() + "/tokenizer.json\n" + pool_extra +
                  "    router:\n      policy: kv-cost\n      overlap: precise\n    endpoints:\n";
  for (const KvEngine* e : engines) y += e->yaml_entry();
  return y + "models:\n  - name: sim\n    pool: main\n";
}

// ZeroMQ's slow joiner: until the gateway's SUB is connected to an engine's PUB, that
// engine's batches are lost. Sends each engine new prompts until one of its batches has
// reached the gateway's index.
inline void join_kv_events(AdminGateway& gw, const std::vector<KvEngine*>& engines) {
  for (KvEngine* e : engines) {
    bool joined = false;
    for (int i = 0; i < 100 && !joined; ++i) {
      const std::string p = words_prompt("join" + std::to_string(i) + "x", 40);
      e->complete(p);
      joined = eventually([&] { return gw.matched_blocks(p, e->url) > 0; },
                          std::chrono::milliseconds(200));
    }
    ASSERT_TRUE(joined) << e->url << ": no KV event batch reached the gateway";
  }
}

}  // namespace kvgate::testing
