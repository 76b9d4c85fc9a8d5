#include "core/tokenizer/chat.h"

#include <boost/json.hpp>
#include <memory>

#include "core/tokenizer/python_json.h"

namespace kvgate::tokenizer {
namespace {

namespace json = boost::json;

// Paths for error messages ("messages[3].content"), spelled only when there is an error.
std::string at(std::string_view base, size_t index) {
  std::string s(base);
  s += '[';
  s += std::to_string(index);
  s += ']';
  return s;
}
std::string message_path(size_t index, std::string_view field = {}) {
  return at("messages", index) + std::string(field);
}

Status read_content(const json::value* v, size_t index, ChatMessage& m, std::string& unsupported) {
  auto path = [index] { return message_path(index, ".content"); };
  if (!v || v->is_null()) {
    m.content_is_null = true;
    return {};
  }
  if (v->is_string()) {
    m.content = std::string_view(v->get_string());
    return {};
  }
  if (!v->is_array()) return Error(path() + ": must be a string, null or a list of parts");
  m.content_is_list = true;
  m.parts.reserve(v->get_array().size());
  for (const auto& part : v->get_array()) {
    if (part.is_string()) {  // vLLM takes a bare string part as text
      m.parts.emplace_back(part.get_string());
      continue;
    }
    const json::object* o = part.if_object();
    if (!o) return Error(path() + ": a content part must be an object");
    const json::value* type = o->if_contains("type");
    if (!type || !type->is_string()) return Error(path() + ": a content part needs a \"type\"");
    if (type->get_string() != "text") {
      if (unsupported.empty())
        unsupported = path() + ": content part of type '" + std::string(type->get_string()) +
                      "' (kvgate renders text only)";
      continue;
    }
    const json::value* text = o->if_contains("text");
    if (!text || !text->is_string()) return Error(path() + ": text part without \"text\"");
    m.parts.emplace_back(text->get_string());
  }
  size_t size = 0;
  for (const std::string& p : m.parts) size += p.size() + 1;
  m.content.reserve(size);
  for (size_t i = 0; i < m.parts.size(); ++i) {
    if (i) m.content += "\n";
    m.content += m.parts[i];
  }
  return {};
}

// vLLM's _postprocess_messages: arguments become an object.
Status read_tool_calls(const json::value& tc, size_t index, ChatMessage& m) {
  auto path = [index] { return message_path(index, ".tool_calls"); };
  if (!tc.is_array()) return Error(path() + ": not an array");
  m.tool_calls.reserve(tc.get_array().size());
  size_t i = 0;
  for (const auto& call : tc.get_array()) {
    const size_t k = i++;
    auto cp = [&] { return at(path(), k); };
    if (!call.is_object()) return Error(cp() + ": assistant tool_calls entries must be objects");
    ToolCall t;
    t.json = call;
    json::object& co = t.json.get_object();
    if (const json::value* type = co.if_contains("type");
        type && !(type->is_string() && type->get_string() == "function"))
      return Error(cp() + ": chat completions only support tool_calls of type 'function'");
    json::value* f = co.if_contains("function");
    if (!f || !f->is_object()) return Error(cp() + ".function: missing or not an object");
    json::object& fo = f->get_object();
    const json::value* name = fo.if_contains("name");
    if (!name || !name->is_string()) return Error(cp() + ".function.name: missing");
    t.name = std::string_view(name->get_string());
    json::value* args = fo.if_contains("arguments");
    if (args && args->is_object()) {
      t.arguments = python_json(*args);  // already the object vLLM passes on
    } else {
      json::value parsed = json::object();
      if (args && args->is_string() && !args->get_string().empty()) {
        boost::system::error_code ec;
        json::value v = json::parse(args->get_string(), ec);
        if (!ec && v.is_object()) parsed = std::move(v);
      }  // anything else (null, "", a list, a number) is not a mapping: {}
      t.arguments = python_json(parsed);
      fo["arguments"] = std::move(parsed);
    }
    m.tool_calls.push_back(std::move(t));
  }
  return {};
}

Status parse_message(const json::value& v, size_t index, ChatMessage& m, std::string& unsupported) {
  const json::object* o = v.if_object();
  if (!o) return Error(message_path(index) + ": must be an object");
  const json::value* role = o->if_contains("role");
  if (!role || !role->is_string())
    return Error(message_path(index, ".role") + ": missing or not a string");
  m.role = std::string_view(role->get_string());
  if (Status st = read_content(o->if_contains("content"), index, m, unsupported); !st)
    return Error(st.error());
  if (m.role == "assistant") {
    const json::value* r = o->if_contains("reasoning");
    if (!r || r->is_null() || (r->is_string() && r->get_string().empty()))
      r = o->if_contains("reasoning_content");  // Python's `a or b`
    if (r && !r->is_null()) {
      if (!r->is_string())
        return Error(message_path(index, ".reasoning_content") + ": not a string");
      m.reasoning_content = std::string(r->get_string());
    }
    if (const json::value* tc = o->if_contains("tool_calls"); tc && !tc->is_null()) {
      if (Status st = read_tool_calls(*tc, index, m); !st) return Error(st.error());
    }
  }
  if (m.role == "tool") {
    if (const json::value* id = o->if_contains("tool_call_id"); id && id->is_string())
      m.tool_call_id = std::string(id->get_string());
  }
  if (const json::value* n = o->if_contains("name"); n && n->is_string())
    m.name = std::string(n->get_string());
  return {};
}

// vLLM's ChatCompletionToolsParam.model_dump(): declared fields first (absent ones as
// null), then the extra fields the request carried.
Result<json::value> normalize_tool(const json::value& t, size_t index) {
  const json::object* o = t.if_object();
  if (!o) return Error(at("tools", index) + ": not an object");
  const json::value* f = o->if_contains("function");
  if (!f || !f->is_object())
    return Error(at("tools", index) + ".function: missing or not an object");
  const json::object& fo = f->get_object();
  const json::value* name = fo.if_contains("name");
  if (!name || !name->is_string()) return Error(at("tools", index) + ".function.name: missing");
  json::object fn;
  fn["name"] = *name;
  const json::value* desc = fo.if_contains("description");
  fn["description"] = desc ? *desc : json::value(nullptr);
  const json::value* params = fo.if_contains("parameters");
  fn["parameters"] = params ? *params : json::value(nullptr);
  for (const auto& kv : fo)
    if (kv.key() != "name" && kv.key() != "description" && kv.key() != "parameters")
      fn[kv.key()] = kv.value();
  json::object out;
  const json::value* type = o->if_contains("type");
  out["type"] = type ? *type : json::value("function");
  out["function"] = std::move(fn);
  for (const auto& kv : *o)
    if (kv.key() != "type" && kv.key() != "function") out[kv.key()] = kv.value();
  return json::value(std::move(out));
}

}  // namespace

Result<ChatRequest> parse_chat_request(std::string_view text) {
  // The tree lives only for this call (the request copies what it keeps out of it): a bump
  // allocator over a buffer this thread reuses, so a body costs no malloc per JSON node.
  constexpr size_t kScratch = 64 << 10;
  thread_local const std::unique_ptr<unsigned char[]> scratch =
      std::make_unique_for_overwrite<unsigned char[]>(kScratch);
  json::monotonic_resource arena(scratch.get(), kScratch);
  boost::system::error_code ec;
  json::value root = json::parse(json::string_view(text.data(), text.size()), ec, &arena);
  if (ec) return Error("request body is not JSON: " + ec.message());
  const json::object* o = root.if_object();
  if (!o) return Error("request body must be a JSON object");
  Result<ChatRequest> req = parse_chat_request(*o);
  if (req) req->utf8_checked = true;  // the parser refuses invalid UTF-8
  return req;
}

Result<ChatRequest> parse_chat_request(const json::object& body) {
  const json::object* o = &body;
  ChatRequest req;
  const json::value* msgs = o->if_contains("messages");
  if (!msgs || !msgs->is_array() || msgs->get_array().empty())
    return Error("messages: missing, not an array or empty");
  req.messages.reserve(msgs->get_array().size());
  size_t i = 0;
  for (const auto& m : msgs->get_array()) {
    if (Status st = parse_message(m, i++, req.messages.emplace_back(), req.unsupported); !st)
      return Error(st.error());
  }
  if (const json::value* tools = o->if_contains("tools"); tools && !tools->is_null()) {
    if (!tools->is_array()) return Error("tools: not an array");
    json::array normalized;
    normalized.reserve(tools->get_array().size());
    req.tools.reserve(tools->get_array().size());
    size_t k = 0;
    for (const auto& t : tools->get_array()) {
      auto n = normalize_tool(t, k++);
      if (!n) return Error(n.error());
      req.tools.push_back(python_json(*n));
      normalized.push_back(std::move(*n));
    }
    req.tools_json = std::move(normalized);
  }
  if (const json::value* d = o->if_contains("documents"); d && !d->is_null()) {
    if (!d->is_array()) return Error("documents: not an array");
    for (const auto& doc : d->get_array())
      if (!doc.is_object()) return Error("documents: each document must be an object");
    req.documents = *d;
  }
  auto read_bool = [&](const json::object& from, const char* key, const std::string& path,
                       auto&& set) -> Status {
    if (const json::value* g = from.if_contains(key); g && !g->is_null()) {
      if (!g->is_bool()) return Error(path + ": not a boolean");
      set(g->get_bool());
    }
    return {};
  };
  if (Status st = read_bool(*o, "add_generation_prompt", "add_generation_prompt",
                            [&](bool b) { req.add_generation_prompt = b; });
      !st)
    return Error(st.error());
  if (Status st = read_bool(*o, "continue_final_message", "continue_final_message",
                            [&](bool b) { req.continue_final_message = b; });
      !st)
    return Error(st.error());
  if (const json::value* t = o->if_contains("chat_template"); t && !t->is_null()) {
    if (!t->is_string()) return Error("chat_template: not a string");
    req.chat_template = std::string(t->get_string());
  }
  if (const json::value* k = o->if_contains("chat_template_kwargs"); k && !k->is_null()) {
    if (!k->is_object()) return Error("chat_template_kwargs: not an object");
    for (const auto& kv : k->get_object()) {
      const std::string_view key = kv.key();
      if (key == "enable_thinking" && kv.value().is_bool()) {
        req.enable_thinking = kv.value().get_bool();
      } else if (key == "add_generation_prompt" && kv.value().is_bool()) {
        req.add_generation_prompt = kv.value().get_bool();  // vLLM merges the kwargs over these
      } else if (key == "continue_final_message" && kv.value().is_bool()) {
        req.continue_final_message = kv.value().get_bool();
      } else if (key == "chat_template" && kv.value().is_string()) {
        req.chat_template = std::string(kv.value().get_string());
      } else {
        req.extra_kwargs[key] = kv.value();
      }
    }
  }
  if (req.add_generation_prompt && req.continue_final_message)
    return Error("Cannot set both `continue_final_message` and `add_generation_prompt` to True.");
  return req;
}

}  // namespace kvgate::tokenizer
