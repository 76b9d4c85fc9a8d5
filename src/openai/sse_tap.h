// SseTap: watches an OpenAI SSE stream on its way from the engine to the client.
//
// Upstream bytes go in as they arrive; complete events come out to forward (a partial
// event waits for its end, never more: the stream is not buffered whole). On the way
// it reads `usage` (prompt, completion and cached tokens) from the usage chunk, counts
// events that carry tokens (for TTFT and inter-token latency as the client sees them),
// and, when the client did not ask for usage, drops the usage-only chunk
// (`"choices":[]` plus usage) that the gateway requested for itself.
//
//   SseTap tap(/*strip_usage_chunk=*/!client_wants_usage);
//   std::string out;
//   SseTap::Step s = tap.feed(bytes, out);   // forward `out`; s.token_events new tokens
//   ... tap.usage()
//
// An Anthropic Messages stream (named events, openai/anthropic.h) is read as such: tokens
// are its content_block_delta events, usage comes from message_start (input tokens) and
// message_delta (output tokens), message_stop ends it. A Responses stream (responses.h):
// tokens are response.output_text.delta events, the response's id comes from
// response.created, usage from response.completed, which ends it. Nothing is stripped
// from either.
//
// Not thread-safe (one per stream).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "openai/api_kind.h"
#include "openai/usage.h"

namespace kvgate::openai {

class SseTap {
 public:
  explicit SseTap(bool strip_usage_chunk, Dialect dialect = Dialect::kOpenAi)
      : strip_usage_(strip_usage_chunk), dialect_(dialect) {}

  struct Step {
    size_t token_events = 0;  // completed events whose choices are non-empty
    bool done = false;        // `data: [DONE]` (Anthropic: message_stop) passed
  };
  Step feed(std::string_view data, std::string& out);
  // Bytes of an unfinished event still held (forwarded only when it completes).
  size_t pending() const { return partial_.size(); }
  const Usage& usage() const { return usage_; }
  bool saw_error() const { return saw_error_; }
  // Responses: the response's id (from response.created), "" until then.
  const std::string& response_id() const { return response_id_; }

 private:
  void on_event(std::string_view event, std::string& out, Step& step);
  void on_named_event(std::string_view event, Step& step);

  bool strip_usage_;
  Dialect dialect_;
  std::string response_id_;
  std::string partial_;
  Usage usage_;
  bool saw_error_ = false;
};

}  // namespace kvgate::openai
