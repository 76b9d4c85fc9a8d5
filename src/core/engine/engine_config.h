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
#include "core/common/time.h"

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

  // Host-memory KV tier (vLLM's CPU offloading, --kv-offloading-size), in blocks; 0: off.
  // With prefix caching on, a cached block whose GPU memory is handed out again is copied
  // to host memory instead of being lost (HostTier: LRU, the oldest copy dropped when
  // full). A request whose cached prefix continues in host memory past its GPU hits loads
  // those blocks back instead of computing them: the step that first schedules it takes
  // host_reload_s per block longer (the copies precede its forward pass; vLLM copies on a
  // side stream, so this charges the batch a little more than vLLM would), and the blocks
  // are then cached in GPU memory again (the host copies stay). KV events: the copies as
  // BlockStored/BlockRemoved with medium "CPU" (kv_event.h).
  uint32_t num_host_blocks = 0;
  // Host -> GPU copy bandwidth, bytes per second; 0 = the profile's host_bytes_per_s.
  double host_bytes_per_s = 0;
  // Disk KV tier below host memory (LMCache's local disk backend, SGLang's HiCache L3), in
  // blocks; 0: off. A copy dropped from host memory to make room is written to disk
  // instead of being lost (with no host tier, a block leaving the GPU goes to disk
  // directly); disk is LRU as the host tier. A request's cached prefix may continue on disk
  // after its GPU and host hits: such a block is read into host memory and copied to the
  // GPU, disk_reload_s per block (Profile::disk_reload_s: the disk read, then the host
  // copy), charged to the step that first schedules the request as host loads are. The
  // block is then cached in GPU memory again (its disk copy stays). KV events: the copies
  // as BlockStored/BlockRemoved with medium "DISK" (kv_event.h).
  uint32_t num_disk_blocks = 0;
  // Disk -> host read bandwidth, bytes per second; 0 = the profile's disk_bytes_per_s.
  double disk_bytes_per_s = 0;
  // Emit KV events in StepResult::kv_events (the simulator may turn them off when no
  // precise index listens, to save work).
  bool emit_kv_events = true;
  // Report every sampled token in StepResult::updates. False: only a request's first
  // and last tokens (the simulator reads nothing else, and a decode step then builds no
  // update per running request).
  bool report_decode_tokens = true;

  Role role = Role::kBoth;

  // LoRA, as vLLM's --enable-lora --max-loras N (0: off). On, the engine has max_loras
  // adapter slots, an LRU cache as vLLM's worker keeps, and its scheduler runs at most
  // max_loras distinct adapters among the running requests: a waiting request whose
  // adapter is not among them is skipped while max_loras are (later ones may go first).
  // A request's adapter is its lora_name (a request without one uses the base model).
  // An adapter not in a slot is loaded when its first request is scheduled, into a free
  // slot or in place of the least recently used adapter no running request uses; the
  // worker loads it synchronously, so that step takes lora_load_time longer. Off, a
  // request's adapter only seeds its block hashes, as before.
  uint32_t max_loras = 0;
  Nanos lora_load_time = 0;
  // The cost of a batch that mixes adapters: the step takes this fraction longer per
  // distinct adapter beyond the first among the requests it computes (base-model
  // requests count none). Punica's BGMV / S-LoRA's MBGMM kernels gather each row's
  // adapter weights, so a batch of k adapters costs little more than one of a single
  // adapter, but not nothing: the default, +5% per extra adapter, is an assumption in
  // the range those papers report for small ranks, to calibrate against a real engine
  // (docs/engine-model.md). Only with max_loras > 0.
  double lora_step_cost = 0.05;

  // Seed of the engine's own block hashes (vLLM seeds them per process, so two engines
  // name the same block differently, and differently from the router's keys).
  uint64_t hash_seed = 0x6b766761'74650001ULL;

  // Vocabulary for pseudo output tokens when a request does not supply its own.
  uint32_t vocab_size = 151643;  // Qwen2.5 / Qwen3
};

}  // namespace kvgate::engine
