// The request bodies of vLLM's prefill/decode proxy protocol (NixlConnector), as the
// gateway builds them for the two hops of a disaggregated request
// (/work/shared/PROTOCOLS.md, "vLLM prefill/decode disaggregation"; docs/gateway.md).
//
//   1. prefill hop: the request with max_tokens 1 (and max_completion_tokens 1 when it
//      is there), stream false, no stream_options, no min_tokens / min_completion_tokens
//      (the prefill engine stops after one token), and kv_transfer_params asking for a
//      remote decode;
//   2. the prefill engine answers with kv_transfer_params (engine id, block ids, host,
//      port): where the decode engine pulls the KV from;
//   3. decode hop: the original request with those kv_transfer_params.
//
//   Result<std::string> p = prefill_body(upstream_body);
//   ... send *p to the prefill endpoint, read its JSON answer ...
//   Result<std::optional<std::string>> kt = transfer_params_of(answer);
//   Result<std::string> d = decode_body(upstream_body, kt->value_or(""));
//
// Pure functions; the inputs are JSON texts, errors say what was wrong with them.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/common/result.h"

namespace kvgate::openai {

// The prefill hop's body from the body the gateway sends upstream (model already
// rewritten). Error when `body` is not a JSON object.
Result<std::string> prefill_body(std::string_view body);

// kv_transfer_params of the prefill engine's (non-streamed) answer, serialized; nullopt
// when the answer has none or null (the engine runs without a KV connector: the decode
// engine then prefills itself). Error when `answer` is not a JSON object or the field
// is neither an object nor null.
Result<std::optional<std::string>> transfer_params_of(std::string_view answer);

// The decode hop's body: `body` with kv_transfer_params set to `transfer_params` (a
// JSON object's text), or unchanged when `transfer_params` is empty.
Result<std::string> decode_body(std::string_view body, std::string_view transfer_params);

}  // namespace kvgate::openai
