// OpenAI's Responses API (POST /v1/responses), as vLLM serves it and the `openai` npm
// client speaks it: the gateway routes it, the engine simulator answers it.
//
// A Responses request is routed as the chat request vLLM turns it into (to_chat):
// `instructions` as the system message, `input` a string (one user message) or items
// (messages with input_text / output_text / input_image parts, function_call and
// function_call_output items as tool calls and tool messages), `max_output_tokens` as
// max_tokens, function tools as chat tools, vLLM's `cache_salt` as it is. A request may continue an
// earlier response
// (`previous_response_id`): the engine that stored it holds the conversation and its KV,
// so the gateway sends the request back there (gateway.md, "Responses").
//
// Answers: a response object, or events with `event:` names and a `sequence_number`
// (response.created, response.in_progress, response.output_item.added,
// response.content_part.added, response.output_text.delta..., response.output_text.done,
// response.content_part.done, response.output_item.done, response.completed); no [DONE].
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/common/result.h"
#include "openai/engine_api.h"
#include "openai/usage.h"

namespace kvgate::openai::responses {

struct ChatForm {
  std::string chat;                  // the chat request's JSON text
  std::string previous_response_id;  // "" when none
  bool store = true;                 // the response is kept for a later previous_response_id
  bool has_instructions = false;     // the chat's first message is `instructions`
};
// Errors: kInvalidArgument (http_status: 400), the message naming the field (`input` is
// required) and the error's field the parameter or path ("input.0.content"; empty for the
// body as a whole).
Result<ChatForm> to_chat(std::string_view body);

// The chat request that continues a stored response (vLLM's order): this request's
// instructions (when it has them), the stored conversation's messages, the stored answer
// as an assistant message, then this request's input. `previous_messages`: a JSON array's
// text (messages_of). REQUIRES: `chat` is to_chat's.
std::string continue_chat(std::string_view chat, bool has_instructions,
                          std::string_view previous_messages, std::string_view previous_output);
// The `messages` array of a chat request's JSON text, as JSON text ("[]" when none).
std::string messages_of(std::string_view chat);

// Token counts of a response object's `usage` (input_tokens, output_tokens,
// input_tokens_details.cached_tokens), also inside a response.completed event's `response`.
Usage parse_usage(std::string_view json_text);
// The `id` of a response object, or of the `response` a response.created event carries;
// "" when there is none.
std::string response_id(std::string_view json_text);
// A whole answer (a response object) read once: its usage (parse_usage) and its id
// (response_id).
//   Answered a = read_answer(body);
//   charge(a.usage); remember(std::move(a.id), endpoint);
struct Answered {
  Usage usage;
  std::string id;  // "" when there is none
};
Answered read_answer(std::string_view json_text);

// The engine's side: one answer's fixed fields.
struct Answer {
  std::string id;       // "resp_..."
  std::string item_id;  // "msg_..."
  int64_t created_at = 0;
  std::string model;
  std::string previous_response_id;  // "" when none
  uint32_t max_output_tokens = 0;
  bool incomplete = false;  // stopped at max_output_tokens
};
std::string render_response(const Answer& a, std::string_view text, const Usage& usage);
// The stream's events before the first delta (created, in_progress, item and part added);
// `seq` is the next sequence number, advanced past the events written.
std::string render_stream_start(const Answer& a, uint64_t& seq);
std::string render_text_delta(const Answer& a, std::string_view delta, uint64_t& seq);
// The closing events (text done, part done, item done, response.completed).
std::string render_stream_end(const Answer& a, std::string_view text, const Usage& usage,
                              uint64_t& seq);
// A failure after the first byte: an `error` event (the openai client throws it).
std::string render_error_event(std::string_view code, std::string_view message);

}  // namespace kvgate::openai::responses
