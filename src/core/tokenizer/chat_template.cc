#include "core/tokenizer/chat_template.h"

#include <xxhash.h>

#include <boost/json.hpp>

#include "core/common/unicode.h"
#include "core/template/arena.h"
#include "core/tokenizer/chat_context.h"

namespace kvgate::tokenizer {

using unicode::CodePoint;
using unicode::decode_utf8;
using unicode::find_invalid_utf8;

namespace {

struct Known {
  uint64_t hash;
  size_t size;
  TemplateFamily family;
};
// XXH3-64 of the exact template texts kvgate renders.
constexpr Known kKnown[] = {
    // a fast path for each
    {0x0283f874ff58d644ULL, 4116, TemplateFamily::kQwen3},  // Qwen3 (hybrid thinking)
    {0xb97891b7adc1beb8ULL, 348, TemplateFamily::kLlama3},  // Meta Llama 3 Instruct
};

bool python_space(char32_t c) {
  return (c >= 9 && c <= 13) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

std::string_view strip_char(std::string_view s, char c, bool left, bool right) {
  while (left && !s.empty() && s.front() == c) s.remove_prefix(1);
  while (right && !s.empty() && s.back() == c) s.remove_suffix(1);
  return s;
}

// Python's s.split(sep)[0] and s.split(sep)[-1].
std::string_view split_first(std::string_view s, std::string_view sep) {
  const size_t p = s.find(sep);
  return p == std::string_view::npos ? s : s.substr(0, p);
}
std::string_view split_last(std::string_view s, std::string_view sep) {
  const size_t p = s.rfind(sep);
  return p == std::string_view::npos ? s : s.substr(p + sep.size());
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

std::string render_qwen3(const ChatRequest& req) {
  const auto& msgs = req.messages;
  std::string out;
  if (!req.tools.empty()) {
    out += "<|im_start|>system\n";
    if (msgs[0].role == "system") out += msgs[0].content + "\n\n";
    out +=
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou "
        "are provided with function signatures within <tools></tools> XML tags:\n<tools>";
    for (const std::string& tool : req.tools) out += "\n" + tool;
    out +=
        "\n</tools>\n\nFor each function call, return a json object with function name and "
        "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
        "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n";
  } else if (msgs[0].role == "system") {
    out += "<|im_start|>system\n" + msgs[0].content + "<|im_end|>\n";
  }
  // The last real user query (not a tool response wrapped as a user message).
  size_t last_query = msgs.size() - 1;
  for (size_t k = msgs.size(); k-- > 0;) {
    const ChatMessage& m = msgs[k];
    if (m.role == "user" &&
        !(starts_with(m.content, "<tool_response>") && ends_with(m.content, "</tool_response>"))) {
      last_query = k;
      break;
    }
  }
  for (size_t i = 0; i < msgs.size(); ++i) {
    const ChatMessage& m = msgs[i];
    const bool last = i + 1 == msgs.size();
    if (m.role == "user" || (m.role == "system" && i != 0)) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      std::string_view content = m.content;
      std::string_view reasoning;
      if (m.reasoning_content) {
        reasoning = *m.reasoning_content;
      } else if (m.content.find("</think>") != std::string::npos) {
        content = strip_char(split_last(m.content, "</think>"), '\n', true, false);
        reasoning =
            strip_char(split_last(strip_char(split_first(m.content, "</think>"), '\n', false, true),
                                  "<think>"),
                       '\n', true, false);
      }
      out += "<|im_start|>" + m.role + "\n";
      if (i > last_query && (last || !reasoning.empty())) {
        out += "<think>\n";
        out += strip_char(reasoning, '\n', true, true);
        out += "\n</think>\n\n";
        out += strip_char(content, '\n', true, false);
      } else {
        out += content;
      }
      for (size_t k = 0; k < m.tool_calls.size(); ++k) {
        if (k > 0 || !content.empty()) out += "\n";
        out += "<tool_call>\n{\"name\": \"" + m.tool_calls[k].name + "\", \"arguments\": ";
        out += m.tool_calls[k].arguments;
        out += "}\n</tool_call>";
      }
      out += "<|im_end|>\n";
    } else if (m.role == "tool") {
      if (i == 0 || msgs[i - 1].role != "tool") out += "<|im_start|>user";
      out += "\n<tool_response>\n" + m.content + "\n</tool_response>";
      if (last || msgs[i + 1].role != "tool") out += "<|im_end|>\n";
    }
  }
  if (req.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (req.enable_thinking == false) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

std::string render_llama3(const ChatRequest& req, const std::string& bos) {
  std::string out;
  for (size_t i = 0; i < req.messages.size(); ++i) {
    const ChatMessage& m = req.messages[i];
    if (i == 0) out += bos;
    out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n";
    out += python_strip(m.content);
    out += "<|eot_id|>";
  }
  // This template adds the assistant header whatever add_generation_prompt says.
  out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

}  // namespace

std::string_view python_strip(std::string_view s) {
  size_t b = 0;
  while (b < s.size()) {
    const CodePoint c = decode_utf8(s, b);
    if (!python_space(c.cp)) break;
    b += c.len;
  }
  size_t e = s.size();
  while (e > b) {
    size_t k = e - 1;
    while (k > b && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
    if (!python_space(decode_utf8(s, k).cp)) break;
    e = k;
  }
  return s.substr(b, e - b);
}

std::string_view fallback_reason(const Result<ChatRequest>& request,
                                 const ChatRenderOptions& options) {
  if (!request) return "bad_request";
  if (!request->unsupported.empty()) return "unsupported_content";
  if (request->chat_template && !options.trust_request_chat_template)
    return "request_template_untrusted";
  return "render_error";
}

const std::string* SpecialTokens::find(std::string_view name) const {
  for (const auto& [k, v] : named)
    if (k == name) return &v;
  return nullptr;
}

Result<ChatTemplate> ChatTemplate::from_template(std::string_view text, SpecialTokens tokens) {
  auto compiled = jinja::Template::compile(text);
  if (!compiled) return Error("chat_template:" + compiled.error());
  ChatTemplate t;
  t.default_ = std::make_shared<const jinja::Template>(std::move(*compiled));
  t.tokens_ = std::move(tokens);
  const uint64_t h = XXH3_64bits(text.data(), text.size());
  for (const Known& k : kKnown)
    if (k.hash == h && k.size == text.size()) t.family_ = k.family;
  return t;
}

Result<ChatTemplate> ChatTemplate::from_template(std::string_view text, std::string bos_token) {
  SpecialTokens tokens;
  if (!bos_token.empty()) tokens.named.emplace_back("bos_token", std::move(bos_token));
  return from_template(text, std::move(tokens));
}

Result<ChatTemplate> ChatTemplate::load(std::string_view config_json) {
  namespace json = boost::json;
  boost::system::error_code ec;
  json::value root = json::parse(json::string_view(config_json.data(), config_json.size()), ec);
  if (ec || !root.is_object()) return Error("tokenizer_config.json: not a JSON object");
  const json::object& o = root.get_object();
  // transformers' special_tokens_map: the tokens that are set, strings or AddedToken dicts.
  auto token_text = [](const json::value& v) -> std::optional<std::string> {
    if (v.is_string()) return std::string(v.get_string());
    if (v.is_object() && v.get_object().if_contains("content") &&
        v.get_object().at("content").is_string())
      return std::string(v.get_object().at("content").get_string());
    return std::nullopt;
  };
  SpecialTokens tokens;
  for (const char* name : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                           "cls_token", "mask_token"}) {
    if (const json::value* v = o.if_contains(name))
      if (auto t = token_text(*v)) tokens.named.emplace_back(name, std::move(*t));
  }
  if (const json::value* a = o.if_contains("additional_special_tokens"); a && a->is_array()) {
    for (const auto& x : a->get_array())
      if (auto t = token_text(x)) tokens.additional.push_back(std::move(*t));
  }
  const json::value* tpl = o.if_contains("chat_template");
  if (tpl && tpl->is_string()) {
    auto t = from_template(tpl->get_string(), std::move(tokens));
    if (!t) return Error("tokenizer_config.json: " + t.error());
    return t;
  }
  if (!tpl || !tpl->is_array()) return Error("tokenizer_config.json: chat_template: missing");
  // [{"name": "default", "template": "..."}, {"name": "tool_use", ...}]
  std::optional<ChatTemplate> out;
  std::vector<Named> named;
  size_t i = 0;
  for (const auto& item : tpl->get_array()) {
    const std::string path = "tokenizer_config.json: chat_template[" + std::to_string(i++) + "]";
    const json::object* io = item.if_object();
    if (!io || !io->if_contains("name") || !io->at("name").is_string() ||
        !io->if_contains("template") || !io->at("template").is_string())
      return Error(path + ": needs a \"name\" and a \"template\" string");
    const std::string name(io->at("name").get_string());
    auto t = from_template(io->at("template").get_string(), tokens);
    if (!t) return Error(path + " (" + name + "): " + t.error());
    if (name == "default") {
      out = std::move(*t);
    } else {
      named.push_back({name, t->default_});
    }
  }
  if (!out) return Error("tokenizer_config.json: chat_template: no template named \"default\"");
  out->named_ = std::move(named);
  return std::move(*out);
}

std::string_view ChatTemplate::family_name() const {
  switch (family_) {
    case TemplateFamily::kQwen3:
      return "qwen3";
    case TemplateFamily::kLlama3:
      return "llama3";
    default:
      return "general";
  }
}

std::string ChatTemplate::describe() const {
  std::string s = family_ == TemplateFamily::kGeneral
                      ? "general engine"
                      : "fast path (" + std::string(family_name()) + "), general engine otherwise";
  if (content_as_parts()) s += ", content as parts";
  for (const Named& n : named_) s += ", named template '" + n.name + "' (general engine)";
  return s;
}

bool ChatTemplate::content_as_parts() const { return default_->iterates_content(); }

std::optional<ChatRenderOptions::ContentFormat> parse_content_format(std::string_view name) {
  using F = ChatRenderOptions::ContentFormat;
  if (name == "auto") return F::kAuto;
  if (name == "string") return F::kString;
  if (name == "openai") return F::kOpenai;
  return std::nullopt;
}

size_t ChatTemplate::memory_bytes() const {
  size_t n = sizeof(*this) + default_->memory_bytes();
  for (const Named& t : named_) n += t.name.capacity() + t.tpl->memory_bytes();
  return n;
}

bool ChatTemplate::fast_path_covers(const ChatRequest& req, const ChatRenderOptions& opt) const {
  if (family_ == TemplateFamily::kGeneral || !opt.allow_fast_path) return false;
  // A fast path renders the content format auto detects for its template, no other.
  if (opt.content_format != ChatRenderOptions::ContentFormat::kAuto &&
      (opt.content_format == ChatRenderOptions::ContentFormat::kOpenai) != content_as_parts())
    return false;
  if (req.chat_template || !req.documents.is_null() || !req.extra_kwargs.empty() ||
      req.continue_final_message)
    return false;
  for (const Named& n : named_)
    if (n.name == "tool_use" && !req.tools_json.is_null()) return false;
  return true;
}

const jinja::Template* ChatTemplate::pick(const ChatRequest& req, const ChatRenderOptions& opt,
                                          jinja::Template& scratch, std::string& error) const {
  if (req.chat_template) {
    if (!opt.trust_request_chat_template) {
      error =
          "chat_template: the request carries its own template, which vLLM refuses without "
          "--trust-request-chat-template";
      return nullptr;
    }
    for (const Named& n : named_)  // a name selects one of the model's named templates
      if (n.name == *req.chat_template) return n.tpl.get();
    if (*req.chat_template == "default") return default_.get();
    auto t = jinja::Template::compile(*req.chat_template);
    if (!t) {
      error = "request chat_template:" + t.error();
      return nullptr;
    }
    scratch = std::move(*t);
    return &scratch;
  }
  if (!req.tools_json.is_null())
    for (const Named& n : named_)
      if (n.name == "tool_use") return n.tpl.get();
  return default_.get();
}

Result<std::string> ChatTemplate::render_engine(const jinja::Template& tpl,
                                                const ChatRequest& request, bool parts,
                                                const ChatRenderOptions& options) const {
  // The context and every Value of the render are made in this thread's render arena,
  // and are gone when it closes (the prompt is a std::string on the heap).
  jinja::RenderArena arena;
  const Result<jinja::Value> ctx = build_chat_context(request, tokens_, parts, &tpl);
  if (!ctx) return Error(ctx.failure());
  jinja::RenderOptions ro;
  ro.now_unix_seconds = options.now_unix_seconds;
  return tpl.render(*ctx, ro);
}

Result<std::string> ChatTemplate::render(const ChatRequest& request,
                                         const ChatRenderOptions& options) const {
  if (request.messages.empty()) return Error("messages: empty");
  if (!request.unsupported.empty()) return Error(request.unsupported);
  if (!request.utf8_checked) {  // a request parsed from JSON text was checked by the parser
    for (const ChatMessage& m : request.messages) {
      for (std::string_view s : {std::string_view(m.role), std::string_view(m.content)})
        if (find_invalid_utf8(s) != std::string_view::npos) return Error("messages: invalid UTF-8");
    }
  }
  if (fast_path_covers(request, options)) {
    if (family_ == TemplateFamily::kQwen3) return render_qwen3(request);
    const std::string* bos = tokens_.find("bos_token");
    return render_llama3(request, bos ? *bos : std::string());
  }
  jinja::Template scratch;
  std::string error;
  const jinja::Template* tpl = pick(request, options, scratch, error);
  if (!tpl) return Error(error);
  const bool parts = options.content_format == ChatRenderOptions::ContentFormat::kAuto
                         ? tpl->iterates_content()
                         : options.content_format == ChatRenderOptions::ContentFormat::kOpenai;
  std::string final_text;
  if (request.continue_final_message) {
    const ChatMessage& last = request.messages.back();
    if (parts && last.content_is_list) {
      if (last.parts.empty())
        return Error(
            "continue_final_message is set but we could not find any text to continue in the "
            "final message");
      final_text = last.parts.back();
    } else {
      final_text = last.content;
    }
  }
  Result<std::string> out = render_engine(*tpl, request, parts, options);
  if (!out) return Error("chat_template:" + out.error());
  if (request.continue_final_message) return cut_at_continue_tag(std::move(*out), final_text);
  return out;
}

}  // namespace kvgate::tokenizer
