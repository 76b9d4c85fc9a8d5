#include "core/tokenizer/chat.h"

#include <boost/json.hpp>

#include "core/tokenizer/python_json.h"

namespace kvgate::tokenizer {
namespace {

namespace json = boost::json;

Result<std::string> content_text(const json::value* v, const std::string& path) {
  if (!v || v->is_null()) return std::string();
  if (v->is_string()) return std::string(v->get_string());
  if (!v->is_array()) return Error(path + ": must be a string, null or a list of parts");
  std::string out;
  bool first = true;
  for (const auto& part : v->get_array()) {
    const json::object* o = part.if_object();
    if (!o) return Error(path + ": a content part must be an object");
    const json::value* type = o->if_contains("type");
    if (!type || !type->is_string() || type->get_string() != "text") continue;
    const json::value* text = o->if_contains("text");
    if (!text || !text->is_string()) return Error(path + ": text part without \"text\"");
    if (!first) out += "\n";
    first = false;
    out += text->get_string();
  }
  return out;
}

Result<ChatMessage> parse_message(const json::value& v, const std::string& path) {
  const json::object* o = v.if_object();
  if (!o) return Error(path + ": must be an object");
  ChatMessage m;
  const json::value* role = o->if_contains("role");
  if (!role || !role->is_string()) return Error(path + ".role: missing or not a string");
  m.role = std::string(role->get_string());
  auto content = content_text(o->if_contains("content"), path + ".content");
  if (!content) return Error(content.error());
  m.content = std::move(*content);
  if (const json::value* r = o->if_contains("reasoning_content"); r && !r->is_null()) {
    if (!r->is_string()) return Error(path + ".reasoning_content: not a string");
    m.reasoning_content = std::string(r->get_string());
  }
  if (const json::value* tc = o->if_contains("tool_calls"); tc && !tc->is_null()) {
    if (!tc->is_array()) return Error(path + ".tool_calls: not an array");
    size_t i = 0;
    for (const auto& call : tc->get_array()) {
      const std::string cp = path + ".tool_calls[" + std::to_string(i++) + "]";
      const json::object* co = call.if_object();
      if (!co) return Error(cp + ": not an object");
      if (const json::value* f = co->if_contains("function"); f && f->is_object())
        co = &f->get_object();
      ToolCall t;
      const json::value* name = co->if_contains("name");
      if (!name || !name->is_string()) return Error(cp + ".function.name: missing");
      t.name = std::string(name->get_string());
      const json::value* args = co->if_contains("arguments");
      if (args && args->is_string()) {
        t.arguments = std::string(args->get_string());
      } else {
        t.arguments = args ? python_json(*args) : "null";
        t.arguments_is_string = false;
      }
      m.tool_calls.push_back(std::move(t));
    }
  }
  return m;
}

}  // namespace

Result<ChatRequest> parse_chat_request(std::string_view text) {
  boost::system::error_code ec;
  json::value root = json::parse(json::string_view(text.data(), text.size()), ec);
  if (ec) return Error("request body is not JSON: " + ec.message());
  const json::object* o = root.if_object();
  if (!o) return Error("request body must be a JSON object");
  ChatRequest req;
  const json::value* msgs = o->if_contains("messages");
  if (!msgs || !msgs->is_array() || msgs->get_array().empty())
    return Error("messages: missing, not an array or empty");
  size_t i = 0;
  for (const auto& m : msgs->get_array()) {
    auto msg = parse_message(m, "messages[" + std::to_string(i++) + "]");
    if (!msg) return Error(msg.error());
    req.messages.push_back(std::move(*msg));
  }
  if (const json::value* tools = o->if_contains("tools"); tools && !tools->is_null()) {
    if (!tools->is_array()) return Error("tools: not an array");
    for (const auto& t : tools->get_array()) req.tools.push_back(python_json(t));
  }
  if (const json::value* g = o->if_contains("add_generation_prompt"); g && !g->is_null()) {
    if (!g->is_bool()) return Error("add_generation_prompt: not a boolean");
    req.add_generation_prompt = g->get_bool();
  }
  if (const json::value* k = o->if_contains("chat_template_kwargs"); k && k->is_object()) {
    if (const json::value* t = k->get_object().if_contains("enable_thinking"); t && t->is_bool())
      req.enable_thinking = t->get_bool();
  }
  return req;
}

}  // namespace kvgate::tokenizer
