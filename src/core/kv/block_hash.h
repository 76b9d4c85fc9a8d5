// Chained block keys: how kvgate names a prefix of a prompt.
//
// A prompt's token ids are cut into full blocks of `block_size` tokens (16 is vLLM's
// default, 64 is common). Block i's key is a 64-bit xxHash3 of block i's tokens, seeded
// with block i-1's key; block 0 is seeded with a per-request seed that mixes the model,
// the LoRA adapter and the cache salt. So one key names a whole prefix: two prompts share
// key i exactly when they share their first i+1 blocks (and model, adapter, salt).
// A trailing partial block gets no key: engines cache only full blocks.
//
//   uint64_t seed = block_seed("qwen3-32b", /*lora=*/"", /*cache_salt=*/"");
//   std::vector<BlockKey> keys;
//   hash_blocks(token_ids, 16, seed, keys);  // keys.size() == token_ids.size() / 16
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace kvgate::kv {

using TokenId = uint32_t;
using BlockKey = uint64_t;

// The seed for a request's first block. Empty strings are valid (no adapter, no salt).
uint64_t block_seed(std::string_view model, std::string_view lora_name,
                    std::string_view cache_salt);

// Key of one block given its parent's key (or the request seed for block 0).
// REQUIRES: tokens.size() is the pool's block size.
BlockKey hash_block(BlockKey parent, std::span<const TokenId> tokens);

// Appends the keys of every full block of `tokens` to `out`; returns how many it added.
// REQUIRES: block_size > 0.
size_t hash_blocks(std::span<const TokenId> tokens, size_t block_size, uint64_t seed,
                   std::vector<BlockKey>& out);

}  // namespace kvgate::kv
