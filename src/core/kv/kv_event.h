// KvEvent: what an engine tells listeners about its prefix cache, in vLLM's vocabulary
// (vllm/distributed/kv_events.py). One set of values from end to end: the engine model
// emits them (core/engine/), `kvgate engine` encodes them on the wire and the gateway
// decodes them (vllm_event_codec.h), and both the gateway and the simulator apply them
// to a PreciseIndex with one call (event_apply.h).
//
// Block hashes are the ENGINE's own 64-bit hashes (chained from the parent, seeded per
// process), not kvgate's router keys: a consumer maps them through the tokens, exactly as
// with a real vLLM.
//
// When they happen (vLLM's rules):
//   BlockStored      a full block was committed to the prefix cache (its tokens are all
//                    computed). Consecutive blocks of one request committed in the same
//                    step form one event; parent_block_hash is the hash of the block
//                    before the first one (none for a prompt's first block).
//   BlockRemoved     a cached block was evicted because its memory was reused.
//   AllBlocksCleared the whole prefix cache was reset.
// With CPU offloading (vLLM's OffloadingConnector) the same two events carry medium
// "CPU": a BlockStored without tokens or parent names blocks the engine already reported
// (by hash) that now have a copy in host memory, a BlockRemoved(CPU) drops such a copy.
// An event without a medium (older vLLM) means GPU. A disk tier below host memory
// (the engine model's, SGLang's HiCache storage) uses medium "DISK" the same way;
// event_apply.h lists the other spellings a listener reads as host memory or disk.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace kvgate::kv {

inline constexpr const char* kMediumGpu = "GPU";
inline constexpr const char* kMediumCpu = "CPU";
inline constexpr const char* kMediumDisk = "DISK";

// The engine's own block hash as it appears on the wire (not kvgate's BlockKey).
using EngineBlockHash = uint64_t;

struct BlockStored {
  std::vector<EngineBlockHash> block_hashes;
  std::optional<EngineBlockHash> parent_block_hash;  // nullopt: chain starts at the root
  std::vector<uint32_t> token_ids;                   // block_hashes.size() * block_size
  uint32_t block_size = 0;
  std::optional<int64_t> lora_id;
  std::optional<std::string> medium;  // "GPU", "CPU", "DISK"
  std::optional<std::string> lora_name;
  // The request's cache salt (vLLM's `cache_salt`), set only on an event whose chain
  // starts at the root (no parent): the salt seeds the first block's hash, and every
  // later block inherits it through its parent. On the wire it is vLLM's `extra_keys`
  // (one entry per block; the first block's holds the adapter name, then the salt).
  std::optional<std::string> cache_salt;
  bool operator==(const BlockStored&) const = default;
};

struct BlockRemoved {
  std::vector<EngineBlockHash> block_hashes;
  std::optional<std::string> medium;
  bool operator==(const BlockRemoved&) const = default;
};

struct AllBlocksCleared {
  bool operator==(const AllBlocksCleared&) const = default;
};

using KvEvent = std::variant<BlockStored, BlockRemoved, AllBlocksCleared>;

}  // namespace kvgate::kv
