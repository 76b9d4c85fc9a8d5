// The request and response bodies of an OpenAI-compatible inference server, as vLLM's
// OpenAI server reads and writes them and the engine simulator (`kvgate engine`) speaks
// them: POST /v1/completions and /v1/chat/completions (whole and SSE), POST /tokenize,
// usage with prompt_tokens_details.cached_tokens, and vLLM's kv_transfer_params for
// prefill/decode disaggregation (PROTOCOLS.md). The gateway's side of the same bodies is
// request.h and sse_tap.h.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/common/result.h"
#include "core/kv/block_hash.h"
#include "core/tokenizer/chat.h"
#include "openai/api_kind.h"
#include "openai/usage.h"

namespace kvgate::openai {

// vLLM's P/D handshake (NixlConnector). kvgate adds remote_rack / remote_zone so a
// decode engine can tell how far the KV has to travel.
struct KvTransferParams {
  bool do_remote_decode = false;
  bool do_remote_prefill = false;
  std::optional<std::string> remote_engine_id;
  std::optional<std::string> remote_host;
  std::optional<int64_t> remote_port;
  std::vector<int64_t> remote_block_ids;
  std::optional<std::string> remote_rack;
  std::optional<std::string> remote_zone;
};

struct CompletionRequest {
  ApiKind kind = ApiKind::kCompletion;
  std::string model;  // "" when absent
  // Exactly one of these holds the prompt.
  std::optional<std::string> prompt_text;
  std::optional<std::vector<kv::TokenId>> prompt_tokens;
  tokenizer::ChatRequest chat;  // kChat (core/tokenizer/chat.h)
  // The tokenizer's post-processor tokens on top (vLLM's default: true for completions,
  // false for chat, whose template writes them).
  bool add_special_tokens = true;
  std::optional<uint32_t> max_tokens;  // max_tokens or max_completion_tokens
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  int32_t priority = 0;
  std::optional<KvTransferParams> kv_transfer;
  // vLLM's return_token_ids: the answer carries the prompt's token ids (once) and the
  // ids of the tokens it produced (per chunk when streamed).
  bool return_token_ids = false;
  // Sampling temperature when given; 0 samples greedily (core/engine/greedy_decode.h:
  // the answer is a function of the prompt).
  std::optional<double> temperature;
  // vLLM's cache_salt ("" for none): seeds the prompt's first block hash, so no prefix is
  // shared with another salt (or with none). A given one must be a non-empty string.
  std::string cache_salt;
};

// Parses a request body. Every parser here fails with kInvalidArgument (http_status: 400),
// a message naming the field and, when it is one parameter, that parameter as the
// error's field (OpenAI's `param`; empty for the body as a whole).
Result<CompletionRequest> parse_completion_request(std::string_view body, ApiKind kind);

// POST /tokenize as vLLM takes it (TokenizeCompletionRequest | TokenizeChatRequest):
// {"prompt": s, "add_special_tokens"} or {"messages": [...], "add_generation_prompt",
// "continue_final_message", "add_special_tokens", "chat_template", "chat_template_kwargs",
// "tools", "documents"}; "model" and "return_token_strs" are read too.
struct TokenizeRequest {
  std::string model;                  // "" when absent
  std::optional<std::string> prompt;  // the completion form
  tokenizer::ChatRequest chat;        // the chat form (no prompt)
  bool add_special_tokens = false;    // default: true for a prompt, false for messages
  bool return_token_strs = false;
};
Result<TokenizeRequest> parse_tokenize_request(std::string_view body);

// TokenizeResponse: {"count", "max_model_len", "tokens", "token_strs"}. token_strs: the
// text of each token when given (with return_token_strs), else null.
std::string render_tokenize_response(std::span<const kv::TokenId> tokens, uint32_t max_model_len,
                                     const std::vector<std::string>* token_strs = nullptr);

// POST /detokenize as vLLM takes it: {"model", "tokens": [ids]}; answered {"prompt": text}.
struct DetokenizeRequest {
  std::string model;  // "" when absent
  std::vector<kv::TokenId> tokens;
};
Result<DetokenizeRequest> parse_detokenize_request(std::string_view body);
std::string render_detokenize_response(std::string_view prompt);

// POST /v1/embeddings as vLLM takes it (EmbeddingCompletionRequest): "input" is a string,
// a list of strings, a list of token ids or a list of lists of token ids (each item one
// embedding, in order); "encoding_format" "float" (the default) or "base64" (little-endian
// float32, what the openai npm client asks for); "dimensions" (a Matryoshka model's
// shorter embedding: the first N values, normalized again); "model" and
// "truncate_prompt_tokens" are read too.
struct EmbeddingInput {
  std::optional<std::string> text;  // else `tokens`
  std::vector<kv::TokenId> tokens;
};
struct EmbeddingRequest {
  std::string model;  // "" when absent
  std::vector<EmbeddingInput> inputs;
  bool base64 = false;
  std::optional<uint32_t> dimensions;
  std::optional<uint32_t> truncate_prompt_tokens;  // keep only the last N tokens
};
Result<EmbeddingRequest> parse_embedding_request(std::string_view body);

// POST /score (/v1/score) as vLLM takes it: "text_1" and "text_2", each a string or a
// list of strings, one score per pair: a single text_1 with each text_2, or lists of one
// length item by item. POST /rerank (/v1/rerank, /v2/rerank): "query", "documents" (a
// list of strings), "top_n" (0: all). Both read "model" and "truncate_prompt_tokens".
struct ScoreRequest {
  std::string model;  // "" when absent
  std::vector<std::pair<std::string, std::string>> pairs;
  std::optional<uint32_t> truncate_prompt_tokens;
};
Result<ScoreRequest> parse_score_request(std::string_view body);
struct RerankRequest {
  std::string model;  // "" when absent
  std::string query;
  std::vector<std::string> documents;
  uint32_t top_n = 0;
  std::optional<uint32_t> truncate_prompt_tokens;
};
Result<RerankRequest> parse_rerank_request(std::string_view body);

// Identity of one response, shared by all its chunks.
struct ResponseIds {
  std::string id;  // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;
  std::string model;
};

// Token ids an answer carries with return_token_ids, where vLLM puts them: a chat
// answer's prompt_token_ids at the top level (streamed: in the first chunk), a
// completion's in its choice; `tokens` (the chunk's or the whole answer's) as the
// choice's token_ids. prompt null: no prompt_token_ids in this chunk.
struct TokenIdFields {
  std::span<const kv::TokenId> tokens;
  const std::vector<kv::TokenId>* prompt = nullptr;
};

// A whole (non-streamed) response. kv_transfer_json: a JSON object text, or "" for none.
std::string render_response(ApiKind kind, const ResponseIds& ids, std::string_view text,
                            std::string_view finish_reason, const Usage& usage,
                            std::string_view kv_transfer_json,
                            const TokenIdFields* token_ids = nullptr);

// One SSE event "data: {...}\n\n" carrying `delta`. role_chunk: the first chat chunk
// (delta {"role":"assistant","content":""}). finish_reason: "" while not finished.
// with_usage_null: adds "usage": null (stream_options.include_usage).
// token_ids: with return_token_ids.
std::string render_chunk(ApiKind kind, const ResponseIds& ids, std::string_view delta,
                         bool role_chunk, std::string_view finish_reason, bool with_usage_null,
                         const TokenIdFields* token_ids = nullptr);
// The final usage event ("choices": []) sent before [DONE] with include_usage.
std::string render_usage_chunk(ApiKind kind, const ResponseIds& ids, const Usage& usage);

inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace kvgate::openai
