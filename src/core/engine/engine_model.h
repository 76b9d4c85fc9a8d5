// EngineModel: one simulated vLLM engine, as pure logic driven by its caller.
//
// It holds a scheduler (waiting queue, running batch), a paged KV pool with a prefix
// cache (BlockPool), and a step-time Profile. The caller feeds requests with add(), then
// repeatedly calls step(now): each call runs ONE scheduler step beginning at `now` and
// returns how long the step takes and what it produced (tokens, finished requests,
// preemptions, KV events). Nothing happens between calls; the model never reads a clock.
//
// Two shells drive it:
//   server (`kvgate engine`):  loop { if (auto t = model.next_step_time(now)) {
//                                 if (*t > now) wait until *t or a new request;
//                                 r = model.step(now); sleep r.duration * time_scale;
//                                 deliver r.updates / r.kv_events; } else wait for work }
//   simulator:                 on arrival: model.add(req, t); if idle, schedule a step at
//                              next_step_time(t). On a step event at t: r = step(t),
//                              schedule delivery and the next step at r.end().
// Results describe the state at r.end(): timings in RequestUpdate end there. Requests
// added while a step runs are considered by the next step.
//
// Scheduling follows vLLM v1: running requests first, in order (a decode needs one
// token, an unfinished prefill its next chunk), then waiting requests in (priority,
// arrival) order while the running batch has fewer than max_num_seqs and the step has
// token budget left (max_num_batched_tokens; prompts are chunked). A waiting request
// first takes its cached prefix from the prefix cache (at most all but its last token).
// If a running request cannot get a KV block, the running request with the largest
// (priority, arrival) is preempted (its blocks freed, recomputed later), repeatedly,
// and no waiting request is admitted in that step.
//
// Host KV tier (config.num_host_blocks > 0, engine_config.h): evicted cached blocks are
// copied to host memory (HostTier), and a waiting request's cached prefix continues
// there after its GPU hits: those blocks are loaded back (the step takes the copies'
// time longer) instead of computed. Off, nothing of this runs.
//
// Disk KV tier (config.num_disk_blocks > 0): below the host tier, another HostTier of
// its own size. A host copy dropped to make room is written to disk (with no host tier,
// an evicted GPU block goes to disk directly), and a waiting request's prefix may go on
// from host memory to disk: each such block is loaded at disk_reload_time(), longer than
// a host load. Off, nothing of this runs.
//
// LoRA (config.max_loras > 0, engine_config.h): the batch holds at most max_loras
// distinct adapters (a waiting request that would add one more is skipped, not waited
// for), an adapter is loaded into one of max_loras slots (LRU) when its first request is
// scheduled or by load_adapter(), and a batch of several adapters steps slower
// (lora_step_cost). Without adapters nothing of this runs: steps are as before.
//
// Cost: a step is O(running requests + blocks allocated or committed in it); nothing
// scans the pool. Thread-safety: none; one owner.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/common/fast_mod.h"
#include "core/common/result.h"
#include "core/common/time.h"
#include "core/engine/block_pool.h"
#include "core/engine/engine_config.h"
#include "core/engine/engine_metrics.h"
#include "core/engine/engine_request.h"
#include "core/engine/host_tier.h"
#include "core/engine/profile.h"

namespace kvgate::engine {

class EngineModel {
 public:
  // Zero fields of `config` take the profile's values (see config()).
  EngineModel(const EngineConfig& config, Profile profile);
  ~EngineModel();
  EngineModel(const EngineModel&) = delete;
  EngineModel& operator=(const EngineModel&) = delete;

  // The effective configuration (num_gpu_blocks, block_size, max_model_len resolved).
  const EngineConfig& config() const { return config_; }
  const Profile& profile() const { return profile_; }

  // Accepts a request arriving at `now`. It becomes schedulable after its preprocessing
  // time (profile) plus kv_transfer_time. Errors (nothing changes): empty prompt,
  // max_tokens == 0, id already present, prompt + max_tokens > max_model_len or more
  // blocks than the whole pool.
  Status add(EngineRequest request, Nanos now);

  // Drops a request wherever it is and frees its blocks (they stay cached). No update
  // is reported for it. False if the id is unknown (e.g. already finished).
  bool abort(RequestId id);

  // Frees the blocks of a finished request that was added with hold_kv_after_finish.
  // False if the id is not such a held request.
  bool release(RequestId id);

