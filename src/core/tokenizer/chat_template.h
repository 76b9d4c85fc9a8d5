// Chat templates: OpenAI messages -> the prompt text the model's own Jinja template in
// tokenizer_config.json would produce, without a Jinja interpreter.
//
// kvgate recognizes the template by its exact text (a hash) and renders it with C++ code
// written to follow that template line by line. Known families:
//   kQwen3  - Qwen3's ChatML template (tools, <think> handling, enable_thinking)
//   kLlama3 - Llama 3's header template (bos_token, trimmed content, assistant header)
// Any other template is rejected at load, so a pool can fall back to routing on the raw
// message text (approximate mode) instead of routing on wrong tokens.
//
//   auto tpl = ChatTemplate::load(tokenizer_config_json);
//   auto req = parse_chat_request(body);
//   Result<std::string> prompt = tpl->render(*req);
#pragma once

#include <string>
#include <string_view>

#include "core/common/result.h"
#include "core/tokenizer/chat.h"

namespace kvgate::tokenizer {

enum class TemplateFamily { kQwen3, kLlama3 };

class ChatTemplate {
 public:
  // Reads chat_template and bos_token from tokenizer_config.json.
  static Result<ChatTemplate> load(std::string_view tokenizer_config_json);
  // For a template text and BOS given directly.
  static Result<ChatTemplate> from_template(std::string_view template_text, std::string bos_token);

  TemplateFamily family() const { return family_; }
  std::string_view family_name() const;

  // The prompt text. REQUIRES nothing; an empty message list is an error.
  Result<std::string> render(const ChatRequest& request) const;

 private:
  TemplateFamily family_ = TemplateFamily::kQwen3;
  std::string bos_token_;
};

// Python's str.strip() (Unicode whitespace), which Jinja's `trim` filter applies.
std::string_view python_strip(std::string_view s);

}  // namespace kvgate::tokenizer
