#include "core/tokenizer/chat_context.h"

#include <boost/json.hpp>
#include <optional>
#include <utility>

#include "core/template/builtins.h"
#include "core/template/json_value.h"
#include "core/tokenizer/chat_template.h"

namespace kvgate::tokenizer {
namespace {

using jinja::DictObj;
using jinja::Value;

// `v` as a template value; None when it cannot be one, the first such error kept in
// `failed`.
Value json_value(const boost::json::value& v, std::optional<Error>& failed) {
  Result<Value> r = jinja::from_json(v);
  if (r) return std::move(r).value();
  if (!failed) failed.emplace(r.failure());
  return Value::none();
}

Value text_part(Value text) {
  auto d = jinja::make_obj<DictObj>();
  d->items.reserve(2);
  d->items.emplace_back(Value::borrowed("type"), Value::borrowed("text"));
  d->items.emplace_back(Value::borrowed("text"), std::move(text));
  return Value::dict(std::move(d));
}

Value content_value(const ChatMessage& m, bool as_parts, bool is_final, bool continue_final) {
  const bool tag = is_final && continue_final;
  if (!as_parts) {
    if (!tag) return Value::borrowed(m.content);
    return Value::string(m.content + std::string(kContinueFinalMessageTag));
  }
  jinja::ValueList parts;
  parts.reserve(m.content_is_list ? m.parts.size() : 1);
  if (m.content_is_list) {
    for (const std::string& p : m.parts) parts.push_back(text_part(Value::borrowed(p)));
  } else if (!m.content_is_null) {
    parts.push_back(text_part(Value::borrowed(m.content)));
  }
  if (tag && !parts.empty()) {
    Value& last = parts.back();
    const Value* text = last.as_dict().find("text");
    last =
        text_part(Value::string(std::string(text->str()) + std::string(kContinueFinalMessageTag)));
  }
  return Value::list(std::move(parts));
}

Value message_value(const ChatMessage& m, bool as_parts, bool is_final, bool continue_final,
                    std::optional<Error>& failed) {
  auto d = jinja::make_obj<DictObj>();
  d->items.reserve(6);
  d->items.emplace_back(Value::borrowed("role"), Value::borrowed(m.role));
  d->items.emplace_back(Value::borrowed("content"),
                        content_value(m, as_parts, is_final, continue_final));
  if (!m.tool_calls.empty()) {
    jinja::ValueList calls;
    calls.reserve(m.tool_calls.size());
    for (const ToolCall& c : m.tool_calls) calls.push_back(json_value(c.json, failed));
    d->items.emplace_back(Value::borrowed("tool_calls"), Value::list(std::move(calls)));
  }
  if (m.reasoning_content) {
    d->items.emplace_back(Value::borrowed("reasoning"), Value::borrowed(*m.reasoning_content));
    d->items.emplace_back(Value::borrowed("reasoning_content"),
                          Value::borrowed(*m.reasoning_content));
  }
  if (m.tool_call_id)
    d->items.emplace_back(Value::borrowed("tool_call_id"), Value::borrowed(*m.tool_call_id));
  if (m.name) d->items.emplace_back(Value::borrowed("name"), Value::borrowed(*m.name));
  return Value::dict(std::move(d));
}

}  // namespace

Result<Value> build_chat_context(const ChatRequest& req, const SpecialTokens& tokens, bool as_parts,
                                 const jinja::Template* only_for) {
  std::optional<Error> failed;
  auto wanted = [only_for](std::string_view name) {
    return !only_for || only_for->references(name);
  };
  auto ctx = jinja::make_obj<DictObj>();
  for (const auto& [name, value] : tokens.named)
    if (wanted(name)) ctx->items.emplace_back(Value::borrowed(name), Value::borrowed(value));
  if (!tokens.additional.empty() && wanted("additional_special_tokens")) {
    jinja::ValueList extra;
    for (const std::string& t : tokens.additional) extra.push_back(Value::borrowed(t));
    ctx->items.emplace_back(Value::borrowed("additional_special_tokens"),
                            Value::list(std::move(extra)));
  }
  if (wanted("messages")) {
    jinja::ValueList messages;
    messages.reserve(req.messages.size());
    for (size_t i = 0; i < req.messages.size(); ++i)
      messages.push_back(message_value(req.messages[i], as_parts, i + 1 == req.messages.size(),
                                       req.continue_final_message, failed));
    ctx->set(Value::borrowed("messages"), Value::list(std::move(messages)));
  }
  if (wanted("tools")) ctx->set(Value::borrowed("tools"), json_value(req.tools_json, failed));
  if (wanted("documents"))
    ctx->set(Value::borrowed("documents"), json_value(req.documents, failed));
  ctx->set(Value::borrowed("add_generation_prompt"), Value::boolean(req.add_generation_prompt));
  if (req.enable_thinking)
    ctx->set(Value::borrowed("enable_thinking"), Value::boolean(*req.enable_thinking));
  for (const auto& kv : req.extra_kwargs) {
    const auto k = kv.key();
    const std::string_view name(k.data(), k.size());
    if (wanted(name)) ctx->set(Value::borrowed(name), json_value(kv.value(), failed));
  }
  if (failed) return Error(*failed);
  return Value::dict(std::move(ctx));
}

Result<std::string> cut_at_continue_tag(std::string rendered, std::string_view final_text) {
  const std::string_view tag = kContinueFinalMessageTag;
  const std::string_view tag_stripped = tag.substr(0, tag.size() - 1);
  const std::string_view text = jinja::py_strip(final_text, nullptr, true, true);
  const size_t loc = rendered.rfind(tag_stripped);
  if (loc == std::string::npos || rendered.find(text) == std::string::npos)
    return Error(
        "continue_final_message is set but the final message does not appear in the chat "
        "after applying the chat template");
  if (std::string_view(rendered).substr(loc, tag.size()) == tag) {
    rendered.resize(loc);
  } else {
    rendered.resize(
        jinja::py_strip(std::string_view(rendered).substr(0, loc), nullptr, false, true).size());
  }
  return rendered;
}

}  // namespace kvgate::tokenizer
