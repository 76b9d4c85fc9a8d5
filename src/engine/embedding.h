// What `kvgate engine` answers to POST /v1/embeddings: a deterministic embedding of the
// input's tokens and vLLM's response body around it.
//
// The simulated model has no weights, so an embedding is a function of the tokens alone:
// each token id draws a vector of values in [-1, 1) from a generator seeded by the id
// (the same id, the same vector, in every process), the input's vector is their mean,
// normalized to length 1 as vLLM's embedding pooler does. Equal inputs give equal
// embeddings, and inputs that share many tokens point in similar directions, which is all
// a client's tests can ask of a simulator.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/kv/block_hash.h"

namespace kvgate::engine_server {

// The first `size` values of the embedding of `tokens`, normalized to length 1 (a
// Matryoshka model's shorter embedding, as vLLM gives it for `dimensions`).
// REQUIRES: !tokens.empty(), size > 0.
std::vector<float> embedding_of(std::span<const kv::TokenId> tokens, uint32_t size);

// vLLM's EmbeddingResponse: {"id", "object": "list", "created", "model", "data": [{"index",
// "object": "embedding", "embedding"}], "usage": {"prompt_tokens", "total_tokens",
// "completion_tokens": 0, "prompt_tokens_details": null}}. base64: each embedding is the
// base64 text of its little-endian float32 values, else a list of numbers.
std::string render_embedding_response(std::string_view id, int64_t created, std::string_view model,
                                      const std::vector<std::vector<float>>& embeddings,
                                      bool base64, uint32_t prompt_tokens);

// POST /score and /rerank: how well `second` answers `first`, in [0, 1] (a cross-encoder's
// probability): their embeddings' cosine, moved from [-1, 1] to [0, 1].
double relevance(std::span<const kv::TokenId> first, std::span<const kv::TokenId> second);

// vLLM's ScoreResponse: {"id", "object": "list", "created", "model", "data": [{"index",
// "object": "score", "score"}], "usage"} (usage as an embedding's).
std::string render_score_response(std::string_view id, int64_t created, std::string_view model,
                                  const std::vector<double>& scores, uint32_t prompt_tokens);
// vLLM's RerankResponse: {"id", "model", "usage": {"prompt_tokens", "total_tokens"},
// "results": [{"index", "document": {"text"}, "relevance_score"}]}, the best first, the
// first `top_n` of them (0: all).
std::string render_rerank_response(std::string_view id, std::string_view model,
                                   const std::vector<std::string>& documents,
                                   const std::vector<double>& scores, uint32_t top_n,
                                   uint32_t prompt_tokens);

}  // namespace kvgate::engine_server
