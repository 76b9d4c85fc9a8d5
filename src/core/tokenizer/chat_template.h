// Chat templates: OpenAI messages -> the prompt text the model's own Jinja template in
// tokenizer_config.json produces under vLLM (transformers' apply_chat_template).
//
// Any template is compiled by kvgate's Jinja engine (src/core/template/) and rendered
// against the context vLLM builds (chat_context.h). Two templates also have hand-written
// renderers, chosen by the template's exact text and proven equal to the engine on
// generated conversations (tests/core/tokenizer/chat_fast_path_test.cc):
//   fast path qwen3  - Qwen3's ChatML template (tools, <think> handling, enable_thinking)
//   fast path llama3 - Llama 3's header template (bos_token, trimmed content)
// A fast path renders only requests it covers exactly (no documents, no other
// chat_template_kwargs, no continue_final_message, no request template); the rest go to
// the engine.
//
//   auto tpl = ChatTemplate::load(tokenizer_config_json);   // a syntax error fails here
//   auto req = parse_chat_request(body);
//   Result<std::string> prompt = tpl->render(*req);
//
// Thread-safety: immutable after load; render may run on any thread.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/common/result.h"
#include "core/template/template.h"
#include "core/tokenizer/chat.h"

namespace kvgate::tokenizer {

enum class TemplateFamily { kQwen3, kLlama3, kGeneral };

// tokenizer_config.json's special tokens, as transformers' special_tokens_map passes them
// to the template (only those that are set).
struct SpecialTokens {
  std::vector<std::pair<std::string, std::string>> named;  // bos_token, eos_token, ...
  std::vector<std::string> additional;                     // additional_special_tokens
  const std::string* find(std::string_view name) const;
};

struct ChatRenderOptions {
  int64_t now_unix_seconds = 0;  // for strftime_now
  // vLLM's --trust-request-chat-template: render a request's own chat_template (else it
  // is refused, as vLLM refuses it).
  bool trust_request_chat_template = false;
  bool allow_fast_path = true;  // false: always the engine (the equivalence tests)
  // vLLM's --chat-template-content-format. kAuto (vLLM's default) passes each message's
  // content as a list of {"type": "text", "text": ...} parts when the template loops over
  // message content, a string otherwise; kString and kOpenai force one, as the engines'
  // flag does. A template that tests `content is string` renders differently under the
  // two, so this must be what the pool's engines run with.
  enum class ContentFormat { kAuto, kString, kOpenai };
  ContentFormat content_format = ContentFormat::kAuto;
};

// "auto", "string", "openai" (vLLM's names); nullopt for anything else.
std::optional<ChatRenderOptions::ContentFormat> parse_content_format(std::string_view name);

class ChatTemplate {
 public:
  // Reads chat_template (a string, or a list of {"name", "template"}) and the special
  // tokens from tokenizer_config.json.
  static Result<ChatTemplate> load(std::string_view tokenizer_config_json);
  // For a template text and special tokens given directly.
  static Result<ChatTemplate> from_template(std::string_view template_text, SpecialTokens tokens);
  static Result<ChatTemplate> from_template(std::string_view template_text, std::string bos_token);

  // The default template's renderer.
  TemplateFamily family() const { return family_; }
  std::string_view family_name() const;  // "qwen3", "llama3", "general"
  // For `kvgate tokenize`: "fast path (qwen3)", "general engine", with the named templates.
  std::string describe() const;
  // Whether the default template iterates message content (vLLM's "openai" format).
  bool content_as_parts() const;
  size_t memory_bytes() const;

  // The prompt text. An empty message list is an error.
  Result<std::string> render(const ChatRequest& request,
                             const ChatRenderOptions& options = {}) const;

 private:
  struct Named {
    std::string name;
    std::shared_ptr<const jinja::Template> tpl;
  };
  const jinja::Template* pick(const ChatRequest& request, const ChatRenderOptions& options,
                              jinja::Template& scratch, std::string& error) const;
  bool fast_path_covers(const ChatRequest& request, const ChatRenderOptions& options) const;
  // The engine's render of tpl (context built and rendered in one render arena).
  Result<std::string> render_engine(const jinja::Template& tpl, const ChatRequest& request,
                                    bool parts, const ChatRenderOptions& options) const;

  TemplateFamily family_ = TemplateFamily::kGeneral;
  std::shared_ptr<const jinja::Template> default_;
  std::vector<Named> named_;  // the list form's other templates ("tool_use", ...)
  SpecialTokens tokens_;
};

// Why a request did not render, as a metrics label: "bad_request" (not parseable),
// "unsupported_content" (a non-text part), "request_template_untrusted" (its own template
// without trust) or "render_error" (the template raised or failed).
std::string_view fallback_reason(const Result<ChatRequest>& request,
                                 const ChatRenderOptions& options);

// Python's str.strip() (Unicode whitespace), which Jinja's `trim` filter applies.
std::string_view python_strip(std::string_view s);

}  // namespace kvgate::tokenizer
