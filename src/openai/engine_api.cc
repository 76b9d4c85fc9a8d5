// GCC 12 at -O3 reports a false -Wrestrict inside std::string's inlined replace (GCC bug
// 105329); the code here only appends and concatenates strings.
#pragma GCC diagnostic ignored "-Wrestrict"

#include "openai/engine_api.h"

#include <boost/json.hpp>

namespace kvgate::openai {
namespace {

namespace json = boost::json;

// A body error: kInvalidArgument (400), `field` the parameter the message names.
Error bad(std::string message, std::string field = {}) {
  return Error(ErrorCode::kInvalidArgument, std::move(message), std::move(field));
}

// "'key' what" (built by appending: GCC 12 -O3 warns falsely on "'" + std::string).
Error field_error(std::string_view key, std::string_view what) {
  std::string m;
  m.reserve(key.size() + what.size() + 3);
  m += '\'';
  m += key;
  m += "' ";
  m += what;
  return bad(std::move(m), std::string(key));
}

std::optional<std::string> opt_string(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (!v || !v->is_string()) return std::nullopt;
  return std::string(v->as_string());
}

// Reads an integer field; error when present but not a non-negative integer.
Result<std::optional<int64_t>> opt_int(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (!v || v->is_null()) return std::optional<int64_t>();
  if (v->is_int64()) return std::optional<int64_t>(v->as_int64());
  if (v->is_uint64() && v->as_uint64() <= INT64_MAX) {
    return std::optional<int64_t>(static_cast<int64_t>(v->as_uint64()));
  }
  if (v->is_double() &&
      v->as_double() == static_cast<double>(static_cast<int64_t>(v->as_double()))) {
    return std::optional<int64_t>(static_cast<int64_t>(v->as_double()));
  }
  return field_error(key, "must be an integer");
}

// Reads a boolean field into `out` when present (null leaves it); an error otherwise.
Status opt_bool(const json::object& o, std::string_view key, bool& out) {
  const json::value* v = o.if_contains(key);
  if (!v || v->is_null()) return {};
  if (!v->is_bool()) return field_error(key, "must be a boolean");
  out = v->as_bool();
  return {};
}

Result<KvTransferParams> parse_kv_transfer(const json::value& v) {
  if (!v.is_object()) return bad("'kv_transfer_params' must be an object", "kv_transfer_params");
  const json::object& o = v.as_object();
  KvTransferParams p;
  if (const json::value* d = o.if_contains("do_remote_decode"))
    p.do_remote_decode = d->is_bool() && d->as_bool();
  if (const json::value* d = o.if_contains("do_remote_prefill"))
    p.do_remote_prefill = d->is_bool() && d->as_bool();
  p.remote_engine_id = opt_string(o, "remote_engine_id");
  p.remote_host = opt_string(o, "remote_host");
  p.remote_rack = opt_string(o, "remote_rack");
  p.remote_zone = opt_string(o, "remote_zone");
  auto port = opt_int(o, "remote_port");
  if (!port) return port.failure();
  p.remote_port = *port;
  if (const json::value* ids = o.if_contains("remote_block_ids"); ids && ids->is_array()) {
    for (const json::value& id : ids->as_array()) {
      if (id.is_int64()) p.remote_block_ids.push_back(id.as_int64());
      if (id.is_uint64()) p.remote_block_ids.push_back(static_cast<int64_t>(id.as_uint64()));
    }
  }
  return p;
}

Result<json::object> parse_object(std::string_view body) {
  boost::system::error_code ec;
  json::value v = json::parse(body, ec);
  if (ec) return bad("request body is not valid JSON: " + ec.message());
  if (!v.is_object()) return bad("request body must be a JSON object");
  return std::move(v.as_object());
}

json::object usage_json(const Usage& u) {
  json::object usage;
  usage["prompt_tokens"] = u.prompt_tokens;
  usage["total_tokens"] = u.prompt_tokens + u.completion_tokens;
  usage["completion_tokens"] = u.completion_tokens;
  json::object details;
  details["cached_tokens"] = u.cached_tokens;
  usage["prompt_tokens_details"] = std::move(details);
  return usage;
}

json::object head(ApiKind kind, const ResponseIds& ids, bool chunk) {
  json::object o;
  o["id"] = ids.id;
  if (kind == ApiKind::kChat) {
    o["object"] = chunk ? "chat.completion.chunk" : "chat.completion";
  } else {
    o["object"] = "text_completion";
  }
  o["created"] = ids.created;
  o["model"] = ids.model;
  return o;
}

json::value finish_value(std::string_view finish_reason) {
  if (finish_reason.empty()) return nullptr;
  return json::string(finish_reason);
}

json::array id_array(std::span<const kv::TokenId> ids) {
  json::array a;
  a.reserve(ids.size());
  for (kv::TokenId t : ids) a.push_back(t);
  return a;
}

// Reads a list of token ids into `out`; false when an item is not an id in [0, 2^32).
bool token_ids(const json::array& a, std::vector<kv::TokenId>& out) {
  out.reserve(a.size());
  for (const json::value& t : a) {
    if (t.is_int64() && t.as_int64() >= 0 && t.as_int64() <= UINT32_MAX) {
      out.push_back(static_cast<kv::TokenId>(t.as_int64()));
    } else if (t.is_uint64() && t.as_uint64() <= UINT32_MAX) {
      out.push_back(static_cast<kv::TokenId>(t.as_uint64()));
    } else {
      return false;
    }
  }
  return true;
}

// Adds return_token_ids' fields to an answer `o` whose (only) choice is `choice`.
void add_token_ids(ApiKind kind, const TokenIdFields& t, json::object& o, json::object& choice) {
  if (t.prompt) {
    (kind == ApiKind::kChat ? o : choice)["prompt_token_ids"] = id_array(*t.prompt);
  }
  choice["token_ids"] = id_array(t.tokens);
}

std::string sse(const json::object& o) {
  std::string out = "data: ";
  out += json::serialize(o);
  out += "\n\n";
  return out;
}

}  // namespace

Result<CompletionRequest> parse_completion_request(std::string_view body, ApiKind kind) {
  auto parsed = parse_object(body);
  if (!parsed) return parsed.failure();
  const json::object& o = *parsed;
  CompletionRequest r;
  r.kind = kind;
  if (const json::value* m = o.if_contains("model")) {
    if (!m->is_string() && !m->is_null()) return bad("'model' must be a string", "model");
    if (m->is_string()) r.model = std::string(m->as_string());
  }
  if (kind == ApiKind::kChat) {
    if (!o.contains("messages")) return bad("'messages' is required", "messages");
    auto chat = tokenizer::parse_chat_request(o);
    if (!chat) return bad(chat.error(), chat.failure().field);
    r.chat = std::move(*chat);
    r.add_special_tokens = false;
  } else {
    const json::value* p = o.if_contains("prompt");
    if (!p) return bad("'prompt' is required", "prompt");
    if (p->is_string()) {
      r.prompt_text = std::string(p->as_string());
    } else if (p->is_array()) {
      const json::array& a = p->as_array();
      if (a.size() == 1 && a[0].is_string()) {
        r.prompt_text = std::string(a[0].as_string());
      } else if (!a.empty() && (a[0].is_int64() || a[0].is_uint64())) {
        std::vector<kv::TokenId> ids;
        if (!token_ids(a, ids))
          return bad("'prompt' token ids must be non-negative integers", "prompt");
        r.prompt_tokens = std::move(ids);
      } else {
        return bad(
            "'prompt' must be a string, one string in an array, or token ids "
            "(batched prompts are not supported)",
            "prompt");
      }
    } else {
      return bad("'prompt' must be a string or an array", "prompt");
    }
  }
  for (std::string_view key : {"max_completion_tokens", "max_tokens"}) {
    auto v = opt_int(o, key);
    if (!v) return v.failure();
    if (auto mt = *v) {
      if (*mt < 1 || *mt > UINT32_MAX) return field_error(key, "must be at least 1");
      r.max_tokens = static_cast<uint32_t>(*mt);
      break;
    }
  }
  auto n = opt_int(o, "n");
  if (!n) return n.failure();
  if (auto nv = *n; nv && *nv != 1) return bad("only n=1 is supported", "n");
  if (const json::value* s = o.if_contains("stream")) {
    if (!s->is_bool() && !s->is_null()) return bad("'stream' must be a boolean", "stream");
    r.stream = s->is_bool() && s->as_bool();
  }
  if (const json::value* so = o.if_contains("stream_options"); so && so->is_object()) {
    if (const json::value* iu = so->as_object().if_contains("include_usage")) {
      r.include_usage = iu->is_bool() && iu->as_bool();
    }
  }
  if (const json::value* t = o.if_contains("return_token_ids"); t && !t->is_null()) {
    if (!t->is_bool()) return bad("'return_token_ids' must be a boolean", "return_token_ids");
    r.return_token_ids = t->as_bool();
  }
  if (const json::value* t = o.if_contains("temperature"); t && !t->is_null()) {
    if (!t->is_number()) return bad("'temperature' must be a number", "temperature");
    const double v = t->to_number<double>();
    if (v < 0) return bad("'temperature' must be at least 0", "temperature");
    r.temperature = v;
  }
  if (const json::value* salt = o.if_contains("cache_salt"); salt && !salt->is_null()) {
    if (!salt->is_string() || salt->as_string().empty()) {
      return bad("Parameter 'cache_salt' must be a non-empty string if provided.", "cache_salt");
    }
    r.cache_salt = std::string(salt->as_string());
  }
  if (Status st = opt_bool(o, "add_special_tokens", r.add_special_tokens); !st) return st.failure();
  auto prio = opt_int(o, "priority");
  if (!prio) return prio.failure();
  if (auto pv = *prio) r.priority = static_cast<int32_t>(*pv);
  if (const json::value* kt = o.if_contains("kv_transfer_params"); kt && !kt->is_null()) {
    auto p = parse_kv_transfer(*kt);
    if (!p) return p.failure();
    r.kv_transfer = *p;
  }
  return r;
}

Result<TokenizeRequest> parse_tokenize_request(std::string_view body) {
  auto parsed = parse_object(body);
  if (!parsed) return parsed.failure();
  const json::object& o = *parsed;
  TokenizeRequest r;
  if (auto m = opt_string(o, "model")) r.model = *m;
  if (const json::value* p = o.if_contains("prompt")) {
    if (!p->is_string()) return bad("'prompt' must be a string", "prompt");
    r.prompt = std::string(p->as_string());
    r.add_special_tokens = true;
  } else if (o.contains("messages")) {
    auto chat = tokenizer::parse_chat_request(o);
    if (!chat) return bad(chat.error(), chat.failure().field);
    r.chat = std::move(*chat);
  } else {
    return bad("'prompt' or 'messages' is required");
  }
  if (Status st = opt_bool(o, "add_special_tokens", r.add_special_tokens); !st) return st.failure();
  if (Status st = opt_bool(o, "return_token_strs", r.return_token_strs); !st) return st.failure();
  return r;
}

std::string render_tokenize_response(std::span<const kv::TokenId> tokens, uint32_t max_model_len,
                                     const std::vector<std::string>* token_strs) {
  json::object body;
  body["count"] = tokens.size();
  body["max_model_len"] = max_model_len;
  body["tokens"] = id_array(tokens);
  if (token_strs) {
    json::array strs;
    for (const std::string& t : *token_strs) strs.emplace_back(t);
    body["token_strs"] = std::move(strs);
  } else {
    body["token_strs"] = nullptr;
  }
  return json::serialize(body);
}

Result<DetokenizeRequest> parse_detokenize_request(std::string_view body) {
  auto parsed = parse_object(body);
  if (!parsed) return parsed.failure();
  const json::object& o = *parsed;
  DetokenizeRequest r;
  if (auto m = opt_string(o, "model")) r.model = *m;
  const json::value* t = o.if_contains("tokens");
  if (!t) return bad("'tokens' is required", "tokens");
  if (!t->is_array() || !token_ids(t->as_array(), r.tokens)) {
    return bad("'tokens' must be a list of non-negative integers", "tokens");
  }
  return r;
}

std::string render_detokenize_response(std::string_view prompt) {
  json::object body;
  body["prompt"] = prompt;
  return json::serialize(body);
}

Result<EmbeddingRequest> parse_embedding_request(std::string_view body) {
  auto parsed = parse_object(body);
  if (!parsed) return parsed.failure();
  const json::object& o = *parsed;
  EmbeddingRequest r;
  if (auto m = opt_string(o, "model")) r.model = *m;
  const json::value* in = o.if_contains("input");
  if (!in || in->is_null()) return bad("'input' is required", "input");
  constexpr std::string_view kShape =
      "'input' must be a string, a list of strings, a list of token ids or a list of lists of "
      "token ids";
  if (in->is_string()) {
    r.inputs.push_back({.text = std::string(in->as_string())});
  } else if (in->is_array()) {
    const json::array& a = in->as_array();
    if (a.empty()) return bad("'input' must not be empty", "input");
    if (a[0].is_int64() || a[0].is_uint64()) {
      EmbeddingInput one;
      if (!token_ids(a, one.tokens)) return bad(std::string(kShape), "input");
      r.inputs.push_back(std::move(one));
    } else {
      for (const json::value& item : a) {
        EmbeddingInput one;
        if (item.is_string()) {
          one.text = std::string(item.as_string());
        } else if (!item.is_array() || item.as_array().empty() ||
                   !token_ids(item.as_array(), one.tokens)) {
          return bad(std::string(kShape), "input");
        }
        r.inputs.push_back(std::move(one));
      }
    }
  } else {
    return bad(std::string(kShape), "input");
  }
  if (const json::value* f = o.if_contains("encoding_format"); f && !f->is_null()) {
    if (!f->is_string() || (f->as_string() != "float" && f->as_string() != "base64")) {
      return bad("'encoding_format' must be 'float' or 'base64'", "encoding_format");
    }
    r.base64 = f->as_string() == "base64";
  }
  auto dimensions = opt_int(o, "dimensions");
  if (!dimensions) return dimensions.failure();
  if (auto d = *dimensions) {
    if (*d < 1 || *d > UINT32_MAX) return field_error("dimensions", "must be at least 1");
    r.dimensions = static_cast<uint32_t>(*d);
  }
  auto truncate = opt_int(o, "truncate_prompt_tokens");
  if (!truncate) return truncate.failure();
  if (auto t = *truncate) {
    if (*t < 1 || *t > UINT32_MAX)
      return field_error("truncate_prompt_tokens", "must be at least 1");
    r.truncate_prompt_tokens = static_cast<uint32_t>(*t);
  }
  return r;
}

namespace {

// A string, or a list of strings (at least one), into `out`.
bool texts(const json::value* v, std::vector<std::string>& out) {
  if (!v) return false;
  if (v->is_string()) {
    out.emplace_back(v->as_string());
    return true;
  }
  if (!v->is_array() || v->as_array().empty()) return false;
  for (const json::value& t : v->as_array()) {
    if (!t.is_string()) return false;
    out.emplace_back(t.as_string());
  }
  return true;
}

Result<std::optional<uint32_t>> truncate_of(const json::object& o) {
  auto t = opt_int(o, "truncate_prompt_tokens");
  if (!t) return t.failure();
  // -1 is vLLM's "up to the model's length": nothing to cut here.
  if (auto n = *t; n && *n != -1) {
    if (*n < 1 || *n > UINT32_MAX)
      return field_error("truncate_prompt_tokens", "must be at least 1");
    return std::optional<uint32_t>(static_cast<uint32_t>(*n));
  }
  return std::optional<uint32_t>();
}

}  // namespace

Result<ScoreRequest> parse_score_request(std::string_view body) {
  auto parsed = parse_object(body);
  if (!parsed) return parsed.failure();
  const json::object& o = *parsed;
  ScoreRequest r;
  if (auto m = opt_string(o, "model")) r.model = *m;
  std::vector<std::string> one, two;
  if (!texts(o.if_contains("text_1"), one)) {
    return bad("'text_1' is required: a string or a list of strings", "text_1");
  }
  if (!texts(o.if_contains("text_2"), two)) {
    return bad("'text_2' is required: a string or a list of strings", "text_2");
  }
  if (one.size() == 1) {
    for (std::string& t : two) r.pairs.emplace_back(one[0], std::move(t));
  } else if (one.size() == two.size()) {
    for (size_t i = 0; i < one.size(); ++i)
      r.pairs.emplace_back(std::move(one[i]), std::move(two[i]));
  } else {
    return bad("'text_1' and 'text_2' must have the same number of items (or 'text_1' one)",
               "text_2");
  }
  auto t = truncate_of(o);
  if (!t) return t.failure();
  r.truncate_prompt_tokens = *t;
  return r;
}

Result<RerankRequest> parse_rerank_request(std::string_view body) {
  auto parsed = parse_object(body);
  if (!parsed) return parsed.failure();
  const json::object& o = *parsed;
  RerankRequest r;
  if (auto m = opt_string(o, "model")) r.model = *m;
  const json::value* q = o.if_contains("query");
  if (!q || !q->is_string()) return bad("'query' is required: a string", "query");
  r.query = std::string(q->as_string());
  const json::value* d = o.if_contains("documents");
  if (!d || !d->is_array() || !texts(d, r.documents)) {
    return bad("'documents' is required: a list of strings", "documents");
  }
  auto top = opt_int(o, "top_n");
  if (!top) return top.failure();
  if (auto n = *top) {
    if (*n < 0 || *n > UINT32_MAX) return field_error("top_n", "must not be negative");
    r.top_n = static_cast<uint32_t>(*n);
  }
  auto t = truncate_of(o);
  if (!t) return t.failure();
  r.truncate_prompt_tokens = *t;
  return r;
}

std::string render_response(ApiKind kind, const ResponseIds& ids, std::string_view text,
                            std::string_view finish_reason, const Usage& usage,
                            std::string_view kv_transfer_json, const TokenIdFields* token_ids) {
  json::object o = head(kind, ids, false);
  json::object choice;
  choice["index"] = 0;
  if (kind == ApiKind::kChat) {
    json::object message;
    message["role"] = "assistant";
    message["content"] = text;
    message["tool_calls"] = json::array();
    choice["message"] = std::move(message);
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_value(finish_reason);
  choice["stop_reason"] = nullptr;
  if (token_ids) add_token_ids(kind, *token_ids, o, choice);
  json::array choices;
  choices.push_back(std::move(choice));
  o["choices"] = std::move(choices);
  o["usage"] = usage_json(usage);
  if (!kv_transfer_json.empty()) {
    boost::system::error_code ec;
    json::value kt = json::parse(kv_transfer_json, ec);
    o["kv_transfer_params"] = ec ? json::value(nullptr) : std::move(kt);
  } else {
    o["kv_transfer_params"] = nullptr;
  }
  return json::serialize(o);
}

std::string render_chunk(ApiKind kind, const ResponseIds& ids, std::string_view delta,
                         bool role_chunk, std::string_view finish_reason, bool with_usage_null,
                         const TokenIdFields* token_ids) {
  json::object o = head(kind, ids, true);
  json::object choice;
  choice["index"] = 0;
  if (kind == ApiKind::kChat) {
    json::object d;
    if (role_chunk) d["role"] = "assistant";
    d["content"] = delta;
    choice["delta"] = std::move(d);
  } else {
    choice["text"] = delta;
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_value(finish_reason);
  if (kind == ApiKind::kCompletion) choice["stop_reason"] = nullptr;
  if (token_ids) add_token_ids(kind, *token_ids, o, choice);
  json::array choices;
  choices.push_back(std::move(choice));
  o["choices"] = std::move(choices);
  if (with_usage_null) o["usage"] = nullptr;
  return sse(o);
}

std::string render_usage_chunk(ApiKind kind, const ResponseIds& ids, const Usage& usage) {
  json::object o = head(kind, ids, true);
  o["choices"] = json::array();
  o["usage"] = usage_json(usage);
  return sse(o);
}

}  // namespace kvgate::openai
