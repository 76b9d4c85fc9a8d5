// KvEvent: what an engine tells listeners about its prefix cache, as vLLM does.
//
// Plain values; the engine server encodes them in vLLM's msgpack wire format
// (PROTOCOLS.md, vLLM's vllm/distributed/kv_events.py) and the simulator may hand them
// straight to a PreciseIndex. Block hashes are the ENGINE's own 64-bit hashes (chained
// from the parent, seeded per process), not kvgate's router keys: a consumer must map
// them through the tokens, exactly as with a real vLLM.
//
// When they happen (vLLM's rules):
//   BlockStored      a full block was committed to the prefix cache (its tokens are all
//                    computed). Consecutive blocks of one request committed in the same
//                    step form one event; parent_block_hash is the hash of the block
//                    before the first one (none for a prompt's first block).
//   BlockRemoved     a cached block was evicted because its memory was reused.
//   AllBlocksCleared the whole prefix cache was reset.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/kv/block_hash.h"

namespace kvgate::engine {

using EngineBlockHash = uint64_t;

inline constexpr const char* kMediumGpu = "GPU";

struct BlockStored {
  std::vector<EngineBlockHash> block_hashes;
  std::optional<EngineBlockHash> parent_block_hash;
  std::vector<kv::TokenId> token_ids;  // block_hashes.size() * block_size tokens
  uint32_t block_size = 16;
  std::optional<int64_t> lora_id;
  std::string medium = kMediumGpu;
  std::optional<std::string> lora_name;

  bool operator==(const BlockStored&) const = default;
};

struct BlockRemoved {
  std::vector<EngineBlockHash> block_hashes;
  std::string medium = kMediumGpu;

  bool operator==(const BlockRemoved&) const = default;
};

struct AllBlocksCleared {
  bool operator==(const AllBlocksCleared&) const = default;
};

using KvEvent = std::variant<BlockStored, BlockRemoved, AllBlocksCleared>;

}  // namespace kvgate::engine
