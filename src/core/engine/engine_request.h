// What goes into an EngineModel (EngineRequest) and what comes out of a step
// (RequestUpdate, StepResult).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "core/common/time.h"
#include "core/kv/block_hash.h"
#include "core/kv/kv_event.h"

namespace kvgate::engine {

// The engine reports its prefix cache in vLLM's KV event vocabulary, the same values the
// wire carries and the index applies (core/kv/kv_event.h).
using kv::AllBlocksCleared;
using kv::BlockRemoved;
using kv::BlockStored;
using kv::EngineBlockHash;
using kv::KvEvent;

// Chosen by the caller, unique among the requests an engine currently holds.
using RequestId = uint64_t;

using SharedPrompt = std::shared_ptr<const std::vector<kv::TokenId>>;

// An engine's block hashes of one shared prompt, made by EngineModel::hash_prompt and
// only there, for a caller that sends the same prompt many times (the simulator resends
// each of a workload's prompts to the same engines): handed back with the prompt in
// EngineRequest::prompt_hashes, it spares the engine hashing the prompt again. It is
// exact by construction: the engine uses it only for the very prompt object it hashed
// (the prompt must not change while shared) and only if its own hash seed and the
// request's LoRA and cache salt give the same root; otherwise it hashes the prompt as usual.
class PromptHashes {
 public:
  std::span<const EngineBlockHash> hashes() const { return hashes_; }
  const SharedPrompt& prompt() const { return prompt_; }

 private:
  friend class EngineModel;
  PromptHashes(SharedPrompt prompt, uint64_t root, std::vector<EngineBlockHash> hashes)
      : prompt_(std::move(prompt)), root_(root), hashes_(std::move(hashes)) {}

  SharedPrompt prompt_;
  uint64_t root_ = 0;
  std::vector<EngineBlockHash> hashes_;  // every full block of the prompt
};

struct EngineRequest {
  RequestId id = 0;
  // The prompt: `prompt`, or when that is empty `shared_prompt`, a prompt the caller
  // keeps and shares instead of copying (it must not change while the engine holds the
  // request). REQUIRES: one of them is non-empty.
  std::vector<kv::TokenId> prompt;
  SharedPrompt shared_prompt;
  // Optional, with shared_prompt: this engine's hashes of it (EngineModel::hash_prompt).
  std::shared_ptr<const PromptHashes> prompt_hashes;
  // Exact number of output tokens (ignore_eos style); >= 1. A prefill-role engine
  // finishes every request after its first token regardless.
  uint32_t max_tokens = 16;
  // Lower value is served first (vLLM's convention); equal priorities are FCFS.
  int32_t priority = 0;
  // Output tokens to emit, in order; pseudo tokens (a hash of id and position) beyond
  // what is given. Lets a server choose tokens it can render as text.
  std::vector<kv::TokenId> output_tokens;
  // LoRA adapter: part of the block hash, and copied into BlockStored events.
  std::optional<int64_t> lora_id;
  std::optional<std::string> lora_name;
  // vLLM's cache_salt ("" for none): seeds the first block's hash, so the prompt shares
  // no cached block with another salt (or none); carried by its chain's first
  // BlockStored event (BlockStored::cache_salt).
  std::string cache_salt;
  // Disaggregated decode: the prompt's full blocks arrive from a remote prefill engine
  // and are not computed here; only the trailing partial block is. The request becomes
  // schedulable kv_transfer_time after its preprocessing (the caller computes the
  // transfer time from locality and bandwidth).
  bool remote_kv = false;
  Nanos kv_transfer_time = 0;
  // Disaggregated prefill: once finished, the request keeps its KV blocks (referenced,
  // counted in kv_cache_usage) until EngineModel::release(id), as vLLM's prefill
  // engine does until the decode engine has read them.
  bool hold_kv_after_finish = false;
};

enum class FinishReason : uint8_t { kNone, kLength, kAbort };

// One request's progress in one step. Only requests that emitted a token appear.
struct RequestUpdate {
  RequestId id = 0;
  kv::TokenId token = 0;      // the token sampled at the end of this step
  uint32_t output_index = 0;  // 0 for the first token
  bool finished = false;      // this was the last token (max_tokens reached)
  // Timings, all ending at the step's end (StepResult::end()).
  Nanos ttft = 0;  // output_index == 0: arrival (add) to this token
  Nanos itl = 0;   // output_index > 0: previous token to this token
  // When finished: arrival to last token; queue time (ready to first scheduled).
  Nanos e2e = 0;
  Nanos queue_time = 0;
  // Prompt tokens and those served from the prefix cache (or remote KV) at the
  // request's first scheduling: usage.prompt_tokens_details.cached_tokens.
  uint32_t prompt_tokens = 0;
  uint32_t cached_tokens = 0;
};

struct StepResult {
  Nanos start = 0;
  Nanos duration = 0;  // 0 when nothing was scheduled
  Nanos end() const { return start + duration; }

  // What was computed (the inputs of the step-time model).
  uint32_t scheduled_seqs = 0;
  uint64_t prefill_tokens = 0;
  uint32_t decode_seqs = 0;
  // LoRA (EngineConfig::max_loras > 0): distinct adapters among the requests computed,
  // and adapters loaded for this step (each added lora_load_time to it).
  uint32_t lora_adapters = 0;
  uint32_t lora_loads = 0;
  // Host KV tier: blocks loaded back from host memory for this step (each added the
  // profile's host_reload_s to it).
  uint32_t host_loads = 0;
  // Disk KV tier: blocks loaded from disk for this step (each added disk_reload_s).
  uint32_t disk_loads = 0;

  std::vector<RequestUpdate> updates;  // in running-batch order
  std::vector<RequestId> preempted;    // moved back to waiting (recompute)
  std::vector<KvEvent> kv_events;      // in the order they happened

  // Not results: emptied vectors the engine fills with the next events' block hashes
  // and tokens instead of allocating new ones. A caller done with a batch of events
  // hands their vectors back with recycle(); clear() keeps them.
  std::vector<std::vector<EngineBlockHash>> spare_hashes;
  std::vector<std::vector<kv::TokenId>> spare_tokens;

  // Moves the vectors of `events` into the spares (up to a bound) and clears `events`.
  void recycle(std::vector<KvEvent>& events) {
    for (KvEvent& e : events) {
      if (auto* stored = std::get_if<BlockStored>(&e)) {
        keep(spare_hashes, stored->block_hashes);
        keep(spare_tokens, stored->token_ids);
      } else if (auto* removed = std::get_if<BlockRemoved>(&e)) {
        keep(spare_hashes, removed->block_hashes);
      }
    }
    events.clear();
  }
  // An empty vector for an event: a spare if there is one.
  template <typename T>
  static void take(std::vector<std::vector<T>>& spares, std::vector<T>& v) {
    if (spares.empty() || v.capacity() != 0) return;
    v = std::move(spares.back());
    spares.pop_back();
  }

  void clear() {
    start = duration = 0;
    scheduled_seqs = decode_seqs = 0;
    lora_adapters = lora_loads = 0;
    host_loads = disk_loads = 0;
    prefill_tokens = 0;
    updates.clear();
    preempted.clear();
    kv_events.clear();
  }

 private:
  static constexpr size_t kMaxSpares = 4096;
  template <typename T>
  static void keep(std::vector<std::vector<T>>& spares, std::vector<T>& v) {
    if (v.capacity() == 0 || spares.size() >= kMaxSpares) return;
    v.clear();
    spares.push_back(std::move(v));
  }
};

}  // namespace kvgate::engine
