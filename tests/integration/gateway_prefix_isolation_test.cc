// Prefix reuse never crosses LoRA adapters or cache salts, end to end: `kvgate serve`
// (kv-cost on its own routing history, the approximate index) in front of two real
// `kvgate engine` processes that both serve adapters sql and chat from the start
// (--max-loras 2, --lora-modules). The same long prompt sent for sql, then for chat, gets
// no cached prefix from the other adapter's request, in the engine (usage's cached_tokens)
// or in the router (the admin route view's matched blocks for the base model); the same
// adapter repeated goes back to its engine and gets its prefix. The base model with
// cache_salt s1, then s2: the router credits s1's blocks to s1 only, and the engine
// serves s2 nothing of s1's. The admin route view of adapter sql credits sql's blocks.
// Nothing here waits on time: the router records a decision before it forwards the
// request, and every request is answered before the next is sent.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "support/fault_fixture.h"

namespace kvgate::testing {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace gateway_prefix_isolation_test {

// Both adapters in a slot from the start: no load, no eviction, on either engine.
const std::vector<std::string> kTwoAdapters = {"--time-scale",   "0.01",
                                               "--model",        "sim",
                                               "--max-loras",    "2",
                                               "--lora-modules", "sql=/adapters/sql",
                                               "--lora-modules", "chat=/adapters/chat"};

// 100 words, one token each, blocks of 16: a repeat finds its 6 full blocks cached.
constexpr int64_t kCachedOnRepeat = 96;

std::string completion(const std::string& model, const std::string& prompt,
                       const std::string& salt = "") {
  std::string b = R"({"model":")" + model + R"(","prompt":")" + prompt + R"(","max_tokens":2)";
  if (!salt.empty()) b += R"(,"cache_salt":")" + salt + R"(")";
  return b + "}";
}

// The prompt tokens the engine served from its prefix cache.
int64_t cached_tokens(const io::HttpClientResponse& r) {
  return parse_json(r.body).at("usage").at("prompt_tokens_details").at("cached_tokens").as_int64();
}

std::string endpoint_of(const io::HttpClientResponse& r) {
  const std::string* e = r.header("x-kvgate-endpoint");
  return e ? *e : std::string();
}

// The router's matched blocks of `prompt` for the base model, or for the adapter `model`
// when not empty (with `salt` when not empty), per endpoint URL: POST
// /admin/pools/main/route, which routes nothing.
std::map<std::string, int64_t> matched(const std::string& admin_url, const std::string& prompt,
                                       const std::string& salt, const std::string& model = "") {
  std::map<std::string, int64_t> out;
  std::string body = R"({"prompt":")" + prompt + R"(","max_tokens":1)";
  if (!model.empty()) body += R"(,"model":")" + model + R"(")";
  if (!salt.empty()) body += R"(,"cache_salt":")" + salt + R"(")";
  body += "}";
  auto r = io::http_fetch("POST", admin_url + "/admin/pools/main/route", body);
  if (!r) {
    ADD_FAILURE() << r.error();
    return out;
  }
  if (r->status != 200) {
    ADD_FAILURE() << r->status << " " << r->body;
    return out;
  }
  const boost::json::value view = parse_json(r->body);  // outlives the loop's range
  for (const boost::json::value& e : view.at("endpoints").as_array()) {
    out[std::string(e.at("url").as_string())] = e.at("matched_blocks").to_number<int64_t>();
  }
  return out;
}

int64_t total(const std::map<std::string, int64_t>& m) {
  int64_t n = 0;
  for (const auto& [url, blocks] : m) n += blocks;
  return n;
}

TEST(GatewayPrefixIsolation, PrefixReuseNeverCrossesAdaptersOrCacheSalts) {
  EngineProcess x(kTwoAdapters), y(kTwoAdapters);
  ASSERT_FALSE(x.url.empty() || y.url.empty());
  AdminGateway gw(gateway_yaml({x.url, y.url}, "kv-cost", kLoopbackAdmin) +
                  "adapters:\n  - {name: sql, base: sim}\n  - {name: chat, base: sim}\n");
  ASSERT_FALSE(gw.admin_url.empty());
  const std::string prompt = words_prompt("iso", 100);

  // sql, twice: the repeat goes where the first went and finds its prefix there.
  auto sql = gw.gw.post("/v1/completions", completion("sql", prompt));
  ASSERT_EQ(sql.status, 200) << sql.body;
  const std::string sql_home = endpoint_of(sql);
  ASSERT_FALSE(sql_home.empty());
  EXPECT_EQ(cached_tokens(sql), 0);
  auto sql_again = gw.gw.post("/v1/completions", completion("sql", prompt));
  ASSERT_EQ(sql_again.status, 200) << sql_again.body;
  EXPECT_EQ(endpoint_of(sql_again), sql_home);
  EXPECT_EQ(cached_tokens(sql_again), kCachedOnRepeat);
  // The router holds sql's blocks under sql's keys only: nothing for the base model, all
  // of them for the route view of sql (which routes as sql's requests do).
  EXPECT_EQ(total(matched(gw.admin_url, prompt, "")), 0);
  const std::map<std::string, int64_t> for_sql = matched(gw.admin_url, prompt, "", "sql");
  ASSERT_TRUE(for_sql.contains(sql_home));
  EXPECT_GT(for_sql.at(sql_home), 0);
  EXPECT_EQ(total(matched(gw.admin_url, prompt, "s1", "sql")), 0);  // sql, another salt

  // chat, the same prompt: no credit from sql's request, wherever it went (on sql's
  // engine, the engine keys chat's blocks apart), then its own repeat gets credit.
  auto chat = gw.gw.post("/v1/completions", completion("chat", prompt));
  ASSERT_EQ(chat.status, 200) << chat.body;
  const std::string chat_home = endpoint_of(chat);
  ASSERT_FALSE(chat_home.empty());
  EXPECT_EQ(cached_tokens(chat), 0) << "chat reused sql's prefix on " << chat_home;
  auto chat_again = gw.gw.post("/v1/completions", completion("chat", prompt));
  ASSERT_EQ(chat_again.status, 200) << chat_again.body;
  EXPECT_EQ(endpoint_of(chat_again), chat_home);
  EXPECT_EQ(cached_tokens(chat_again), kCachedOnRepeat);

  // The base model, salted s1: no credit from either adapter's blocks.
  auto s1 = gw.gw.post("/v1/completions", completion("sim", prompt, "s1"));
  ASSERT_EQ(s1.status, 200) << s1.body;
  const std::string s1_home = endpoint_of(s1);
  ASSERT_FALSE(s1_home.empty());
  EXPECT_EQ(cached_tokens(s1), 0);
  // The router credits s1's blocks to s1 alone: not to s2, not to the unsalted prompt.
  const std::map<std::string, int64_t> for_s1 = matched(gw.admin_url, prompt, "s1");
  ASSERT_TRUE(for_s1.contains(s1_home));
  EXPECT_GT(for_s1.at(s1_home), 0);
  EXPECT_EQ(total(matched(gw.admin_url, prompt, "s2")), 0);
  EXPECT_EQ(total(matched(gw.admin_url, prompt, "")), 0);
  // s1 again: back to its engine, with its prefix.
  auto s1_again = gw.gw.post("/v1/completions", completion("sim", prompt, "s1"));
  ASSERT_EQ(s1_again.status, 200) << s1_again.body;
  EXPECT_EQ(endpoint_of(s1_again), s1_home);
  EXPECT_EQ(cached_tokens(s1_again), kCachedOnRepeat);
  // s2, sent: its blocks are its own, s1's stay s1's, in the router and in the engine
  // (`kvgate engine` seeds its block hashes with the salt, as vLLM).
  auto s2 = gw.gw.post("/v1/completions", completion("sim", prompt, "s2"));
  ASSERT_EQ(s2.status, 200) << s2.body;
  EXPECT_EQ(cached_tokens(s2), 0);
  const std::string s2_home = endpoint_of(s2);
  const std::map<std::string, int64_t> for_s2 = matched(gw.admin_url, prompt, "s2");
  ASSERT_TRUE(for_s2.contains(s2_home));
  EXPECT_GT(for_s2.at(s2_home), 0);
  EXPECT_EQ(matched(gw.admin_url, prompt, "s1"), for_s1);
}

}  // namespace gateway_prefix_isolation_test
}  // namespace kvgate::testing