  // Whether a step at any time from now on would compute something: a request is
  // waiting or running.
  bool has_work() const { return !waiting_.empty() || !running_.empty(); }
  // When the caller should run the next step: `now` if has_work(), else the time the
  // earliest arriving request becomes schedulable, else nothing (idle).
  std::optional<Nanos> next_step_time(Nanos now) const;

  // Runs one step starting at `now` (REQUIRES: now >= the previous step's end). `out` is
  // cleared first and reused, so a caller that keeps one StepResult allocates nothing in
  // steady state. A step with nothing to do has duration 0.
  void step(Nanos now, StepResult& out);
  StepResult step(Nanos now) {
    StepResult r;
    step(now, r);
    return r;
  }

  // vLLM's reset_prefix_cache: forgets every cached block and appends AllBlocksCleared
  // to `events`. False (nothing changes) while any request holds blocks.
  bool reset_prefix_cache(std::vector<KvEvent>& events);

  // Counters and histograms; gauges are current.
  const EngineMetrics& metrics() const { return metrics_; }

  // Requests held (arriving, waiting, running, or finished and holding KV).
  size_t num_requests() const { return requests_.size(); }
  // The LoRA adapters (names) of the requests running, and of those waiting or arriving,
  // each once, in scheduling order: vLLM's vllm:lora_requests_info labels.
  void lora_adapters(std::vector<std::string>& running, std::vector<std::string>& waiting) const;
  // LoRA slots (config().max_loras > 0), vLLM's runtime adapter loading:
  // load_adapter puts `adapter` into a slot at `now` (a free one, else in place of the
  // least recently used adapter no running request uses) and returns when it is loaded:
  // the engine loads it after the step in progress, lora_load_time long, and the next
  // step waits for it. One already in a slot counts as used now and is ready at once.
  // Errors (nothing changes): LoRA off, an empty name, every slot held by running
  // requests.
  Result<Nanos> load_adapter(const std::string& adapter, Nanos now);
  // Frees `adapter`'s slot. False (nothing changes) if it is in no slot or a running
  // request uses it; requests waiting for it load it again when they are scheduled.
  bool unload_adapter(std::string_view adapter);
  // The adapters in slots, least recently used first.
  std::vector<std::string> loaded_adapters() const;

  // This engine's block hashes of `prompt` for a request with this LoRA (what add()
  // computes), to hand back with the same prompt in EngineRequest::prompt_hashes.
  std::shared_ptr<const PromptHashes> hash_prompt(
      SharedPrompt prompt, std::optional<int64_t> lora_id = std::nullopt,
      const std::optional<std::string>& lora_name = {}) const;

  // Tokens of `prompt` the prefix cache would serve right now (full blocks only, at
  // most prompt.size() - 1, as the scheduler would take them). For tests and the
  // simulator's bookkeeping.
  uint32_t cached_prefix_tokens(std::span<const kv::TokenId> prompt,
                                std::optional<int64_t> lora_id = std::nullopt,
                                const std::optional<std::string>& lora_name = {},
                                std::string_view cache_salt = {}) const;
  const BlockPool& pool() const { return pool_; }
  const HostTier& host() const { return host_; }
  // Time to load one block back from host memory (0 with the host tier off).
  Nanos host_reload_time() const { return host_reload_time_; }
  // The disk tier (a HostTier of config().num_disk_blocks slots), and the time to load one
  // block from it into the GPU (0 with the disk tier off).
  const HostTier& disk() const { return disk_; }
  Nanos disk_reload_time() const { return disk_reload_time_; }

 private:
  struct Request;
  struct WaitKey {
    int32_t priority;
    uint64_t seq;
    bool operator<(const WaitKey& o) const {
      return priority != o.priority ? priority < o.priority : seq < o.seq;
    }
  };
  struct Arrival {
    Nanos ready;
    uint64_t seq;
    bool operator>(const Arrival& o) const {
      return ready != o.ready ? ready > o.ready : seq > o.seq;
    }
  };

