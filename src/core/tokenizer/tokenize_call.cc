#include "core/tokenizer/tokenize_call.h"

#include <simdjson.h>
#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include <boost/json.hpp>

namespace kvgate::tokenizer {
namespace {

namespace json = boost::json;

PrefixKey key_of(const XXH128_hash_t& h) {
  PrefixKey k{h.low64, h.high64};
  if (k == PrefixKey{}) k.lo = 1;  // {0, 0} is no key
  return k;
}

// Key of `bytes` after the prefix named by `parent` (none for the first).
PrefixKey chain_key(const PrefixKey* parent, std::string_view bytes) {
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  if (parent) XXH3_128bits_update(&state, parent, sizeof(*parent));
  XXH3_128bits_update(&state, bytes.data(), bytes.size());
  return key_of(XXH3_128bits_digest(&state));
}

// A message's text as the gateway's request inspection joins it: role, newline, the
// string content or the text parts, newline.
void append_message_text(const json::object& m, std::string& out) {
  if (const json::value* role = m.if_contains("role"); role && role->is_string())
    out.append(role->get_string());
  out += '\n';
  if (const json::value* c = m.if_contains("content")) {
    if (c->is_string()) {
      out.append(c->get_string());
    } else if (c->is_array()) {
      for (const json::value& part : c->get_array()) {
        const json::object* p = part.if_object();
        const json::value* t = p ? p->if_contains("text") : nullptr;
        if (t && t->is_string()) out.append(t->get_string());
      }
    }
  }
  out += '\n';
}

TokenizeCall refuse(std::string_view reason, std::string error) {
  TokenizeCall c;
  c.approximate = reason;
  c.error = std::move(error);
  return c;
}

// The chat form: the rendering options first (they root the key chain), then the
// messages spliced in front of them as text.
TokenizeCall chat_call(const json::object& o, std::string_view served_model) {
  const json::value* msgs = o.if_contains("messages");
  if (!msgs || !msgs->is_array() || msgs->get_array().empty())
    return refuse("bad_request", "messages: missing, not a list or empty");
  json::object options;
  options["model"] = served_model;
  for (std::string_view field :
       {"add_generation_prompt", "continue_final_message", "add_special_tokens", "chat_template",
        "chat_template_kwargs", "tools"}) {
    const json::value* v = o.if_contains(field);
    if (v && !v->is_null()) options[field] = *v;
  }
  if (const json::value* docs = o.if_contains("documents"); docs && !docs->is_null()) {
    json::value& kwargs = options["chat_template_kwargs"];
    if (kwargs.is_null()) kwargs = json::object();
    if (!kwargs.is_object()) return refuse("bad_request", "chat_template_kwargs: not an object");
    if (!kwargs.get_object().contains("documents")) kwargs.get_object()["documents"] = *docs;
  }
  const std::string options_text = json::serialize(options);
  TokenizeCall call;
  const json::array& list = msgs->get_array();
  call.chain.reserve(list.size());
  call.text_end.reserve(list.size());
  call.body.reserve(options_text.size() + 64);
  call.body = "{\"messages\":[";
  PrefixKey key = chain_key(nullptr, options_text);
  for (size_t i = 0; i < list.size(); ++i) {
    const json::object* m = list[i].if_object();
    if (!m) return refuse("bad_request", "messages[" + std::to_string(i) + "]: not an object");
    const std::string text = json::serialize(list[i]);
    key = chain_key(&key, text);
    call.chain.push_back(key);
    if (i) call.body += ',';
    call.body += text;
    append_message_text(*m, call.text);
    call.text_end.push_back(call.text.size());
  }
  call.body += "],";
  call.body.append(options_text, 1);  // past its '{'
  return call;
}

TokenizeCall completion_call(const json::object& o, std::string_view served_model) {
  const json::value* p = o.if_contains("prompt");
  if (!p) return refuse("bad_request", "prompt: missing");
  const json::value* text = p;
  if (p->is_array()) {
    const json::array& a = p->get_array();
    if (a.size() == 1 && a[0].is_string()) {
      text = &a[0];
    } else if (!a.empty() && a[0].is_number()) {
      std::vector<uint32_t> ids;
      ids.reserve(a.size());
      for (const json::value& t : a) {
        if (t.is_int64() && t.get_int64() >= 0 && t.get_int64() <= UINT32_MAX) {
          ids.push_back(static_cast<uint32_t>(t.get_int64()));
        } else if (t.is_uint64() && t.get_uint64() <= UINT32_MAX) {
          ids.push_back(static_cast<uint32_t>(t.get_uint64()));
        } else {
          return refuse("bad_request", "prompt: token ids must be integers in [0, 2^32)");
        }
      }
      TokenizeCall call;
      call.given_ids = std::move(ids);
      return call;
    } else {
      return refuse("batched_prompt", "prompt: several prompts in one request");
    }
  }
  if (!text->is_string()) return refuse("bad_request", "prompt: not a string or a list");
  json::object body;
  body["model"] = served_model;
  body["prompt"] = *text;
  if (const json::value* v = o.if_contains("add_special_tokens"); v && !v->is_null())
    body["add_special_tokens"] = *v;
  TokenizeCall call;
  call.body = json::serialize(body);
  call.chain.push_back(chain_key(nullptr, call.body));
  call.text = std::string(text->get_string());
  call.text_end.push_back(call.text.size());
  return call;
}

}  // namespace

TokenizeCall build_tokenize_call(std::string_view client_body, bool chat,
                                 std::string_view served_model) {
  boost::system::error_code ec;
  json::value root = json::parse(json::string_view(client_body.data(), client_body.size()), ec);
  if (ec) return refuse("bad_request", "request body is not JSON: " + ec.message());
  const json::object* o = root.if_object();
  if (!o) return refuse("bad_request", "request body is not a JSON object");
  return chat ? chat_call(*o, served_model) : completion_call(*o, served_model);
}

Result<std::vector<uint32_t>> parse_tokenize_response(std::string_view body) {
  namespace dom = simdjson::dom;
  dom::parser parser;
  const simdjson::padded_string text(body);
  dom::element root;
  if (auto err = parser.parse(text).get(root))
    return Error(std::string("/tokenize answer is not JSON: ") + simdjson::error_message(err));
  dom::array tokens;
  if (root["tokens"].get(tokens)) return Error("/tokenize answer: no \"tokens\" list");
  std::vector<uint32_t> ids;
  ids.reserve(tokens.size());
  for (dom::element t : tokens) {
    uint64_t v = 0;
    if (t.get(v) || v > UINT32_MAX)
      return Error("/tokenize answer: tokens must be integers in [0, 2^32)");
    ids.push_back(static_cast<uint32_t>(v));
  }
  if (uint64_t count = 0; !root["count"].get(count) && count != ids.size())
    return Error("/tokenize answer: count " + std::to_string(count) + " but " +
                 std::to_string(ids.size()) + " tokens");
  return ids;
}

}  // namespace kvgate::tokenizer
