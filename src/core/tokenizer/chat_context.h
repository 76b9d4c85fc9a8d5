// The variables a chat template sees, built as vLLM and transformers build them:
// messages (normalized by parse_chat_request), tools and documents (None when absent),
// add_generation_prompt, the special tokens of tokenizer_config.json and the request's
// chat_template_kwargs on top. continue_final_message is not a variable: transformers
// appends a tag to the final message, renders, and cuts the prompt at the tag
// (continue_final_message_tag / cut_at_continue_tag).
//
// The context views the request's strings and JSON: the request must outlive the render.
#pragma once

#include <string>
#include <string_view>

#include "core/common/result.h"
#include "core/template/template.h"
#include "core/template/value.h"
#include "core/tokenizer/chat.h"

namespace kvgate::tokenizer {

struct SpecialTokens;

// content_as_parts: the template iterates content (vLLM's "openai" content format), so
// content is a list of {"type": "text", "text": ...} instead of a string. With `only_for`,
// the variables that template never names are left out (they could not be read; tools
// and documents are the costly ones to build). Fails for JSON (tools, documents, tool calls,
// kwargs) nested too deep for a template (jinja::from_json).
Result<jinja::Value> build_chat_context(const ChatRequest& request, const SpecialTokens& tokens,
                                        bool content_as_parts,
                                        const jinja::Template* only_for = nullptr);

// transformers' continue_final_message: the marker build_chat_context appends to the
// final message's (last text part's) content, and the cut of the rendered prompt.
inline constexpr std::string_view kContinueFinalMessageTag = "CONTINUE_FINAL_MESSAGE_TAG ";
Result<std::string> cut_at_continue_tag(std::string rendered, std::string_view final_text);

}  // namespace kvgate::tokenizer
