// Usage: the token counts of one OpenAI answer, as its `usage` object carries them
// (prompt_tokens, completion_tokens, prompt_tokens_details.cached_tokens).
//
// The engine simulator writes them (engine_api.h), the gateway reads them from the
// answers it proxies (sse_tap.h) to charge the tenant, and the load generator from the
// streams it receives (stream_reader.h).
//
//   Usage u = parse_usage(body);   // a whole answer, or one SSE chunk's JSON
//   if (u.seen) charge(u.prompt_tokens + u.completion_tokens);
#pragma once

#include <cstdint>
#include <string_view>

namespace kvgate::openai {

struct Usage {
  uint64_t prompt_tokens = 0;
  uint64_t completion_tokens = 0;
  uint64_t cached_tokens = 0;  // prompt tokens the engine found in its prefix cache
  bool seen = false;           // parse_usage: the text had a `usage` object
};

// The top-level `usage` of `json_text` (a whole answer, or one SSE chunk's JSON). A count
// that is missing or not a non-negative integer reads 0; text that is not a JSON object
// with a `usage` object gives Usage{} (seen false).
Usage parse_usage(std::string_view json_text);

}  // namespace kvgate::openai
