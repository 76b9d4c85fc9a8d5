#include "openai/responses.h"

#include <boost/json.hpp>
#include <optional>

#include "openai/json_dom.h"

namespace kvgate::openai::responses {
namespace {

namespace json = boost::json;

// A body error: kInvalidArgument (400), `field` the parameter or path the message names
// ("input.0.content"), empty for the body as a whole.
Error bad(std::string message, std::string field = {}) {
  return Error(ErrorCode::kInvalidArgument, std::move(message), std::move(field));
}

// One input item as chat messages, appended to `out`.
Status convert_item(const json::value& item, size_t i, json::array& out) {
  const std::string at = "input." + std::to_string(i);
  const json::object* o = item.if_object();
  if (!o) return bad(at + ": must be an object", at);
  std::string_view type = "message";
  if (const json::value* t = o->if_contains("type"); t && t->is_string()) type = t->as_string();
  auto str = [&](std::string_view key) -> const json::string* {
    const json::value* v = o->if_contains(key);
    return v && v->is_string() ? &v->as_string() : nullptr;
  };
  if (type == "function_call") {
    const json::string* id = str("call_id");
    const json::string* name = str("name");
    if (!id || !name) return bad(at + ": a function_call needs 'call_id' and 'name'", at);
    const json::string* args = str("arguments");
    out.push_back(json::object{
        {"role", "assistant"},
        {"content", nullptr},
        {"tool_calls",
         json::array{json::object{
             {"id", *id},
             {"type", "function"},
             {"function",
              json::object{{"name", *name}, {"arguments", args ? *args : json::string("{}")}}}}}}});
    return {};
  }
  if (type == "function_call_output") {
    const json::string* id = str("call_id");
    if (!id) return bad(at + ".call_id: Field required", at + ".call_id");
    const json::string* output = str("output");
    out.push_back(json::object{
        {"role", "tool"}, {"tool_call_id", *id}, {"content", output ? *output : json::string()}});
    return {};
  }
  if (type == "reasoning") return {};  // no prompt text of its own
  if (type != "message")
    return bad(at + ".type: unsupported item type '" + std::string(type) + "'", at + ".type");
  const json::string* role = str("role");
  if (!role ||
      (*role != "user" && *role != "assistant" && *role != "system" && *role != "developer")) {
    return bad(at + ".role: must be 'user', 'assistant', 'system' or 'developer'", at + ".role");
  }
  const std::string_view chat_role = *role == "developer" ? "system" : std::string_view(*role);
  const json::value* content = o->if_contains("content");
  if (!content) return bad(at + ".content: Field required", at + ".content");
  if (content->is_string()) {
    out.push_back(json::object{{"role", chat_role}, {"content", content->as_string()}});
    return {};
  }
  if (!content->is_array())
    return bad(at + ".content: must be a string or a list of parts", at + ".content");
  json::array parts;
  size_t j = 0;
  for (const json::value& p : content->as_array()) {
    const std::string pat = at + ".content." + std::to_string(j++);
    const json::object* part = p.if_object();
    const json::value* ptype = part ? part->if_contains("type") : nullptr;
    if (!ptype || !ptype->is_string()) return bad(pat + ": a part needs a 'type'", pat);
    const json::string_view kind = ptype->as_string();
    if (kind == "input_text" || kind == "output_text") {
      const json::value* t = part->if_contains("text");
      if (!t || !t->is_string()) return bad(pat + ".text: Field required", pat + ".text");
      parts.push_back(json::object{{"type", "text"}, {"text", t->as_string()}});
    } else if (kind == "input_image") {
      const json::value* url = part->if_contains("image_url");
      if (url && url->is_string()) {
        parts.push_back(json::object{{"type", "image_url"},
                                     {"image_url", json::object{{"url", url->as_string()}}}});
      }
    }
    // refusal and input_file parts carry no text the template renders: left out.
  }
  out.push_back(json::object{{"role", chat_role}, {"content", std::move(parts)}});
  return {};
}

using dom::count;

// The response object itself (a whole answer) or the one an event carries.
const json::object* response_of(const json::value& v) {
  const json::object* o = v.if_object();
  if (!o) return nullptr;
  if (const json::value* r = o->if_contains("response"); r && r->is_object()) {
    return &r->as_object();
  }
  return o;
}

// The response `json_text` is or carries (response_of), parsed into `v`; null when the
// text is no JSON object.
const json::object* parse_response(std::string_view json_text, json::value& v) {
  boost::system::error_code ec;
  v = json::parse(json_text, ec);
  return ec ? nullptr : response_of(v);
}

Usage usage_of(const json::object* r) {
  Usage u;
  const json::value* usage = r ? r->if_contains("usage") : nullptr;
  if (!usage || !usage->is_object()) return u;
  const json::object& o = usage->as_object();
  u.seen = true;
  u.prompt_tokens = count(o, "input_tokens");
  u.completion_tokens = count(o, "output_tokens");
  if (const json::value* d = o.if_contains("input_tokens_details"); d && d->is_object()) {
    u.cached_tokens = count(d->as_object(), "cached_tokens");
  }
  return u;
}

std::string id_of(const json::object* r) {
  const json::value* id = r ? r->if_contains("id") : nullptr;
  return id && id->is_string() ? std::string(id->as_string()) : std::string();
}

json::object text_part(std::string_view text) {
  return json::object{{"type", "output_text"}, {"text", text}, {"annotations", json::array()}};
}

json::object message_item(const Answer& a, std::string_view text, bool done) {
  json::array content;
  if (done) content.push_back(text_part(text));
  return json::object{{"id", a.item_id},
                      {"type", "message"},
                      {"role", "assistant"},
                      {"status", !done          ? "in_progress"
                                 : a.incomplete ? "incomplete"
                                                : "completed"},
                      {"content", std::move(content)}};
}

// The response object; `usage` null while in progress.
json::object response_object(const Answer& a, std::string_view text, const Usage* usage) {
  json::object r{{"id", a.id},
                 {"object", "response"},
                 {"created_at", a.created_at},
                 {"model", a.model},
                 {"output", json::array()},
                 {"usage", nullptr},
                 {"incomplete_details", nullptr},
                 {"instructions", nullptr},
                 {"metadata", nullptr},
                 {"parallel_tool_calls", true},
                 {"temperature", 1.0},
                 {"tool_choice", "auto"},
                 {"tools", json::array()},
                 {"top_p", 1.0},
                 {"background", false},
                 {"max_output_tokens", a.max_output_tokens},
                 {"max_tool_calls", nullptr},
                 {"previous_response_id", nullptr},
                 {"reasoning", nullptr},
                 {"service_tier", "auto"},
                 {"text", nullptr},
                 {"top_logprobs", 0},
                 {"truncation", "disabled"},
                 {"user", nullptr}};
  if (!a.previous_response_id.empty()) r["previous_response_id"] = a.previous_response_id;
  if (!usage) {
    r["status"] = "in_progress";
    return r;
  }
  r["status"] = a.incomplete ? "incomplete" : "completed";
  if (a.incomplete) r["incomplete_details"] = json::object{{"reason", "max_output_tokens"}};
  r["output"] = json::array{message_item(a, text, true)};
  r["usage"] =
      json::object{{"input_tokens", usage->prompt_tokens},
                   {"input_tokens_details", json::object{{"cached_tokens", usage->cached_tokens}}},
                   {"output_tokens", usage->completion_tokens},
                   {"output_tokens_details", json::object{{"reasoning_tokens", 0}}},
                   {"total_tokens", usage->prompt_tokens + usage->completion_tokens}};
  return r;
}

std::string event(json::object data, uint64_t& seq) {
  const std::string type(data.at("type").as_string());
  data["sequence_number"] = seq++;
  std::string out = "event: " + type + "\ndata: ";
  out += json::serialize(data);
  out += "\n\n";
  return out;
}

json::object item_event(std::string_view type, const Answer& a) {
  return json::object{
      {"type", type}, {"output_index", 0}, {"item_id", a.item_id}, {"content_index", 0}};
}

}  // namespace

Result<ChatForm> to_chat(std::string_view body) {
  boost::system::error_code ec;
  json::parse_options opts;
  opts.max_depth = 64;
  json::value v = json::parse(body, ec, {}, opts);
  if (ec) return bad("The request body is not valid JSON: " + ec.message());
  const json::object* o = v.if_object();
  if (!o) return bad("The request body must be a JSON object");
  ChatForm form;
  json::object chat;
  if (const json::value* m = o->if_contains("model"); m && !m->is_null()) {
    if (!m->is_string()) return bad("'model' must be a string", "model");
    chat["model"] = m->as_string();
  }
  json::array messages;
  if (const json::value* ins = o->if_contains("instructions"); ins && !ins->is_null()) {
    if (!ins->is_string()) return bad("'instructions' must be a string", "instructions");
    messages.push_back(json::object{{"role", "system"}, {"content", ins->as_string()}});
    form.has_instructions = true;
  }
  const json::value* input = o->if_contains("input");
  if (!input || input->is_null()) return bad("'input' is required", "input");
  if (input->is_string()) {
    messages.push_back(json::object{{"role", "user"}, {"content", input->as_string()}});
  } else if (input->is_array()) {
    size_t i = 0;
    for (const json::value& item : input->as_array()) {
      if (Status st = convert_item(item, i++, messages); !st) return st.failure();
    }
  } else {
    return bad("'input' must be a string or a list of items", "input");
  }
  if (messages.empty()) return bad("'input' must not be empty", "input");
  chat["messages"] = std::move(messages);
  if (const json::value* m = o->if_contains("max_output_tokens"); m && !m->is_null()) {
    if (!(m->is_int64() && m->as_int64() >= 1) &&
        !(m->is_uint64() && m->as_uint64() <= UINT32_MAX)) {
      return bad("'max_output_tokens' must be an integer of at least 1", "max_output_tokens");
    }
    chat["max_tokens"] = *m;
  }
  if (const json::value* s = o->if_contains("stream"); s && !s->is_null()) {
    if (!s->is_bool()) return bad("'stream' must be a boolean", "stream");
    chat["stream"] = s->as_bool();
  }
  for (std::string_view key : {"temperature", "top_p"}) {
    if (const json::value* x = o->if_contains(key); x && !x->is_null()) {
      if (!x->is_number())
        return bad("'" + std::string(key) + "' must be a number", std::string(key));
      chat[key] = *x;
    }
  }
  // vLLM's extra: the chat request carries it as it came (inspect_request checks it).
  if (const json::value* salt = o->if_contains("cache_salt"); salt && !salt->is_null()) {
    chat["cache_salt"] = *salt;
  }
  if (const json::value* tools = o->if_contains("tools"); tools && !tools->is_null()) {
    if (!tools->is_array()) return bad("'tools' must be a list", "tools");
    json::array fns;
    for (const json::value& t : tools->as_array()) {
      const json::object* to = t.if_object();
      const json::value* name = to ? to->if_contains("name") : nullptr;
      if (!name || !name->is_string()) continue;  // built-in tools (web search...): not rendered
      json::object fn{{"name", name->as_string()}};
      if (const json::value* d = to->if_contains("description")) fn["description"] = *d;
      if (const json::value* p = to->if_contains("parameters")) fn["parameters"] = *p;
      fns.push_back(json::object{{"type", "function"}, {"function", std::move(fn)}});
    }
    if (!fns.empty()) chat["tools"] = std::move(fns);
  }
  if (const json::value* p = o->if_contains("previous_response_id"); p && !p->is_null()) {
    if (!p->is_string())
      return bad("'previous_response_id' must be a string", "previous_response_id");
    form.previous_response_id = std::string(p->as_string());
  }
  if (const json::value* s = o->if_contains("store"); s && !s->is_null()) {
    if (!s->is_bool()) return bad("'store' must be a boolean", "store");
    form.store = s->as_bool();
  }
  form.chat = json::serialize(chat);
  return form;
}

std::string continue_chat(std::string_view chat, bool has_instructions,
                          std::string_view previous_messages, std::string_view previous_output) {
  json::value v = json::parse(chat);
  json::object& o = v.as_object();
  json::array& now = o["messages"].as_array();
  json::array joined;
  size_t i = 0;
  if (has_instructions && !now.empty()) joined.push_back(now[i++]);
  boost::system::error_code ec;
  json::value before = json::parse(previous_messages, ec);
  if (!ec && before.is_array()) {
    for (json::value& m : before.as_array()) joined.push_back(std::move(m));
  }
  joined.push_back(json::object{{"role", "assistant"}, {"content", previous_output}});
  for (; i < now.size(); ++i) joined.push_back(std::move(now[i]));
  o["messages"] = std::move(joined);
  return json::serialize(v);
}

std::string messages_of(std::string_view chat) {
  boost::system::error_code ec;
  json::value v = json::parse(chat, ec);
  if (ec || !v.is_object()) return "[]";
  const json::value* m = v.as_object().if_contains("messages");
  return m && m->is_array() ? json::serialize(*m) : std::string("[]");
}

Usage parse_usage(std::string_view json_text) {
  json::value v;
  return usage_of(parse_response(json_text, v));
}

std::string response_id(std::string_view json_text) {
  json::value v;
  return id_of(parse_response(json_text, v));
}

Answered read_answer(std::string_view json_text) {
  json::value v;
  const json::object* r = parse_response(json_text, v);
  return Answered{.usage = usage_of(r), .id = id_of(r)};
}

std::string render_response(const Answer& a, std::string_view text, const Usage& usage) {
  return json::serialize(response_object(a, text, &usage));
}

std::string render_stream_start(const Answer& a, uint64_t& seq) {
  const json::object r = response_object(a, "", nullptr);
  std::string out = event(json::object{{"type", "response.created"}, {"response", r}}, seq);
  out += event(json::object{{"type", "response.in_progress"}, {"response", r}}, seq);
  out += event(json::object{{"type", "response.output_item.added"},
                            {"output_index", 0},
                            {"item", message_item(a, "", false)}},
               seq);
  json::object part = item_event("response.content_part.added", a);
  part["part"] = json::object{{"type", "output_text"},
                              {"text", ""},
                              {"annotations", json::array()},
                              {"logprobs", json::array()}};
  out += event(std::move(part), seq);
  return out;
}

std::string render_text_delta(const Answer& a, std::string_view delta, uint64_t& seq) {
  json::object e = item_event("response.output_text.delta", a);
  e["delta"] = delta;
  e["logprobs"] = json::array();
  return event(std::move(e), seq);
}

std::string render_stream_end(const Answer& a, std::string_view text, const Usage& usage,
                              uint64_t& seq) {
  json::object done = item_event("response.output_text.done", a);
  done["text"] = text;
  done["logprobs"] = json::array();
  std::string out = event(std::move(done), seq);
  json::object part = item_event("response.content_part.done", a);
  part["part"] = text_part(text);
  out += event(std::move(part), seq);
  out += event(json::object{{"type", "response.output_item.done"},
                            {"output_index", 0},
                            {"item", message_item(a, text, true)}},
               seq);
  out += event(
      json::object{{"type", "response.completed"}, {"response", response_object(a, text, &usage)}},
      seq);
  return out;
}

std::string render_error_event(std::string_view code, std::string_view message) {
  json::object e{
      {"type", "error"}, {"message", message}, {"param", nullptr}, {"sequence_number", 0}};
  if (code.empty()) {
    e["code"] = nullptr;
  } else {
    e["code"] = code;
  }
  return "event: error\ndata: " + json::serialize(e) + "\n\n";
}

}  // namespace kvgate::openai::responses
