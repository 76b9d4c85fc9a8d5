// Stream migration: a streamed answer that survives the death of its engine.
//
// Opt-in per pool (`migration: {max_migrations: 2}`). The gateway asks the engine for
// vLLM's `return_token_ids`, so every chunk says which token ids it carries and the first
// one the prompt's ids. When the engine fails mid-stream (connection lost, timeout, a
// malformed body), the gateway sends a continuation to another endpoint:
// `POST /v1/completions` whose prompt is the original prompt's token ids followed by the
// ids already streamed, `max_tokens` reduced by what was streamed, the original sampling
// parameters otherwise. The continuation's chunks are rewritten into the original
// stream's shape (its id, created, model and object; a chat's `delta.content` from the
// completion's `text`), and its usage into the whole answer's (prompt tokens of the
// original prompt, completion tokens of all legs), so the client sees one uninterrupted
// answer. Token ids, not text: the continuation is exact at the token level (a text
// re-tokenized need not give the same ids back), it works for chat and completions
// alike (the chat template was applied once, by the first engine), and at temperature 0
// the answer equals an uninterrupted one. The token ids the gateway asked for are
// removed from what the client sees unless the client asked for them itself.
//
// This class is the stream's side of it, without I/O: the gateway's stream pump feeds it
// the upstream's bytes and forwards what it returns; on a failure it asks for the
// continuation's body and begins a new leg.
//
//   auto m = MigratingStream::start(upstream_body, kind);
//   send m->first_body() ...
//   m->feed(piece, out);                  // forward `out` (whole events only)
//   on failure: if (m->can_continue()) send m->continuation_body(); m->begin_leg();
//   if (m->complete()) out += m->closing_events();
//
// Not thread-safe (one per stream).
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/kv/block_hash.h"
#include "openai/api_kind.h"

namespace kvgate::gateway {

class MigratingStream {
 public:
  // From the body the gateway sends upstream for a streamed request (a JSON object);
  // nullopt when it is not one.
  static std::optional<MigratingStream> start(std::string_view upstream_body, openai::ApiKind kind);

  // The first leg's body: the upstream body with return_token_ids on.
  std::string first_body() const;

  // Bytes of the current leg as they arrive; appends to `out` the complete events the
  // client gets (a partial event waits for its end, and is dropped by begin_leg()).
  void feed(std::string_view data, std::string& out);

  // Whether the answer can be continued elsewhere: the engine sent the prompt's token ids
  // and the answer is not complete.
  bool can_continue() const { return prompt_known_ && !complete(); }
  // Every token of the answer went through (a finish_reason, or max_tokens reached).
  bool complete() const;
  // Tokens streamed so far (all legs), and the original prompt's length (0: unknown).
  size_t generated() const { return generated_.size(); }
  size_t prompt_tokens() const { return prompt_ids_.size(); }
  // max_tokens left for a continuation; nullopt when the original set none.
  std::optional<uint32_t> remaining() const;

  // The continuation: a /v1/completions body (streamed, with usage and token ids).
  std::string continuation_body() const;
  // The next events come from a continuation (rewritten into the original's shape).
  void begin_leg();
  // For an answer complete before its engine's [DONE] came: the usage chunk (the gateway
  // strips it when the client did not ask for usage) and [DONE].
  std::string closing_events() const;

 private:
  MigratingStream() = default;
  void relay(std::string_view event, std::string& out);
  void learn_identity(const boost::json::object& chunk);
  std::string rewrite_continuation(boost::json::object& chunk);
  boost::json::object usage_of_whole(const boost::json::object* leg_usage) const;

  openai::ApiKind kind_ = openai::ApiKind::kChat;
  boost::json::object original_;  // the upstream body, as parsed
  bool client_wants_ids_ = false;
  std::optional<uint32_t> max_tokens_;
  std::string partial_;  // an unfinished event of the current leg

  // Learnt from the first leg.
  bool identity_known_ = false;
  boost::json::value id_, created_, model_, object_;
  bool usage_null_ = false;  // the chunks carry "usage": null (include_usage)
  bool prompt_known_ = false;
  std::vector<kv::TokenId> prompt_ids_;
  std::vector<kv::TokenId> generated_;
  bool finished_ = false;
  bool usage_sent_ = false;  // the answer's usage chunk already went through
  // Legs after the first: tokens carried in as prompt when the leg began.
  int leg_ = 0;
  size_t carried_ = 0;
};

}  // namespace kvgate::gateway
