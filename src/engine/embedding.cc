#include "engine/embedding.h"

#include <openssl/evp.h>

#include <algorithm>
#include <bit>
#include <boost/json.hpp>
#include <cmath>
#include <cstring>

#include "core/common/rng.h"

namespace kvgate::engine_server {
namespace {

namespace json = boost::json;

// Little-endian float32 bytes, base64 (OpenSSL's encoder: no line breaks).
std::string base64_floats(const std::vector<float>& values) {
  std::string bytes(values.size() * sizeof(float), '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t bits = std::bit_cast<uint32_t>(values[i]);
    if constexpr (std::endian::native == std::endian::big) bits = __builtin_bswap32(bits);
    std::memcpy(bytes.data() + i * sizeof(float), &bits, sizeof(bits));
  }
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

}  // namespace

std::vector<float> embedding_of(std::span<const kv::TokenId> tokens, uint32_t size) {
  std::vector<double> sum(size, 0.0);
  for (kv::TokenId t : tokens) {
    Rng draw(0x9e3779b97f4a7c15ull ^ t);
    for (double& v : sum) v += 2 * draw.uniform() - 1;
  }
  double norm = 0;
  for (double v : sum) norm += v * v;
  norm = std::sqrt(norm);
  std::vector<float> out(size);
  for (uint32_t i = 0; i < size; ++i) {
    out[i] = static_cast<float>(norm > 0 ? sum[i] / norm : 0.0);
  }
  return out;
}

std::string render_embedding_response(std::string_view id, int64_t created, std::string_view model,
                                      const std::vector<std::vector<float>>& embeddings,
                                      bool base64, uint32_t prompt_tokens) {
  json::object body;
  body["id"] = id;
  body["object"] = "list";
  body["created"] = created;
  body["model"] = model;
  json::array data;
  data.reserve(embeddings.size());
  for (size_t i = 0; i < embeddings.size(); ++i) {
    json::object item;
    item["index"] = i;
    item["object"] = "embedding";
    if (base64) {
      item["embedding"] = base64_floats(embeddings[i]);
    } else {
      json::array values;
      values.reserve(embeddings[i].size());
      for (float v : embeddings[i]) values.emplace_back(static_cast<double>(v));
      item["embedding"] = std::move(values);
    }
    data.push_back(std::move(item));
  }
  body["data"] = std::move(data);
  json::object usage;
  usage["prompt_tokens"] = prompt_tokens;
  usage["total_tokens"] = prompt_tokens;
  usage["completion_tokens"] = 0;
  usage["prompt_tokens_details"] = nullptr;
  body["usage"] = std::move(usage);
  return json::serialize(body);
}

double relevance(std::span<const kv::TokenId> first, std::span<const kv::TokenId> second) {
  constexpr uint32_t kSize = 256;
  if (first.empty() || second.empty()) return 0.5;
  const std::vector<float> a = embedding_of(first, kSize);
  const std::vector<float> b = embedding_of(second, kSize);
  double cosine = 0;
  for (uint32_t i = 0; i < kSize; ++i) cosine += static_cast<double>(a[i]) * b[i];
  return std::clamp((cosine + 1) / 2, 0.0, 1.0);
}

std::string render_score_response(std::string_view id, int64_t created, std::string_view model,
                                  const std::vector<double>& scores, uint32_t prompt_tokens) {
  json::object body;
  body["id"] = id;
  body["object"] = "list";
  body["created"] = created;
  body["model"] = model;
  json::array data;
  for (size_t i = 0; i < scores.size(); ++i) {
    data.push_back(json::object{{"index", i}, {"object", "score"}, {"score", scores[i]}});
  }
  body["data"] = std::move(data);
  body["usage"] = json::object{{"prompt_tokens", prompt_tokens},
                               {"total_tokens", prompt_tokens},
                               {"completion_tokens", 0},
                               {"prompt_tokens_details", nullptr}};
  return json::serialize(body);
}

std::string render_rerank_response(std::string_view id, std::string_view model,
                                   const std::vector<std::string>& documents,
                                   const std::vector<double>& scores, uint32_t top_n,
                                   uint32_t prompt_tokens) {
  std::vector<size_t> order(scores.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  if (top_n > 0 && top_n < order.size()) order.resize(top_n);
  json::array results;
  for (size_t i : order) {
    results.push_back(json::object{{"index", i},
                                   {"document", json::object{{"text", documents[i]}}},
                                   {"relevance_score", scores[i]}});
  }
  json::object body{
      {"id", id},
      {"model", model},
      {"usage", json::object{{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}},
      {"results", std::move(results)}};
  return json::serialize(body);
}

}  // namespace kvgate::engine_server
