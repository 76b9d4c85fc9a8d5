// Anthropic's Messages API (POST /v1/messages), as vLLM serves it natively and the
// `@anthropic-ai/sdk` client speaks it: the gateway routes it and keeps its error shape,
// the engine simulator answers it.
//
// A Messages request is routed as the chat request vLLM turns it into before rendering
// (messages_to_chat): the system prompt first, text blocks as text parts, an assistant's
// tool_use blocks as tool calls, a user's tool_result blocks as tool messages, images as
// image parts. Its answers: a whole message, or named SSE events (message_start,
// content_block_start, ping, content_block_delta, content_block_stop, message_delta,
// message_stop). Errors are {"type": "error", "error": {"type", "message"}}.
// POST /v1/messages/count_tokens takes the same body without max_tokens and answers the
// prompt's token count (count_tokens_to_chat, render_count_tokens).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/common/result.h"
#include "openai/engine_api.h"
#include "openai/usage.h"

namespace kvgate::openai::anthropic {

// The body as an OpenAI chat request (JSON text): model, messages (system first),
// max_tokens, stream, stop (stop_sequences), temperature, top_p, top_k, tools (as
// functions). Errors: kInvalidArgument (http_status: 400), the message naming the field
// (model, max_tokens and messages are required, as Anthropic's API requires them) and the
// error's field its path ("messages.0.content"; empty for the body as a whole).
Result<std::string> messages_to_chat(std::string_view body);
// POST /v1/messages/count_tokens: the body is a Messages body without max_tokens (and
// stream); the chat request it stands for, as messages_to_chat's (no max_tokens, no
// stream). A max_tokens or stream given is ignored. Errors as messages_to_chat's.
Result<std::string> count_tokens_to_chat(std::string_view body);
// Its answer: {"input_tokens": N, "context_management": {"original_input_tokens": N}}
// (Anthropic's field, and vLLM's extra).
std::string render_count_tokens(uint32_t input_tokens);

// Anthropic's error type for an HTTP status (400 invalid_request_error, 401
// authentication_error, 403 permission_error, 404 not_found_error, 413 request_too_large,
// 429 rate_limit_error, 500 api_error, 504 timeout_error, 529 and 503 overloaded_error).
std::string_view error_type(int status);
std::string error_json(int status, std::string_view message);
// An OpenAI-shaped error body ({"error": {"message", ...}}) in Anthropic's shape with the
// same message; any other body (already Anthropic's, or not JSON) worded from `status`
// alone when it is not Anthropic's.
std::string error_from_openai(int status, std::string_view body);

// Token counts of a whole message's `usage` (input_tokens, output_tokens,
// cache_read_input_tokens) as Usage's prompt, completion and cached tokens.
Usage parse_usage(std::string_view message_json);

// The engine's side. A whole message: content one text block; stop_reason as given.
std::string render_message(std::string_view id, std::string_view model, std::string_view text,
                           std::string_view stop_reason, const Usage& usage);
// The stream's opening events: message_start (input tokens), the text block's start, ping.
std::string render_stream_start(std::string_view id, std::string_view model, uint32_t input_tokens);
// One content_block_delta carrying `text`.
std::string render_text_delta(std::string_view text);
// The closing events: content_block_stop, message_delta (stop_reason, usage), message_stop.
std::string render_stream_end(std::string_view stop_reason, const Usage& usage);
// A mid-stream failure as an `error` event.
std::string render_error_event(int status, std::string_view message);

}  // namespace kvgate::openai::anthropic