  void admit_arrivals(Nanos now);
  void compact_running();
  void schedule_running(StepResult& out);
  void schedule_waiting(StepResult& out);
  // Grows r's blocks to hold total_tokens; false (nothing allocated) if the pool lacks
  // free blocks.
  bool allocate_blocks(Request& r, uint64_t total_tokens, StepResult& out);
  void flush_evictions(StepResult& out);
  // Writes `blocks` (leaving the tier above) to the disk tier and reports the new copies
  // and the ones dropped for room.
  void offload_to_disk(std::span<const EngineBlockHash> blocks, StepResult& out);
  Request* pick_victim();
  void preempt(Request& r, StepResult& out);
  void free_blocks(Request& r);
  void finish_step(Nanos end, StepResult& out);
  void commit_blocks(Request& r, StepResult& out);
  void extend_hashes(Request& r);
  // The tokens of r's block i (prompt, outputs, or both: then copied into a scratch
  // buffer valid until the next call), materializing the outputs it needs.
  std::span<const kv::TokenId> block_tokens(Request& r, size_t i);
  // Output token `index` of r (given, else a pseudo token from id and index).
  kv::TokenId token_at(const Request& r, uint64_t index) const;
  // The pseudo token at output `index` of request `id`: hash(id, index) % vocab.
  kv::TokenId pseudo_token(RequestId id, uint64_t index) const;
  // LoRA: the slot holding `adapter`, or -1.
  int find_lora_slot(std::string_view adapter) const;
  // The slot for `adapter`: its own, else a free one or the least recently used one no
  // running request uses, which it is loaded into (counted); -1 if none is free.
  int take_lora_slot(const std::string& adapter, Nanos now, bool& loaded);
  // r joins / leaves the running requests of its adapter's slot.
  void enter_lora_slot(Request& r, int slot, Nanos now);
  void leave_lora_slot(Request& r);
  uint64_t root_hash(std::optional<int64_t> lora_id, const std::optional<std::string>& lora_name,
                     std::string_view cache_salt = {}) const;
  void refresh_gauges();

  EngineConfig config_;
  Profile profile_;
  BlockPool pool_;
  HostTier host_;
  Nanos host_reload_time_ = 0;  // per block
  HostTier disk_;
  Nanos disk_reload_time_ = 0;  // per block
  EngineMetrics metrics_;
  FastMod vocab_;  // % vocab_size

  std::unordered_map<RequestId, std::unique_ptr<Request>> requests_;
  // Arriving (preprocessing / KV transfer) requests, min-heap on ready time.
  std::vector<std::pair<Arrival, Request*>> arriving_;
  std::set<std::pair<WaitKey, Request*>> waiting_;
  // LoRA slots (max_loras of them when on, else none).
  struct LoraSlot {
    std::string adapter;     // empty: free
    uint32_t running = 0;    // running requests using it
    Nanos last_used = -1;    // LRU order (ties: the lower index)
    uint64_t step_mark = 0;  // the step that last counted it (step())
  };
  std::vector<LoraSlot> lora_slots_;
  uint32_t lora_running_ = 0;      // slots with running requests: distinct adapters running
  Nanos lora_busy_until_ = 0;      // load_adapter: the engine loads until then
  uint64_t lora_step_ = 0;         // steps counted (LoRA on)
  uint32_t lora_step_loads_ = 0;   // adapters loaded for the step being built
  std::vector<Request*> running_;  // in scheduling order; nulls compacted each step
  uint32_t num_running_ = 0;       // non-null entries of running_
  uint64_t next_seq_ = 0;
  Nanos last_step_end_ = 0;

  // Per-step state.
  std::vector<Request*> scheduled_;
  std::vector<EngineBlockHash> evicted_;
  std::vector<EngineBlockHash> offloaded_;     // flush_evictions: new host copies
  std::vector<EngineBlockHash> host_dropped_;  // flush_evictions: host copies dropped
  uint32_t step_host_loads_ = 0;               // blocks loaded from host for this step
  std::vector<EngineBlockHash> disk_stored_;   // flush_evictions: new disk copies
  std::vector<EngineBlockHash> disk_dropped_;  // flush_evictions: disk copies dropped
  uint32_t step_disk_loads_ = 0;               // blocks loaded from disk for this step
  std::vector<BlockId> hit_ids_;            // schedule_waiting: the head's cached blocks, in order
  std::vector<kv::TokenId> block_scratch_;  // block_tokens() of a block across the prompt end
  uint64_t budget_ = 0;
  Nanos step_start_ = 0;
  bool preempted_this_step_ = false;
};

}  // namespace kvgate::engine
