#include "core/tokenizer/chat_template.h"

#include <xxhash.h>

#include <boost/json.hpp>

#include "core/tokenizer/unicode.h"

namespace kvgate::tokenizer {
namespace {

struct Known {
  uint64_t hash;
  size_t size;
  TemplateFamily family;
};
// XXH3-64 of the exact template texts kvgate renders.
constexpr Known kKnown[] = {
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

Result<ChatTemplate> ChatTemplate::from_template(std::string_view text, std::string bos_token) {
  const uint64_t h = XXH3_64bits(text.data(), text.size());
  for (const Known& k : kKnown) {
    if (k.hash == h && k.size == text.size()) {
      ChatTemplate t;
      t.family_ = k.family;
      t.bos_token_ = std::move(bos_token);
      return t;
    }
  }
  return Error(
      "chat_template: not a template kvgate can render (known: Qwen3, Llama 3); route this "
      "pool on raw text (approximate mode) or add the family to kvgate");
}

Result<ChatTemplate> ChatTemplate::load(std::string_view config_json) {
  namespace json = boost::json;
  boost::system::error_code ec;
  json::value root = json::parse(json::string_view(config_json.data(), config_json.size()), ec);
  if (ec || !root.is_object()) return Error("tokenizer_config.json: not a JSON object");
  const json::object& o = root.get_object();
  const json::value* tpl = o.if_contains("chat_template");
  std::string_view text;
  if (tpl && tpl->is_string()) {
    text = tpl->get_string();
  } else if (tpl && tpl->is_array()) {  // [{"name": "default", "template": "..."}, ...]
    for (const auto& t : tpl->get_array()) {
      const json::object* to = t.if_object();
      if (to && to->if_contains("name") && to->at("name") == "default" &&
          to->if_contains("template") && to->at("template").is_string())
        text = to->at("template").get_string();
    }
  }
  if (text.empty()) return Error("tokenizer_config.json: chat_template: missing");
  std::string bos;
  if (const json::value* b = o.if_contains("bos_token"); b) {
    if (b->is_string()) {
      bos = std::string(b->get_string());
    } else if (b->is_object() && b->get_object().if_contains("content") &&
               b->get_object().at("content").is_string()) {
      bos = std::string(b->get_object().at("content").get_string());
    }
  }
  auto t = from_template(text, std::move(bos));
  if (!t) return Error("tokenizer_config.json: " + t.error());
  return t;
}

std::string_view ChatTemplate::family_name() const {
  return family_ == TemplateFamily::kQwen3 ? "qwen3" : "llama3";
}

Result<std::string> ChatTemplate::render(const ChatRequest& request) const {
  if (request.messages.empty()) return Error("messages: empty");
  for (const ChatMessage& m : request.messages) {
    for (std::string_view s : {std::string_view(m.role), std::string_view(m.content)})
      if (find_invalid_utf8(s) != std::string_view::npos) return Error("messages: invalid UTF-8");
  }
  if (family_ == TemplateFamily::kQwen3) return render_qwen3(request);
  return render_llama3(request, bos_token_);
}

}  // namespace kvgate::tokenizer
