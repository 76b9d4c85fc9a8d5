#include "engine/embedding.h"

#include <gtest/gtest.h>

#include <bit>
#include <boost/json.hpp>
#include <cmath>
#include <cstring>
#include <numeric>

namespace kvgate::engine_server {
namespace {

namespace json = boost::json;

double norm_of(const std::vector<float>& v) {
  return std::sqrt(std::inner_product(v.begin(), v.end(), v.begin(), 0.0));
}

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  return std::inner_product(a.begin(), a.end(), b.begin(), 0.0) / (norm_of(a) * norm_of(b));
}

TEST(Embedding, IsUnitLengthDeterministicAndCloserForSharedTokens) {
  const std::vector<kv::TokenId> a = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<kv::TokenId> near = {1, 2, 3, 4, 5, 6, 7, 9};
  const std::vector<kv::TokenId> far = {100, 200, 300, 400, 500, 600, 700, 800};
  const std::vector<float> ea = embedding_of(a, 256);
  ASSERT_EQ(ea.size(), 256u);
  EXPECT_NEAR(norm_of(ea), 1.0, 1e-5);
  EXPECT_EQ(embedding_of(a, 256), ea);
  EXPECT_GT(cosine(ea, embedding_of(near, 256)), 0.8);
  EXPECT_LT(std::abs(cosine(ea, embedding_of(far, 256))), 0.3);
  // A shorter embedding (dimensions) is the longer one's start, normalized again.
  const std::vector<float> short8 = embedding_of(a, 8);
  EXPECT_NEAR(norm_of(short8), 1.0, 1e-5);
  EXPECT_GT(cosine(short8, std::vector<float>(ea.begin(), ea.begin() + 8)), 0.99999);
}

TEST(Embedding, ResponseIsVllmsInFloatsAndInBase64) {
  const std::vector<std::vector<float>> e = {{0.5f, -0.25f}, {1.0f, 0.0f}};
  json::value floats = json::parse(render_embedding_response("embd-1", 7, "m", e, false, 9));
  EXPECT_EQ(floats, json::parse(R"({"id":"embd-1","object":"list","created":7,"model":"m",
      "data":[{"index":0,"object":"embedding","embedding":[0.5,-0.25]},
              {"index":1,"object":"embedding","embedding":[1.0,0.0]}],
      "usage":{"prompt_tokens":9,"total_tokens":9,"completion_tokens":0,
               "prompt_tokens_details":null}})"));
  json::value b64 = json::parse(render_embedding_response("embd-1", 7, "m", e, true, 9));
  // 0.5f = 00 00 00 3f, -0.25f = 00 00 80 be (little-endian): "AAAAPwAAgL4=".
  EXPECT_EQ(b64.at("data").at(0).at("embedding"), json::value("AAAAPwAAgL4="));
  EXPECT_EQ(b64.at("data").at(1).at("embedding"), json::value("AACAPwAAAAA="));
}

TEST(Embedding, RelevanceRanksSharedTokensFirstAndRendersAsVllm) {
  const std::vector<kv::TokenId> query = {1, 2, 3, 4};
  const std::vector<kv::TokenId> close = {1, 2, 3, 9};
  const std::vector<kv::TokenId> far = {70, 80, 90, 99};
  const double near_score = relevance(query, close);
  const double far_score = relevance(query, far);
  EXPECT_GT(near_score, far_score);
  EXPECT_GE(far_score, 0.0);
  EXPECT_LE(near_score, 1.0);
  json::value score = json::parse(render_score_response("score-1", 3, "m", {0.25, 0.5}, 6));
  EXPECT_EQ(score, json::parse(R"({"id":"score-1","object":"list","created":3,"model":"m",
      "data":[{"index":0,"object":"score","score":0.25},{"index":1,"object":"score","score":0.5}],
      "usage":{"prompt_tokens":6,"total_tokens":6,"completion_tokens":0,
               "prompt_tokens_details":null}})"));
  json::value rerank =
      json::parse(render_rerank_response("rerank-1", "m", {"a", "b", "c"}, {0.1, 0.9, 0.5}, 2, 6));
  EXPECT_EQ(rerank, json::parse(R"({"id":"rerank-1","model":"m",
      "usage":{"prompt_tokens":6,"total_tokens":6},
      "results":[{"index":1,"document":{"text":"b"},"relevance_score":0.9},
                 {"index":2,"document":{"text":"c"},"relevance_score":0.5}]})"));
}

}  // namespace
}  // namespace kvgate::engine_server
