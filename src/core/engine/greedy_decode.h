// Greedy decoding of the simulated engine: the output of a request sampled at
// temperature 0 is a function of its context alone, as a real model's greedy answer is.
//
// Each next token is a hash of every token before it (prompt, then the tokens produced so
// far), so a request whose prompt is another's prompt plus the first k tokens of that one's
// answer continues exactly where the other was: stream migration (docs/reliability.md)
// relies on it to show that a spliced answer equals an uninterrupted one.
//
//   auto out = greedy_continuation(prompt, 16, vocab_size);
//   // prompt ++ out[0..k)  ->  greedy_continuation(that, 16 - k, vocab_size) == out[k..16)
//
// Pure; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/kv/block_hash.h"

namespace kvgate::engine {

// `count` tokens after `context`, each in [0, vocab_size). REQUIRES: vocab_size > 0.
std::vector<kv::TokenId> greedy_continuation(std::span<const kv::TokenId> context, uint32_t count,
                                             uint32_t vocab_size);

}  // namespace kvgate::engine
