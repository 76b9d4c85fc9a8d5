// What the gateway reads from (and changes in) an OpenAI request body before proxying.
//
// inspect_request validates the body just enough to route it and to answer bad input
// with the status and OpenAI-style error the client expects (400 with `param` naming
// the field); the engine validates the rest. For the upstream it rewrites `model` to
// the pool's served name and, on streams, asks for usage (stream_options.include_usage)
// so the gateway always learns the token counts; `client_wants_usage` remembers whether
// the client asked, so the extra usage chunk can be stripped (sse_tap.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/common/result.h"
#include "openai/api_kind.h"

namespace kvgate::openai {

struct InspectedRequest {
  std::string model;
  bool stream = false;
  bool client_wants_usage = false;
  bool has_stream_options = false;  // the body has a stream_options member (even null)
  uint32_t max_tokens = 0;          // 0: not given
  std::string prompt_text;          // the prompt's raw text (messages' contents joined, or the
                                    // completion prompt): the routing fallback without tokenizer
  std::optional<int> priority;      // none here; set from headers by the caller
  uint32_t given_tokens = 0;        // embeddings: token ids given as input (counted, not text)
  // vLLM's `cache_salt` ("" when none): it seeds the prompt's block hashes, so prompts of
  // different salts share no cached prefix. The body goes upstream with it unchanged (the
  // engine reads it); the gateway seeds its block keys with it (PoolRouting::keys_for).
  // vLLM refuses an empty string (400, param cache_salt), as inspect_request does.
  std::string cache_salt;
};

struct Inspection {
  // A bad body: kInvalidArgument (http_status: 400), its field the parameter at fault
  // (OpenAI's `param`; empty for the body as a whole).
  std::optional<Error> error;
  InspectedRequest request;
};

// Parses and checks `body`. On success, `request` is filled.
Inspection inspect_request(std::string_view body, ApiKind kind);

// The gateway's side of the bodies it relays without generating: POST /v1/embeddings,
// /score, /rerank, /tokenize, /detokenize and Anthropic's /v1/messages/count_tokens
// (engine_api.h and anthropic.h have the engine's side; count_tokens: `messages` a list). It
// reads `model` (absent or null: left empty, for the caller to default) and, for the
// pooling APIs, what the router's load estimate needs: the input's texts joined in
// `prompt_text` (score and rerank: each pair's), its token ids counted in `given_tokens`.
// Errors as inspect_request's: 400 naming the field.
enum class AuxApi : uint8_t { kEmbeddings, kTokenize, kDetokenize, kScore, kRerank, kCountTokens };
Inspection inspect_aux_request(std::string_view body, AuxApi api);

// The body to send upstream: `model` replaced by `served_model`, and on streams
// stream_options.include_usage forced to true. REQUIRES: inspect_request succeeded.
std::string rewrite_request(std::string_view body, std::string_view served_model, bool stream);

// True when the body goes upstream as it came: the model is its served name, and it is not
// a stream, or a stream that asked for usage already.
bool sent_unchanged(const InspectedRequest& request, std::string_view served_model);

// The same, from what inspect_request found, without parsing again where it can: the
// body unchanged when nothing needs rewriting (the model is its served name and a stream
// asked for usage already), `stream_options` spliced in as text when a stream has none;
// otherwise as rewrite_request. REQUIRES: `request` is inspect_request's for `body`.
std::string upstream_body(std::string_view body, const InspectedRequest& request,
                          std::string_view served_model);

}  // namespace kvgate::openai
