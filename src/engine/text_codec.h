// TextCodec: prompt text to token ids, and token ids to output text, for the simulated
// engine.
//
// Without a tokenizer (`kvgate engine` with no --tokenizer), WordCodec stands in: every
// whitespace-separated word becomes one token, the word's xxHash3 folded into the
// vocabulary. It is stable across processes and runs, and equal prompt prefixes give
// equal token prefixes, which is all the prefix cache and the router need. Chat messages
// are framed like ChatML (<|im_start|>role ... <|im_end|>, then <|im_start|>assistant) so
// a conversation that grows turn by turn keeps its earlier tokens; an assistant message's
// tool calls are words too (name, then arguments), and continue_final_message leaves the
// last message open.
//
// Output text is pseudo-text: token id -> one word with a leading space, so a response
// of N tokens is exactly N words and its token count is exact by construction.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.h"
#include "core/kv/block_hash.h"
#include "core/tokenizer/chat.h"

namespace kvgate::engine_server {

class TextCodec {
 public:
  virtual ~TextCodec() = default;
  // Errors: text the tokenizer cannot take (invalid UTF-8 for a real tokenizer).
  // add_special_tokens: the tokenizer's post-processor tokens too (e.g. Llama 3's BOS), as
  // vLLM adds them to completion prompts by default.
  virtual Result<std::vector<kv::TokenId>> encode(std::string_view text,
                                                  bool add_special_tokens) const = 0;
  // A chat request (core/tokenizer/chat.h: messages with content parts, tools,
  // chat_template_kwargs, add_generation_prompt, continue_final_message) rendered as the
  // engine renders it, then encoded; add_special_tokens as for encode (vLLM's default for
  // chat is false: the template writes BOS). Non-text content parts are left out.
  virtual Result<std::vector<kv::TokenId>> encode_chat(const tokenizer::ChatRequest& chat,
                                                       bool add_special_tokens) const = 0;
  // The text of each token alone (POST /tokenize's `token_strs`). vLLM gives the raw
  // vocabulary entries (convert_ids_to_tokens, e.g. "Ġhello"); this gives each id decoded
  // (" hello"; the word codec: its own words). Errors: an id the tokenizer lacks.
  virtual Result<std::vector<std::string>> token_strs(std::span<const kv::TokenId> ids) const = 0;
  // The text of `ids` together (POST /detokenize), special tokens kept as vLLM's does. The
  // word codec cannot invert its hash: its output words, as in an answer. Errors: an id
  // the tokenizer lacks.
  virtual Result<std::string> decode(std::span<const kv::TokenId> ids) const = 0;
};

// The default codec (see the header comment). vocab_size > 8.
std::unique_ptr<TextCodec> make_word_codec(uint32_t vocab_size);

// A real tokenizer (src/core/tokenizer): tokenizer.json text, and optionally
// tokenizer_config.json text whose chat template renders chat prompts (Qwen3, Llama 3).
// Without a template, chat messages are framed as ChatML text before encoding.
Result<std::unique_ptr<TextCodec>> make_tokenizer_codec(std::string_view tokenizer_json,
                                                        std::string_view tokenizer_config_json);

// The text of one output token: a word with a leading space.
std::string_view output_token_text(kv::TokenId token);

}  // namespace kvgate::engine_server
