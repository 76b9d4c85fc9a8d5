// `kvgate engine` and vLLM's `cache_salt`: a salt seeds the prompt's first block hash, so
// prompts of different salts (or none) share no cached block, and the BlockStored event
// that starts a salted chain carries the salt (vLLM's extra_keys) so that a PreciseIndex
// fed with the events keys the blocks exactly as the gateway keys a request of that salt.
#include <gtest/gtest.h>

#include "core/kv/block_hash.h"
#include "core/kv/event_apply.h"
#include "core/kv/precise_index.h"
#include "core/kv/vllm_event_codec.h"
#include "support/kv_engine.h"

namespace kvgate::testing {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace engine_cache_salt_test {

// `salt` empty: no cache_salt field.
std::string completion(const std::string& prompt, const std::string& salt) {
  std::string body = R"({"prompt":")" + prompt + R"(","max_tokens":1)";
  if (!salt.empty()) body += R"(,"cache_salt":")" + salt + R"(")";
  return body + "}";
}

std::string chat(const std::string& prompt, const std::string& salt) {
  std::string body =
      R"({"messages":[{"role":"user","content":")" + prompt + R"("}],"max_tokens":1)";
  if (!salt.empty()) body += R"(,"cache_salt":")" + salt + R"(")";
  return body + "}";
}

// usage.prompt_tokens_details.cached_tokens of a 200 answer; -1 otherwise.
int64_t cached_tokens(EngineProcess& e, const std::string& path, const std::string& body) {
  auto r = e.post(path, body);
  EXPECT_EQ(r.status, 200) << r.body;
  if (r.status != 200) return -1;
  return parse_json(r.body).at("usage").at("prompt_tokens_details").at("cached_tokens").as_int64();
}

TEST(EngineCacheSalt, PromptsOfOtherSaltsShareNoCachedBlocks) {
  EngineProcess e({"--time-scale", "0.01", "--block-size", "16"});
  ASSERT_FALSE(e.url.empty());
  // 64 words, 64 tokens: at most 3 full blocks (48 tokens) can be served from the cache.
  const std::string prompt = words_prompt("salted", 64);
  EXPECT_EQ(cached_tokens(e, "/v1/completions", completion(prompt, "tenant-a")), 0);
  EXPECT_EQ(cached_tokens(e, "/v1/completions", completion(prompt, "tenant-b")), 0);
  EXPECT_EQ(cached_tokens(e, "/v1/completions", completion(prompt, "")), 0);
  EXPECT_EQ(cached_tokens(e, "/v1/completions", completion(prompt, "tenant-a")), 48);
  EXPECT_EQ(cached_tokens(e, "/v1/completions", completion(prompt, "tenant-b")), 48);
  EXPECT_EQ(cached_tokens(e, "/v1/completions", completion(prompt, "")), 48);

  // Chat the same way.
  const std::string question = words_prompt("question", 60);
  EXPECT_EQ(cached_tokens(e, "/v1/chat/completions", chat(question, "tenant-a")), 0);
  EXPECT_EQ(cached_tokens(e, "/v1/chat/completions", chat(question, "tenant-c")), 0);
  EXPECT_GT(cached_tokens(e, "/v1/chat/completions", chat(question, "tenant-a")), 0);

  // vLLM refuses an empty salt.
  auto bad = e.post("/v1/completions", R"({"prompt":"x","max_tokens":1,"cache_salt":""})");
  EXPECT_EQ(bad.status, 400) << bad.body;
}

class EngineCacheSaltEvents : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineCacheSaltEvents, EventsKeyASaltedPrefixAsTheGatewayKeysItsRequests) {
  EngineProcess e({"--time-scale", "0.01", "--block-size", "16", "--kv-events-endpoint",
                   "tcp://127.0.0.1:*", "--replay-endpoint", "tcp://127.0.0.1:*",
                   "--kv-events-format", GetParam()});
  ASSERT_FALSE(e.url.empty());
  auto endpoints = read_kv_event_endpoints(*e.proc, std::chrono::seconds(20));
  ASSERT_TRUE(endpoints) << endpoints.error();
  const std::string salted = words_prompt("tenant", 40);
  const std::string plain = words_prompt("shared", 40);
  EXPECT_EQ(e.post("/v1/completions", completion(salted, "tenant-a")).status, 200);
  EXPECT_EQ(e.post("/v1/completions", completion(plain, "")).status, 200);

  // Every batch so far, by replay, into the index the gateway keeps for pool "pool".
  kv::PreciseIndex index({.model = "pool", .block_size = 16});
  size_t salted_events = 0;
  for (const auto& batch : replay_kv_events(endpoints->replay)) {
    for (const auto& ev : batch.second.events) {
      if (auto* s = std::get_if<kv::BlockStored>(&ev); s && s->cache_salt) {
        EXPECT_EQ(*s->cache_salt, "tenant-a");
        EXPECT_FALSE(s->parent_block_hash.has_value());
        ++salted_events;
      }
    }
    kv::apply_events(index, 0, batch.second.events);
  }
  EXPECT_EQ(salted_events, 1u);

  // The gateway's keys (PoolRouting::keys_for): block_seed(pool, adapter, salt).
  auto matched = [&](const std::string& prompt, const std::string& salt) -> uint32_t {
    std::vector<kv::BlockKey> keys;
    kv::hash_blocks(e.tokenize(prompt), 16, kv::block_seed("pool", "", salt), keys);
    std::vector<kv::EndpointMatch> out;
    index.match(keys, 0, out);
    return out.empty() ? 0 : out[0].total_blocks;
  };
  EXPECT_EQ(matched(salted, "tenant-a"), 2u);
  EXPECT_EQ(matched(salted, "tenant-b"), 0u);
  EXPECT_EQ(matched(salted, ""), 0u);
  EXPECT_EQ(matched(plain, ""), 2u);
  EXPECT_EQ(matched(plain, "tenant-a"), 0u);
}

INSTANTIATE_TEST_SUITE_P(Formats, EngineCacheSaltEvents, ::testing::Values("array", "map"));

}  // namespace engine_cache_salt_test
}  // namespace kvgate::testing
