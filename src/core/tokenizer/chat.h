// An OpenAI chat request as vLLM hands it to the chat template: messages, tools,
// documents and the template switches. parse_chat_request reads it from the request
// body (JSON text) and applies vLLM's normalization (vllm/entrypoints/chat_utils.py):
//
// - content: a string, or a list of parts whose text parts vLLM joins with "\n" for
//   templates that take string content (`content`) or passes as [{"type": "text",
//   "text": ...}] for templates that iterate it (`parts`); null is "" / [];
// - tool call arguments given as a JSON string are parsed to an object (invalid JSON or
//   a non-object becomes {}), empty tool_calls are dropped;
// - reasoning (or reasoning_content) is passed as both, on assistant messages only;
// - tools are passed as vLLM's pydantic model_dump() prints them: {"type", "function":
//   {"name", "description", "parameters", ...extra}, ...extra}, absent fields as null.
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.h"

namespace kvgate::tokenizer {

struct ToolCall {
  std::string name;
  std::string arguments;    // the arguments object as Python's json.dumps prints it
  boost::json::value json;  // the whole call, normalized (for the general engine)
};

struct ChatMessage {
  std::string role;
  std::string content;  // text parts joined with "\n"
  std::optional<std::string> reasoning_content;
  std::vector<ToolCall> tool_calls;
  // The text parts when content was a list (else content is the one part, or none when
  // it was null), for templates that iterate content.
  std::vector<std::string> parts;
  bool content_is_list = false;
  bool content_is_null = false;
  std::optional<std::string> name;
  std::optional<std::string> tool_call_id;
};

struct ChatRequest {
  std::vector<ChatMessage> messages;
  std::vector<std::string> tools;  // each tool as the template's `tojson` prints it
  boost::json::value tools_json;   // the normalized tools list, or null when absent
  boost::json::value documents;    // null when absent
  bool add_generation_prompt = true;
  bool continue_final_message = false;
  std::optional<bool> enable_thinking;  // chat_template_kwargs.enable_thinking
  // chat_template_kwargs other than enable_thinking: template variables vLLM passes on.
  boost::json::object extra_kwargs;
  // The request's own template (the `chat_template` field), which vLLM honours only when
  // started with --trust-request-chat-template.
  std::optional<std::string> chat_template;
  // Non-empty: why this request cannot be rendered exactly (e.g. an image part).
  std::string unsupported;
  // Every string is valid UTF-8 already: set by parse_chat_request from JSON text (the
  // JSON parser refuses invalid UTF-8), so ChatTemplate::render does not check it again.
  // Clear it when changing a message's text to bytes that were not checked.
  bool utf8_checked = false;
};

// Parses {"messages": [...], "tools": [...], "documents": [...],
// "add_generation_prompt": b, "continue_final_message": b, "chat_template": s,
// "chat_template_kwargs": {...}} (other fields are ignored). Errors are what vLLM
// answers 400 for (or what kvgate cannot read).
Result<ChatRequest> parse_chat_request(std::string_view json);
// The same from a body already parsed.
Result<ChatRequest> parse_chat_request(const boost::json::object& body);

}  // namespace kvgate::tokenizer
