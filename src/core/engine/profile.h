// Profile: how long one engine step takes on a given GPU and model, and the model's
// KV capacity and startup phases.
//
// A step's time is a function of what the scheduler put into it (StepShape):
//
//   time = step_overhead
//        + max(weight_read, linear_per_token * (prefill_tokens + decode_seqs))
//        + attention_per_token_ctx * prefill_token_ctx
//        + decode_per_ctx_token * decode_ctx_tokens
//
// i.e. a fixed cost per step (scheduling, kernel launches, sampling, TP all-reduce
// latency), the linear layers (bandwidth-bound on reading the weights for small batches,
// compute-bound for large ones), the attention of prefill tokens over their context
// (compute-bound, quadratic in prompt length) and the attention of decoding sequences
// (bandwidth-bound on reading their KV). Separately, each request spends
// preprocess_per_prompt_token * prompt_tokens in the front end (tokenization, input
// processing) before it reaches the scheduler; that time does not block the step loop.
//
// Built-in profiles, derivations in docs/engine-model.md:
//   "h100-qwen2.5-7b"   Qwen2.5-7B-Instruct on one H100 80GB
//   "2xh100-qwen3-32b"  Qwen3-32B on two H100 80GB, tensor parallel 2
// User profiles come from YAML text (the core reads no files; the shell passes text):
//
//   name: my-gpu
//   base: h100-qwen2.5-7b        # optional: start from a built-in, override below
//   step_overhead_s: 0.0009
//   weight_read_s: 0.00506
//   linear_s_per_token: 2.25e-5
//   attention_s_per_token_ctx: 5.9e-10
//   decode_s_per_ctx_token: 1.9e-8
//   preprocess_s_per_prompt_token: 2.8e-6
//   kv_bytes_per_token: 57344      # K and V of one token, all layers (the host tier's copies)
//   host_bytes_per_s: 5.0e10       # host <-> GPU copy bandwidth of the replica
//   disk_bytes_per_s: 5.0e9        # disk -> host read bandwidth of the replica (disk tier)
//   num_gpu_blocks: 62000
//   block_size: 16
//   max_model_len: 32768
//   startup: 7b                   # 7b | 32b: which measured startup table to draw from
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.h"
#include "core/common/time.h"
#include "core/engine/startup.h"

namespace kvgate::engine {

// What one scheduler step computes, as the step-time model sees it.
struct StepShape {
  // New tokens computed for requests still in (or finishing) prefill this step.
  uint64_t prefill_tokens = 0;
  // Sum over those tokens of the context each attends to (cached prefix plus the tokens
  // before it in the chunk): sum over chunks of n * (start + (n + 1) / 2).
  double prefill_token_ctx = 0;
  // Sequences computing one decode token this step, and their total context length.
  uint32_t decode_seqs = 0;
  uint64_t decode_ctx_tokens = 0;
};

struct Profile {
  std::string name;

  // Step-time model (see the header comment). Seconds.
  double step_overhead_s = 0;
  double weight_read_s = 0;
  double linear_s_per_token = 0;
  double attention_s_per_token_ctx = 0;
  double decode_s_per_ctx_token = 0;
  double preprocess_s_per_prompt_token = 0;

  // KV size and the host link, for the host-memory KV tier (EngineConfig::
  // num_host_blocks): bytes of K and V per token over all layers (the whole replica), and
  // the achieved host -> GPU copy bandwidth of the replica (every GPU of a tensor-parallel
  // group copies its shard over its own link). docs/engine-model.md derives both.
  double kv_bytes_per_token = 0;
  double host_bytes_per_s = 0;
  // The disk KV tier's read bandwidth into host memory (EngineConfig::num_disk_blocks),
  // bytes per second for the whole replica. docs/engine-model.md states the assumption.
  double disk_bytes_per_s = 0;

  // Capacity defaults (EngineConfig may override).
  uint32_t num_gpu_blocks = 0;
  uint32_t block_size = 16;
  uint32_t max_model_len = 32768;

  // Startup phases measured for the closest model size (never null).
  const StartupTable* startup = &startup_table_7b();

  // Duration of a step of this shape. Zero for an empty shape.
  Nanos step_time(const StepShape& shape) const;
  // Front-end time of a prompt before it is schedulable.
  Nanos preprocess_time(uint64_t prompt_tokens) const;
  // Seconds to copy one block of `block_size` tokens from host memory into the GPU at
  // `bytes_per_s` (0: host_bytes_per_s). 0 when either is unknown.
  double host_reload_s(uint32_t block_size, double bytes_per_s = 0) const;
  // Seconds to bring one block from disk into the GPU: read into host memory at
  // `disk_bytes_per_s` (0: disk_bytes_per_s), then copied in as host_reload_s(block_size,
  // host_bytes_per_s) (the two in sequence: no overlap between blocks is assumed). 0 when
  // the disk bandwidth or the KV size is unknown.
  double disk_reload_s(uint32_t block_size, double disk_bytes_per_s = 0,
                       double host_bytes_per_s = 0) const;
  // Seconds of compute one block of prefill costs in a compute-bound step: its tokens
  // through the linear layers (the attention over earlier context only adds to it).
  double prefill_block_s(uint32_t block_size) const;
};

// What a block held in host memory is worth against one held in GPU memory, from the
// step-time model: 1 - host_reload_s / prefill_block_s, clamped to [0, 1]. A router's
// kv-cost credits host hits by this (route/kv_cost_policy.cc states its default).
double host_block_credit(const Profile& profile, uint32_t block_size);
// The same for a block held on disk: 1 - disk_reload_s / prefill_block_s, clamped to
// [0, 1] (kv-cost's disk_block_credit default, route/builtins.h).
double disk_block_credit(const Profile& profile, uint32_t block_size);

// The names of the built-in profiles.
std::vector<std::string_view> builtin_profile_names();

// A built-in profile by name; error naming the known profiles otherwise.
Result<Profile> builtin_profile(std::string_view name);

// A profile from YAML text (format in the header comment). Unknown keys, negative or
// non-numeric values are errors naming the key.
Result<Profile> parse_profile_yaml(std::string_view yaml_text);

// A built-in name, else YAML text: what `--profile` accepts after the shell has read a
// file into text.
Result<Profile> resolve_profile(std::string_view name_or_yaml);

}  // namespace kvgate::engine
