// The engine fallback's wire format: a client's OpenAI request turned into vLLM's
// `POST /tokenize` body, and the engine's answer turned back into token ids. Pure: the
// gateway shell sends the body (gateway/data/engine_tokenizer.h).
//
// vLLM (vllm/entrypoints/openai/protocol.py) takes two forms:
//   TokenizeChatRequest: {"model", "messages", "add_generation_prompt" (default true),
//     "continue_final_message" (false), "add_special_tokens" (false), "chat_template",
//     "chat_template_kwargs", "tools", "return_token_strs"}
//   TokenizeCompletionRequest: {"model", "prompt" (a string), "add_special_tokens" (true)}
// and answers TokenizeResponse {"count", "max_model_len", "tokens", "token_strs"}.
// The chat form's defaults are the chat completion's, so a field goes to /tokenize only
// when the client's request has it: the engine then renders exactly what it will render
// for the request itself. `documents` (which TokenizeChatRequest lacks) is passed as
// chat_template_kwargs.documents, which vLLM merges into the template's variables the
// same way.
//
// Cache keys (engine_id_cache.h): a chat request's key chain has one key per message;
// key i names the conversation through message i under the request's rendering options
// (the served model and every field above but the messages), so a follow-up that
// re-sends the conversation so far shares the keys of its earlier turns. A completion
// has one key, of its whole body.
//
//   TokenizeCall call = build_tokenize_call(body, /*chat=*/true, "qwen3-32b");
//   if (!call.approximate.empty()) ... route on pseudo-tokens, count call.approximate ...
//   ... POST call.body to /tokenize ...
//   Result<std::vector<uint32_t>> ids = parse_tokenize_response(answer);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.h"

namespace kvgate::tokenizer {

// 128 bits of a conversation prefix (xxHash3-128); never {0, 0}.
struct PrefixKey {
  uint64_t lo = 0, hi = 0;
  bool operator==(const PrefixKey&) const = default;
};

struct TokenizeCall {
  // Non-empty: no call can be made; route approximately and count this reason:
  // "bad_request" (the body is not a request the gateway can read) or "batched_prompt"
  // (a completion with several prompts). `error` says more, for logs.
  std::string_view approximate;
  std::string error;
  // A completion whose prompt is token ids already: route on them, no call.
  std::optional<std::vector<uint32_t>> given_ids;
  std::string body;              // the POST /tokenize body
  std::vector<PrefixKey> chain;  // chat: one key per message; completion: one key
  // The request's text (message contents, or the prompt) and where each message's text
  // ends in it: the pseudo-tokens of the messages after a cached prefix come from here.
  std::string text;
  std::vector<size_t> text_end;  // by chain index
};

// `chat`: a /v1/chat/completions body, else /v1/completions. `served_model` is the
// model name the engines serve (the body's `model` is replaced by it).
TokenizeCall build_tokenize_call(std::string_view client_body, bool chat,
                                 std::string_view served_model);

// The ids of a TokenizeResponse. Errors: not JSON, no `tokens` list of ids (integers in
// [0, 2^32)), or a `count` that disagrees with it.
Result<std::vector<uint32_t>> parse_tokenize_response(std::string_view body);

}  // namespace kvgate::tokenizer
