// The OpenAI body readers: the fast paths (openai_json_fast.h) against the full parse
// (openai_json_dom.h), which defines the answers. Whenever a fast path answers, it must
// answer exactly what the full parse answers; inspect_request and parse_usage (which
// pick between them) must always answer as the full parse. The first byte picks the
// reader: chat request, completion request, a usage-bearing response, or an embeddings,
// tokenize, detokenize, score or rerank body (inspect_aux_request, then the body sent
// upstream), or an
// Anthropic Messages or Responses body (the chat request it stands for).
#include <string>

#include "fuzz/fuzz_support.h"
#include "openai/anthropic.h"
#include "openai/json_dom.h"
#include "openai/json_fast.h"
#include "openai/request.h"
#include "openai/responses.h"

namespace {

using namespace kvgate::openai;

std::string show(const Usage& u) {
  return std::to_string(u.seen) + "/" + std::to_string(u.prompt_tokens) + "/" +
         std::to_string(u.completion_tokens) + "/" + std::to_string(u.cached_tokens);
}

std::string show(const Inspection& i) {
  if (i.error) {
    return "error " + std::to_string(kvgate::http_status(i.error->code)) + " [" + i.error->message +
           "] param [" + i.error->field + "]";
  }
  const InspectedRequest& r = i.request;
  return "ok model [" + r.model + "] stream " + std::to_string(r.stream) + " usage " +
         std::to_string(r.client_wants_usage) + " has_so " + std::to_string(r.has_stream_options) +
         " max " + std::to_string(r.max_tokens) + " prio " +
         std::to_string(r.priority.value_or(-1)) + " prompt [" + r.prompt_text + "]";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  const int mode = data[0] % 10;
  if (mode >= 8) {
    // Messages and Responses bodies: the chat request each stands for is a JSON object the
    // chat inspection reads (accepted or refused, never a crash).
    std::string chat;
    if (mode == 8) {
      auto got = anthropic::messages_to_chat(body);
      if (got) chat = std::move(*got);
    } else {
      auto got = responses::to_chat(body);
      if (got) chat = std::move(got->chat);
    }
    if (!chat.empty()) {
      const Inspection i = dom::inspect_request(chat, ApiKind::kChat);
      KVGATE_FUZZ_CHECK(!i.error || kvgate::http_status(i.error->code) == 400, chat);
    }
    return 0;
  }
  if (mode >= 3) {
    // The bodies relayed without generating: inspected, then sent with the served name.
    const auto api = static_cast<AuxApi>(mode - 3);
    const Inspection aux = inspect_aux_request(body, api);
    if (!aux.error) {
      const std::string sent = rewrite_request(body, "served", /*stream=*/false);
      const Inspection again = inspect_aux_request(sent, api);
      KVGATE_FUZZ_CHECK(!again.error, "upstream body does not parse: " + sent);
      KVGATE_FUZZ_CHECK(again.request.model == "served", sent);
      KVGATE_FUZZ_CHECK(again.request.prompt_text == aux.request.prompt_text, sent);
      KVGATE_FUZZ_CHECK(again.request.given_tokens == aux.request.given_tokens, sent);
    }
    return 0;
  }
  if (mode == 2) {
    const std::string want = show(dom::parse_usage(body));
    KVGATE_FUZZ_CHECK(show(parse_usage(body)) == want, want);
    Usage fast_usage;
    if (fast::parse_usage(body, fast_usage)) {
      KVGATE_FUZZ_CHECK(show(fast_usage) == want, "fast " + show(fast_usage) + " full " + want);
    }
    return 0;
  }
  const ApiKind kind = mode == 0 ? ApiKind::kChat : ApiKind::kCompletion;
  const Inspection full = dom::inspect_request(body, kind);
  const std::string want = show(full);
  KVGATE_FUZZ_CHECK(show(inspect_request(body, kind)) == want, want);
  InspectedRequest fast_request;
  if (fast::inspect_request(body, kind, fast_request)) {
    const std::string got = show(Inspection{std::nullopt, fast_request});
    KVGATE_FUZZ_CHECK(got == want, "fast " + got + "\nfull " + want);
  }
  // What goes upstream: the text splice must be the DOM rewrite's JSON, value for value.
  if (!full.error) {
    const std::string spliced = upstream_body(body, full.request, "served");
    const Inspection again = dom::inspect_request(spliced, kind);
    KVGATE_FUZZ_CHECK(!again.error, "upstream body does not parse: " + spliced);
    KVGATE_FUZZ_CHECK(again.request.model == "served", spliced);
    KVGATE_FUZZ_CHECK(again.request.stream == full.request.stream, spliced);
    KVGATE_FUZZ_CHECK(again.request.max_tokens == full.request.max_tokens, spliced);
    KVGATE_FUZZ_CHECK(again.request.prompt_text == full.request.prompt_text, spliced);
    if (full.request.stream) KVGATE_FUZZ_CHECK(again.request.client_wants_usage, spliced);
  }
  return 0;
}
