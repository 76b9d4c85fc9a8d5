// EngineConfig: how one simulated engine is sized and scheduled (vLLM's engine args).
//
// Built once by the shell (`kvgate engine` flags, a simulator scenario) and copied into
// the EngineModel; constant afterwards. Zero values mean "take the profile's value".
//
//   EngineConfig config;
//   config.num_gpu_blocks = 4096;  // else profile.num_gpu_blocks
//   config.hash_seed = process_seed;
//   EngineModel engine(config, *builtin_profile("h100-qwen2.5-7b"));
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/common/role.h"

namespace kvgate::engine {

// What part of disaggregated serving an engine plays (core/common/role.h).
using ::kvgate::parse_role;
using ::kvgate::Role;
inline std::string_view role_name(Role role) { return to_string(role); }

struct EngineConfig {
  // KV pool: number of blocks and tokens per block. 0 = the profile's value.
  uint32_t num_gpu_blocks = 0;
  uint32_t block_size = 0;

  // Scheduler limits (vLLM defaults).
  uint32_t max_num_seqs = 256;             // running batch bound
  uint32_t max_num_batched_tokens = 8192;  // tokens computed per step (chunked prefill)
  uint32_t max_model_len = 0;              // prompt + output bound; 0 = profile's

  // Prefix caching: full blocks stay cached after use and are reused by content.
  bool enable_prefix_caching = true;
  // Emit KV events in StepResult::kv_events (the simulator may turn them off when no
  // precise index listens, to save work).
  bool emit_kv_events = true;
  // Report every sampled token in StepResult::updates. False: only a request's first
  // and last tokens (the simulator reads nothing else, and a decode step then builds no
  // update per running request).
  bool report_decode_tokens = true;

  Role role = Role::kBoth;

  // Seed of the engine's own block hashes (vLLM seeds them per process, so two engines
  // name the same block differently, and differently from the router's keys).
  uint64_t hash_seed = 0x6b766761'74650001ULL;

  // Vocabulary for pseudo output tokens when a request does not supply its own.
  uint32_t vocab_size = 151643;  // Qwen2.5 / Qwen3
};

}  // namespace kvgate::engine
