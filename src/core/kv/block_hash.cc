#include "core/kv/block_hash.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace kvgate::kv {

uint64_t block_seed(std::string_view model, std::string_view lora_name,
                    std::string_view cache_salt) {
  // Each part is hashed with the previous part's hash as its seed; a length prefix
  // keeps ("ab", "c") and ("a", "bc") apart.
  uint64_t h = 0x6b76676174650001ULL;  // "kvgate" + version 1 of the key scheme
  for (std::string_view part : {model, lora_name, cache_salt}) {
    uint64_t len = part.size();
    h = XXH3_64bits_withSeed(&len, sizeof(len), h);
    h = XXH3_64bits_withSeed(part.data(), part.size(), h);
  }
  return h;
}

BlockKey hash_block(BlockKey parent, std::span<const TokenId> tokens) {
  return XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), parent);
}

size_t hash_blocks(std::span<const TokenId> tokens, size_t block_size, uint64_t seed,
                   std::vector<BlockKey>& out) {
  const size_t n = tokens.size() / block_size;
  out.reserve(out.size() + n);
  BlockKey key = seed;
  for (size_t i = 0; i < n; ++i) {
    key = hash_block(key, tokens.subspan(i * block_size, block_size));
    out.push_back(key);
  }
  return n;
}

}  // namespace kvgate::kv
