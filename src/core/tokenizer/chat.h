// An OpenAI chat request as the chat templates see it: messages, tools and the template
// switches. parse_chat_request reads it from the request body (JSON text).
//
// Content given as a list of parts is joined with "\n" over its text parts, as vLLM does
// for templates that take string content; null content is "".
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.h"

namespace kvgate::tokenizer {

struct ToolCall {
  std::string name;
  std::string arguments;  // verbatim when a string in the request, else tojson text
  bool arguments_is_string = true;
};

struct ChatMessage {
  std::string role;
  std::string content;
  std::optional<std::string> reasoning_content;
  std::vector<ToolCall> tool_calls;
};

struct ChatRequest {
  std::vector<ChatMessage> messages;
  std::vector<std::string> tools;  // each tool as the template's `tojson` prints it
  bool add_generation_prompt = true;
  std::optional<bool> enable_thinking;  // chat_template_kwargs.enable_thinking
};

// Parses {"messages": [...], "tools": [...], "add_generation_prompt": b,
// "chat_template_kwargs": {"enable_thinking": b}} (other fields are ignored).
Result<ChatRequest> parse_chat_request(std::string_view json);

}  // namespace kvgate::tokenizer
