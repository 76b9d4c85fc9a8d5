#include "openai/pd_request.h"

#include <boost/json.hpp>

namespace kvgate::openai {
namespace json = boost::json;

namespace {

Result<json::object> parse_object(std::string_view text, std::string_view what) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec) return Error(std::string(what) + " is not valid JSON: " + ec.message());
  if (!v.is_object()) return Error(std::string(what) + " is not a JSON object");
  return std::move(v.as_object());
}

}  // namespace

Result<std::string> prefill_body(std::string_view body) {
  auto parsed = parse_object(body, "the request body");
  if (!parsed) return Error(parsed.error());
  json::object& o = *parsed;
  o["kv_transfer_params"] = json::object{
      {"do_remote_decode", true},    {"do_remote_prefill", false}, {"remote_engine_id", nullptr},
      {"remote_block_ids", nullptr}, {"remote_host", nullptr},     {"remote_port", nullptr}};
  o["stream"] = false;
  o["max_tokens"] = 1;
  if (o.contains("max_completion_tokens")) o["max_completion_tokens"] = 1;
  o.erase("stream_options");
  // The prefill engine must stop after its one token.
  o.erase("min_tokens");
  o.erase("min_completion_tokens");
  return json::serialize(o);
}

Result<std::optional<std::string>> transfer_params_of(std::string_view answer) {
  auto parsed = parse_object(answer, "the prefill answer");
  if (!parsed) return Error(parsed.error());
  const json::value* kt = parsed->if_contains("kv_transfer_params");
  if (!kt || kt->is_null()) return std::optional<std::string>();
  if (!kt->is_object()) return Error("the prefill answer's kv_transfer_params is not an object");
  return std::optional<std::string>(json::serialize(*kt));
}

Result<std::string> decode_body(std::string_view body, std::string_view transfer_params) {
  if (transfer_params.empty()) return std::string(body);
  auto parsed = parse_object(body, "the request body");
  if (!parsed) return Error(parsed.error());
  auto params = parse_object(transfer_params, "kv_transfer_params");
  if (!params) return Error(params.error());
  (*parsed)["kv_transfer_params"] = std::move(*params);
  return json::serialize(*parsed);
}

}  // namespace kvgate::openai
