// Block keys for the cluster tests: `blocks` blocks of consecutive token ids from
// seed x 100000, hashed as the gateway hashes a prompt (block size kBs).
#pragma once

#include <numeric>
#include <vector>

#include "core/kv/block_hash.h"

namespace kvgate::cluster {

inline constexpr uint32_t kBs = 16;

inline std::vector<kv::BlockKey> block_keys(uint32_t blocks, uint32_t seed) {
  std::vector<kv::TokenId> tokens(blocks * kBs);
  std::iota(tokens.begin(), tokens.end(), seed * 100000);
  std::vector<kv::BlockKey> keys;
  kv::hash_blocks(tokens, kBs, kv::block_seed("m", "", ""), keys);
  return keys;
}

}  // namespace kvgate::cluster
