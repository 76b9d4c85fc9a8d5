#include "core/engine/engine_model.h"

#include <xxhash.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <string>

namespace kvgate::engine {

namespace {

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

}  // namespace

// Laid out for the step loops, which visit every running request each step: what they
// read sits in the first two cache lines (scalars, then the block vectors), the rest
// after.
struct alignas(64) EngineModel::Request {
  enum class State : uint8_t { kArriving, kWaiting, kRunning, kHeld };

  // --- hot: read or written by every step while running ---
  uint64_t num_computed = 0;  // tokens whose KV is in `blocks`
  Nanos last_token = 0;
  RequestId id = 0;
  uint32_t prompt_len = 0;
  uint32_t max_tokens = 0;
  uint32_t num_output = 0;
  uint32_t step_tokens = 0;    // tokens scheduled in the current step
  uint32_t num_committed = 0;  // leading blocks already in the prefix cache
  uint32_t running_index = 0;
  State state = State::kArriving;
  bool remote_kv = false;  // prompt KV still to be received (first scheduling only)
  bool hold_kv = false;    // keep blocks after finishing until release()
  int32_t priority = 0;
  uint64_t seq = 0;
  std::vector<EngineBlockHash> hashes;  // engine hash of every full block of tokens
  std::vector<BlockId> blocks;          // KV blocks, in token order

  // --- cold ---
  // The prompt (shared with the caller, never copied), then the sampled output tokens.
  // Output tokens are materialized lazily (token_at), only as far as a full block needs
  // them for its hash: a decode step then touches no token storage.
  SharedPrompt prompt;
  std::vector<kv::TokenId> outputs;
  std::vector<kv::TokenId> given_outputs;
  std::optional<int64_t> lora_id;
  std::optional<std::string> lora_name;
  std::string cache_salt;  // "" for none; seeds root
  uint64_t root = 0;       // hash seed of block 0
  Nanos arrival = 0;
  Nanos ready = 0;
  Nanos first_scheduled = -1;
  uint32_t cached_tokens = 0;  // at first scheduling
  int32_t lora_slot = -1;      // LoRA on: its adapter's slot while running

  // Prompt plus outputs so far, materialized or not.
  uint64_t num_tokens() const { return prompt_len + num_output; }
};

EngineModel::EngineModel(const EngineConfig& config, Profile profile)
    : config_(config),
      profile_(std::move(profile)),
      pool_(config.num_gpu_blocks ? config.num_gpu_blocks : std::max(1u, profile_.num_gpu_blocks),
            config.enable_prefix_caching),
      host_(config.enable_prefix_caching ? config.num_host_blocks : 0),
      disk_(config.enable_prefix_caching ? config.num_disk_blocks : 0),
      vocab_(std::max(1u, config.vocab_size)) {
  if (config_.num_gpu_blocks == 0) config_.num_gpu_blocks = pool_.num_blocks();
  if (config_.block_size == 0) config_.block_size = std::max(1u, profile_.block_size);
  if (config_.max_model_len == 0) config_.max_model_len = profile_.max_model_len;
  if (config_.max_num_seqs == 0) config_.max_num_seqs = 1;
  if (config_.max_num_batched_tokens == 0) config_.max_num_batched_tokens = 1;
  if (config_.vocab_size == 0) config_.vocab_size = 1;
  running_.reserve(config_.max_num_seqs);
  scheduled_.reserve(config_.max_num_seqs);
  if (config_.lora_step_cost < 0) config_.lora_step_cost = 0;
  lora_slots_.resize(config_.max_loras);
  if (host_.capacity() > 0) {
    if (config_.host_bytes_per_s < 0) config_.host_bytes_per_s = 0;
    host_reload_time_ = static_cast<Nanos>(
        std::llround(profile_.host_reload_s(config_.block_size, config_.host_bytes_per_s) * 1e9));
  }
  if (disk_.capacity() > 0) {
    if (config_.disk_bytes_per_s < 0) config_.disk_bytes_per_s = 0;
    if (config_.host_bytes_per_s < 0) config_.host_bytes_per_s = 0;
    // Read into host memory, then copied in as a host block (with or without a host tier:
    // the read lands in a host buffer either way).
    disk_reload_time_ = static_cast<Nanos>(
        std::llround(profile_.disk_reload_s(config_.block_size, config_.disk_bytes_per_s,
                                            config_.host_bytes_per_s) *
                     1e9));
  }
}

EngineModel::~EngineModel() = default;

uint64_t EngineModel::root_hash(std::optional<int64_t> lora_id,
                                const std::optional<std::string>& lora_name,
                                std::string_view cache_salt) const {
  uint64_t root = mix64(config_.hash_seed);
  if (lora_id) root = mix64(root ^ static_cast<uint64_t>(*lora_id) ^ 0x4c6f5241ULL);
  if (lora_name) root = XXH3_64bits_withSeed(lora_name->data(), lora_name->size(), root);
  if (!cache_salt.empty()) {
    // As vLLM, the salt goes into the first block's hash only; the rest inherit it. The
    // length keeps (adapter "ab", salt "c") apart from ("a", "bc").
    const uint64_t len = cache_salt.size();
    root = XXH3_64bits_withSeed(&len, sizeof(len), root ^ 0x53616c74ULL);
    root = XXH3_64bits_withSeed(cache_salt.data(), cache_salt.size(), root);
  }
  return root;
}

std::span<const kv::TokenId> EngineModel::block_tokens(Request& r, size_t i) {
  const size_t bs = config_.block_size;
  const size_t begin = i * bs;
  const size_t end = begin + bs;
  if (end <= r.prompt_len) return {r.prompt->data() + begin, bs};
  const size_t outputs = end - r.prompt_len;
  if (r.outputs.size() < outputs) {
    if (r.outputs.capacity() == 0) r.outputs.reserve(r.max_tokens);
    size_t k = r.outputs.size();
    r.outputs.resize(outputs);
    for (; k < outputs && k < r.given_outputs.size(); ++k) r.outputs[k] = r.given_outputs[k];
    for (; k < outputs; ++k) r.outputs[k] = pseudo_token(r.id, k);
  }
  if (begin >= r.prompt_len) return {r.outputs.data() + (begin - r.prompt_len), bs};
  block_scratch_.assign(r.prompt->begin() + static_cast<ptrdiff_t>(begin), r.prompt->end());
  block_scratch_.insert(block_scratch_.end(), r.outputs.begin(),
                        r.outputs.begin() + static_cast<ptrdiff_t>(outputs));
  return block_scratch_;
}

void EngineModel::extend_hashes(Request& r) {
  if (!config_.enable_prefix_caching) return;
  const size_t bs = config_.block_size;
  while ((r.hashes.size() + 1) * bs <= r.num_tokens()) {
    const size_t i = r.hashes.size();
    const EngineBlockHash parent = i == 0 ? r.root : r.hashes.back();
    r.hashes.push_back(kv::hash_block(parent, block_tokens(r, i)));
  }
}

std::shared_ptr<const PromptHashes> EngineModel::hash_prompt(
    SharedPrompt prompt, std::optional<int64_t> lora_id,
    const std::optional<std::string>& lora_name) const {
  const uint64_t root = root_hash(lora_id, lora_name);
  std::vector<EngineBlockHash> hashes;
  if (prompt && config_.enable_prefix_caching) {
    kv::hash_blocks(*prompt, config_.block_size, root, hashes);
  }
  return std::shared_ptr<const PromptHashes>(
      new PromptHashes(std::move(prompt), root, std::move(hashes)));
}

Status EngineModel::add(EngineRequest request, Nanos now) {
  const size_t prompt_len = !request.prompt.empty() ? request.prompt.size()
                            : request.shared_prompt ? request.shared_prompt->size()
                                                    : 0;
  if (prompt_len == 0) return Error("prompt must not be empty");
  if (request.max_tokens == 0) return Error("max_tokens must be at least 1");
  if (requests_.count(request.id)) {
    return Error("request id " + std::to_string(request.id) + " is already in the engine");
  }
  const uint32_t max_tokens = config_.role == Role::kPrefill ? 1 : request.max_tokens;
  const uint64_t total = prompt_len + max_tokens;
  if (total > config_.max_model_len) {
    return Error("This model's maximum context length is " + std::to_string(config_.max_model_len) +
                 " tokens. However, you requested " + std::to_string(total) + " tokens (" +
                 std::to_string(prompt_len) + " in the messages, " + std::to_string(max_tokens) +
                 " in the completion).");
  }
  if (ceil_div(total - 1, config_.block_size) > pool_.num_blocks()) {
    return Error("request needs more KV blocks than the engine has (" +
                 std::to_string(pool_.num_blocks()) + ")");
  }

  auto owned = std::make_unique<Request>();
  Request& r = *owned;
  r.id = request.id;
  r.prompt_len = static_cast<uint32_t>(prompt_len);
  r.prompt = request.prompt.empty()
                 ? std::move(request.shared_prompt)
                 : std::make_shared<const std::vector<kv::TokenId>>(std::move(request.prompt));
  r.given_outputs = std::move(request.output_tokens);
  r.max_tokens = max_tokens;
  r.priority = request.priority;
  r.lora_id = request.lora_id;
  r.lora_name = std::move(request.lora_name);
  r.cache_salt = std::move(request.cache_salt);
  r.remote_kv = request.remote_kv;
  r.hold_kv = request.hold_kv_after_finish;
  r.seq = next_seq_++;
  r.root = root_hash(r.lora_id, r.lora_name, r.cache_salt);
  r.arrival = now;
  r.ready =
      now + profile_.preprocess_time(r.prompt_len) + std::max<Nanos>(0, request.kv_transfer_time);
  if (config_.enable_prefix_caching) {
    r.hashes.reserve(total / config_.block_size);
    const PromptHashes* known = request.prompt_hashes.get();
    if (known != nullptr && known->prompt_ == r.prompt && known->root_ == r.root) {
      r.hashes.assign(known->hashes_.begin(), known->hashes_.end());
    }
  }
  extend_hashes(r);

  arriving_.push_back({Arrival{r.ready, r.seq}, &r});
  std::push_heap(arriving_.begin(), arriving_.end(),
                 [](const auto& a, const auto& b) { return a.first > b.first; });
  requests_.emplace(r.id, std::move(owned));
  refresh_gauges();
  return {};
}

bool EngineModel::abort(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return false;
  Request& r = *it->second;
  switch (r.state) {
    case Request::State::kArriving: {
      std::erase_if(arriving_, [&](const auto& a) { return a.second == &r; });
      std::make_heap(arriving_.begin(), arriving_.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
      break;
    }
    case Request::State::kWaiting:
      waiting_.erase({WaitKey{r.priority, r.seq}, &r});
      break;
    case Request::State::kRunning:
      free_blocks(r);
      leave_lora_slot(r);
      running_[r.running_index] = nullptr;
      --num_running_;
      break;
    case Request::State::kHeld:
      free_blocks(r);
      requests_.erase(it);
      refresh_gauges();
      return true;  // already finished: not an abort
  }
  ++metrics_.requests_aborted;
  requests_.erase(it);
  refresh_gauges();
  return true;
}

bool EngineModel::release(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end() || it->second->state != Request::State::kHeld) return false;
  free_blocks(*it->second);
  requests_.erase(it);
  refresh_gauges();
  return true;
}

std::optional<Nanos> EngineModel::next_step_time(Nanos now) const {
  if (has_work()) return now;
  if (arriving_.empty()) return std::nullopt;
  return std::max(now, arriving_.front().first.ready);
}

void EngineModel::admit_arrivals(Nanos now) {
  const auto later = [](const auto& a, const auto& b) { return a.first > b.first; };
  while (!arriving_.empty() && arriving_.front().first.ready <= now) {
    std::pop_heap(arriving_.begin(), arriving_.end(), later);
    Request* r = arriving_.back().second;
    arriving_.pop_back();
    r->state = Request::State::kWaiting;
    waiting_.insert({WaitKey{r->priority, r->seq}, r});
  }
}

void EngineModel::free_blocks(Request& r) {
  // Last block first, so that a request's tail is evicted before its head (vLLM).
  for (auto it = r.blocks.rbegin(); it != r.blocks.rend(); ++it) pool_.release(*it);
  r.blocks.clear();
  r.num_committed = 0;
}

void EngineModel::offload_to_disk(std::span<const EngineBlockHash> blocks, StepResult& out) {
  if (blocks.empty()) return;
  disk_stored_.clear();
  disk_dropped_.clear();
  for (const EngineBlockHash h : blocks) {
    if (disk_.offload(h, disk_dropped_)) disk_stored_.push_back(h);
  }
  metrics_.disk_offloaded_blocks += disk_stored_.size();
  if (!config_.emit_kv_events) return;
  if (!disk_stored_.empty()) {
    auto& stored =
        std::get<BlockStored>(out.kv_events.emplace_back(std::in_place_type<BlockStored>));
    StepResult::take(out.spare_hashes, stored.block_hashes);
    stored.block_hashes.assign(disk_stored_.begin(), disk_stored_.end());
    stored.block_size = config_.block_size;
    stored.medium = kv::kMediumDisk;
  }
  if (!disk_dropped_.empty()) {
    auto& dropped =
        std::get<BlockRemoved>(out.kv_events.emplace_back(std::in_place_type<BlockRemoved>));
    StepResult::take(out.spare_hashes, dropped.block_hashes);
    dropped.block_hashes.assign(disk_dropped_.begin(), disk_dropped_.end());
    dropped.medium = kv::kMediumDisk;
  }
}

void EngineModel::flush_evictions(StepResult& out) {
  if (evicted_.empty()) return;
  // With no host tier, blocks leaving the GPU go to disk directly (nothing without one).
  if (host_.capacity() == 0 && disk_.capacity() > 0) offload_to_disk(evicted_, out);
  if (host_.capacity() > 0) {
    // Copied to host memory, not lost. The copies are reported before the GPU removals,
    // as vLLM's connector does (its copies are made when blocks are computed, long before
    // they leave the GPU): a listener keying blocks by hash still knows them then.
    offloaded_.clear();
    host_dropped_.clear();
    for (const EngineBlockHash h : evicted_) {
      if (host_.offload(h, host_dropped_)) offloaded_.push_back(h);
    }
    metrics_.host_offloaded_blocks += offloaded_.size();
    if (config_.emit_kv_events && !offloaded_.empty()) {
      auto& stored =
          std::get<BlockStored>(out.kv_events.emplace_back(std::in_place_type<BlockStored>));
      StepResult::take(out.spare_hashes, stored.block_hashes);
      stored.block_hashes.assign(offloaded_.begin(), offloaded_.end());
      stored.block_size = config_.block_size;
      stored.medium = kv::kMediumCpu;
    }
    // Host copies dropped for room go down to disk; reported before their host removal,
    // as the host copies are before the GPU removals.
    if (disk_.capacity() > 0) offload_to_disk(host_dropped_, out);
    if (config_.emit_kv_events && !host_dropped_.empty()) {
      auto& dropped =
          std::get<BlockRemoved>(out.kv_events.emplace_back(std::in_place_type<BlockRemoved>));
      StepResult::take(out.spare_hashes, dropped.block_hashes);
      dropped.block_hashes.assign(host_dropped_.begin(), host_dropped_.end());
      dropped.medium = kv::kMediumCpu;
    }
  }
  if (config_.emit_kv_events) {
    auto& removed =
        std::get<BlockRemoved>(out.kv_events.emplace_back(std::in_place_type<BlockRemoved>));
    StepResult::take(out.spare_hashes, removed.block_hashes);
    removed.block_hashes.assign(evicted_.begin(), evicted_.end());
    removed.medium = kv::kMediumGpu;
  }
  evicted_.clear();
}

bool EngineModel::allocate_blocks(Request& r, uint64_t total_tokens, StepResult& out) {
  if (total_tokens <= r.blocks.size() * config_.block_size) return true;
  const uint64_t need = ceil_div(total_tokens, config_.block_size);
  if (need <= r.blocks.size()) return true;
  if (pool_.num_free() < need - r.blocks.size()) return false;
  while (r.blocks.size() < need) r.blocks.push_back(pool_.allocate(evicted_));
  flush_evictions(out);
  return true;
}

EngineModel::Request* EngineModel::pick_victim() {
  Request* victim = nullptr;
  for (Request* r : running_) {
    if (r == nullptr) continue;
    if (victim == nullptr ||
        WaitKey{victim->priority, victim->seq} < WaitKey{r->priority, r->seq}) {
      victim = r;
    }
  }
  return victim;
}

void EngineModel::preempt(Request& r, StepResult& out) {
  budget_ += r.step_tokens;
  r.step_tokens = 0;
  free_blocks(r);
  leave_lora_slot(r);
  r.num_computed = 0;
  running_[r.running_index] = nullptr;
  --num_running_;
  r.state = Request::State::kWaiting;
  waiting_.insert({WaitKey{r.priority, r.seq}, &r});
  ++metrics_.num_preemptions;
  out.preempted.push_back(r.id);
  preempted_this_step_ = true;
}

void EngineModel::schedule_running(StepResult& out) {
  // Index loop: preemption nulls entries (possibly ahead of us) but never appends.
  for (size_t i = 0; i < running_.size() && budget_ > 0; ++i) {
    Request* r = running_[i];
    if (r == nullptr) continue;
    const uint64_t num_new = std::min<uint64_t>(r->num_tokens() - r->num_computed, budget_);
    if (num_new == 0) continue;
    bool self_preempted = false;
    while (!allocate_blocks(*r, r->num_computed + num_new, out)) {
      Request* victim = pick_victim();
      preempt(*victim, out);
      if (victim == r) {
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) continue;
    r->step_tokens = static_cast<uint32_t>(num_new);
    budget_ -= num_new;
    scheduled_.push_back(r);
  }
}

void EngineModel::lora_adapters(std::vector<std::string>& running,
                                std::vector<std::string>& waiting) const {
  running.clear();
  waiting.clear();
  auto add = [](std::vector<std::string>& to, const Request& r) {
    if (r.lora_name && std::find(to.begin(), to.end(), *r.lora_name) == to.end()) {
      to.push_back(*r.lora_name);
    }
  };
  for (const Request* r : running_) {
    if (r) add(running, *r);
  }
  for (const auto& [key, r] : waiting_) add(waiting, *r);
  for (const auto& [arrival, r] : arriving_) add(waiting, *r);
}

int EngineModel::find_lora_slot(std::string_view adapter) const {
  for (size_t i = 0; i < lora_slots_.size(); ++i) {
    if (lora_slots_[i].adapter == adapter) return static_cast<int>(i);
  }
  return -1;
}

int EngineModel::take_lora_slot(const std::string& adapter, Nanos now, bool& loaded) {
  loaded = false;
  if (const int own = find_lora_slot(adapter); own >= 0) return own;
  // A free slot first, else the least recently used one without running requests.
  int pick = -1;
  for (size_t i = 0; i < lora_slots_.size(); ++i) {
    const LoraSlot& s = lora_slots_[i];
    if (s.adapter.empty()) {
      pick = static_cast<int>(i);
      break;
    }
    if (s.running > 0) continue;
    if (pick < 0 || s.last_used < lora_slots_[static_cast<size_t>(pick)].last_used) {
      pick = static_cast<int>(i);
    }
  }
  if (pick < 0) return -1;
  LoraSlot& s = lora_slots_[static_cast<size_t>(pick)];
  if (!s.adapter.empty()) ++metrics_.lora_evictions;
  ++metrics_.lora_loads;
  s.adapter = adapter;
  s.running = 0;
  s.last_used = now;
  loaded = true;
  return pick;
}

void EngineModel::enter_lora_slot(Request& r, int slot, Nanos now) {
  LoraSlot& s = lora_slots_[static_cast<size_t>(slot)];
  if (s.running++ == 0) ++lora_running_;
  s.last_used = std::max(s.last_used, now);
  r.lora_slot = slot;
}

void EngineModel::leave_lora_slot(Request& r) {
  if (r.lora_slot < 0) return;
  LoraSlot& s = lora_slots_[static_cast<size_t>(r.lora_slot)];
  if (--s.running == 0) --lora_running_;
  r.lora_slot = -1;
}

Result<Nanos> EngineModel::load_adapter(const std::string& adapter, Nanos now) {
  if (lora_slots_.empty()) return Error("LoRA is off (max_loras is 0)");
  if (adapter.empty()) return Error("an adapter needs a name");
  bool loaded = false;
  const int slot = take_lora_slot(adapter, now, loaded);
  if (slot < 0) {
    return Error("no LoRA slot is free: all " + std::to_string(lora_slots_.size()) +
                 " adapters loaded have running requests");
  }
  LoraSlot& s = lora_slots_[static_cast<size_t>(slot)];
  s.last_used = std::max(s.last_used, now);
  if (!loaded) return now;
  // After the step in progress and any load before it.
  lora_busy_until_ = std::max({lora_busy_until_, last_step_end_, now}) +
                     std::max<Nanos>(0, config_.lora_load_time);
  return lora_busy_until_;
}

bool EngineModel::unload_adapter(std::string_view adapter) {
  const int slot = find_lora_slot(adapter);
  if (slot < 0) return false;
  LoraSlot& s = lora_slots_[static_cast<size_t>(slot)];
  if (s.running > 0) return false;
  s = LoraSlot{};
  return true;
}

std::vector<std::string> EngineModel::loaded_adapters() const {
  std::vector<const LoraSlot*> held;
  for (const LoraSlot& s : lora_slots_) {
    if (!s.adapter.empty()) held.push_back(&s);
  }
  std::stable_sort(held.begin(), held.end(), [](const LoraSlot* a, const LoraSlot* b) {
    return a->last_used < b->last_used;
  });
  std::vector<std::string> out;
  out.reserve(held.size());
  for (const LoraSlot* s : held) out.push_back(s->adapter);
  return out;
}

void EngineModel::schedule_waiting(StepResult& out) {
  const uint32_t bs = config_.block_size;
  // Without LoRA `it` is always the head; with it, requests whose adapter would exceed
  // max_loras are stepped over (vLLM's skipped_waiting_requests).
  auto it = waiting_.begin();
  while (it != waiting_.end() && budget_ > 0 && num_running_ < config_.max_num_seqs) {
    Request& r = *it->second;
    const bool lora = !lora_slots_.empty() && r.lora_name && !r.lora_name->empty();
    if (lora && lora_running_ >= lora_slots_.size()) {
      const int slot = find_lora_slot(*r.lora_name);
      if (slot < 0 || lora_slots_[static_cast<size_t>(slot)].running == 0) {
        ++it;  // one more adapter would exceed max_loras: skipped
        continue;
      }
    }
    const uint64_t num_tokens = r.num_tokens();
    // Never take the whole request from cache: the last token is computed to sample.
    const uint64_t max_hit_blocks = (num_tokens - 1) / bs;
    uint64_t hit_blocks = 0;
    uint64_t free_hits = 0;  // hit blocks sitting in the free list
    hit_ids_.clear();
    if (config_.enable_prefix_caching) {
      constexpr uint64_t kAhead = 8;  // lookups whose first cache miss is under way
      for (uint64_t i = 0; i < std::min(kAhead, max_hit_blocks); ++i) pool_.prefetch(r.hashes[i]);
      while (hit_blocks < max_hit_blocks) {
        if (hit_blocks + kAhead < max_hit_blocks) pool_.prefetch(r.hashes[hit_blocks + kAhead]);
        const BlockId b = pool_.lookup(r.hashes[hit_blocks]);
        if (b == kNoBlock) break;
        if (pool_.ref_count(b) == 0) ++free_hits;
        hit_ids_.push_back(b);
        ++hit_blocks;
      }
    }
    // Host and disk tiers: the prefix may continue in host memory or on disk; those
    // blocks are loaded back (not for a request whose prompt KV arrives from a prefill
    // engine anyway). A block in both is loaded from host memory.
    uint64_t host_hits = 0;
    uint64_t disk_hits = 0;
    if ((host_.size() > 0 || disk_.size() > 0) && !r.remote_kv) {
      while (hit_blocks + host_hits + disk_hits < max_hit_blocks) {
        const EngineBlockHash h = r.hashes[hit_blocks + host_hits + disk_hits];
        if (host_.contains(h)) {
          ++host_hits;
        } else if (disk_.contains(h)) {
          ++disk_hits;
        } else {
          break;
        }
      }
    }
    const uint64_t local_blocks = hit_blocks + host_hits + disk_hits;
    // Remote prefill: the prompt's full blocks arrive instead of being computed.
    const uint64_t remote_blocks =
        r.remote_kv ? std::max(local_blocks, std::min<uint64_t>(r.prompt_len / bs, max_hit_blocks))
                    : local_blocks;
    const uint64_t start = remote_blocks * bs;
    const uint64_t num_new = std::min<uint64_t>(num_tokens - start, budget_);
    const uint64_t need = ceil_div(start + num_new, bs);
    if (pool_.num_free() < free_hits + (need - hit_blocks)) break;  // head-of-line waits

    it = waiting_.erase(it);
    // Loaded blocks first become the newest copies of the tier they come from, so that
    // the GPU evictions this allocation causes (offloaded to host, and on to disk) do not
    // push them out.
    for (uint64_t i = hit_blocks; i < local_blocks; ++i) {
      if (!host_.touch(r.hashes[i])) disk_.touch(r.hashes[i]);
    }
    for (const BlockId b : hit_ids_) {  // the pool has not changed since the walk
      pool_.acquire(b);
      r.blocks.push_back(b);
    }
    r.num_committed = static_cast<uint32_t>(hit_blocks);
    r.num_computed = start;
    const bool allocated = allocate_blocks(r, start + num_new, out);
    assert(allocated);
    (void)allocated;

    if (config_.enable_prefix_caching) {
      metrics_.prefix_cache_queries += num_tokens;
      metrics_.prefix_cache_hits += hit_blocks * bs;
    }
    if (host_hits > 0) {
      step_host_loads_ += static_cast<uint32_t>(host_hits);
      metrics_.host_loaded_blocks += host_hits;
      metrics_.host_cache_hits += host_hits * bs;
    }
    if (disk_hits > 0) {
      step_disk_loads_ += static_cast<uint32_t>(disk_hits);
      metrics_.disk_loaded_blocks += disk_hits;
      metrics_.disk_cache_hits += disk_hits * bs;
    }
    if (r.first_scheduled < 0) {
      r.first_scheduled = step_start_;
      r.cached_tokens = static_cast<uint32_t>(start);
    }
    r.remote_kv = false;
    if (lora) {
      // Fewer than max_loras adapters run (checked above), so a slot is free or holds one
      // that no running request uses.
      bool loaded = false;
      const int slot = take_lora_slot(*r.lora_name, step_start_, loaded);
      assert(slot >= 0);
      lora_step_loads_ += loaded;
      enter_lora_slot(r, slot, step_start_);
    }
    r.state = Request::State::kRunning;
    r.running_index = static_cast<uint32_t>(running_.size());
    running_.push_back(&r);
    ++num_running_;
    r.step_tokens = static_cast<uint32_t>(num_new);
    budget_ -= num_new;
    scheduled_.push_back(&r);
  }
}

void EngineModel::commit_blocks(Request& r, StepResult& out) {
  const uint32_t bs = config_.block_size;
  // Fast path (most decode steps): no hashed block became fully computed.
  if (r.num_committed >= r.hashes.size() ||
      r.num_computed < static_cast<uint64_t>(r.num_committed + 1) * bs) {
    return;
  }
  const uint64_t full = std::min<uint64_t>(r.num_computed / bs, r.hashes.size());
  if (!config_.enable_prefix_caching) return;
  BlockStored* batch = nullptr;
  for (uint64_t i = r.num_committed; i < full; ++i) {
    if (!pool_.commit(r.blocks[i], r.hashes[i])) {
      batch = nullptr;  // duplicate content: stays private, breaks the run of stored blocks
      continue;
    }
    if (!config_.emit_kv_events) continue;
    if (batch == nullptr) {
      batch = &std::get<BlockStored>(out.kv_events.emplace_back(std::in_place_type<BlockStored>));
      if (i > 0) batch->parent_block_hash = r.hashes[i - 1];
      batch->block_size = bs;
      batch->medium = kv::kMediumGpu;
      StepResult::take(out.spare_hashes, batch->block_hashes);
      StepResult::take(out.spare_tokens, batch->token_ids);
      batch->block_hashes.reserve(full - i);
      batch->token_ids.reserve((full - i) * bs);
      batch->lora_id = r.lora_id;
      batch->lora_name = r.lora_name;
      // The salt rides with the chain's first block, as vLLM's extra_keys: consumers
      // seed their root key with it (PreciseIndex), later blocks inherit it.
      if (i == 0 && !r.cache_salt.empty()) batch->cache_salt = r.cache_salt;
    }
    batch->block_hashes.push_back(r.hashes[i]);
    const std::span<const kv::TokenId> tokens = block_tokens(r, i);
    batch->token_ids.insert(batch->token_ids.end(), tokens.begin(), tokens.end());
  }
  r.num_committed = static_cast<uint32_t>(std::max<uint64_t>(r.num_committed, full));
}

kv::TokenId EngineModel::pseudo_token(RequestId id, uint64_t index) const {
  return static_cast<kv::TokenId>(vocab_.mod(mix64(id * 0x9e3779b97f4a7c15ULL + index)));
}

kv::TokenId EngineModel::token_at(const Request& r, uint64_t index) const {
  if (index < r.given_outputs.size()) return r.given_outputs[index];
  return pseudo_token(r.id, index);
}

void EngineModel::finish_step(Nanos end, StepResult& out) {
  for (Request* r : scheduled_) {
    if (r->state != Request::State::kRunning || r->step_tokens == 0) continue;
    r->num_computed += r->step_tokens;
    r->step_tokens = 0;
    commit_blocks(*r, out);
    if (r->num_computed < r->num_tokens()) continue;  // prefill chunk, no token yet

    const uint32_t index = r->num_output++;
    if ((r->hashes.size() + 1) * config_.block_size <= r->num_tokens()) extend_hashes(*r);
    ++metrics_.generation_tokens;
    if (index > 0 && r->num_output < r->max_tokens && !config_.report_decode_tokens) {
      metrics_.inter_token_latency.observe(to_seconds(end - r->last_token));
      r->last_token = end;
      continue;
    }

    RequestUpdate u;
    u.id = r->id;
    u.token = token_at(*r, index);
    u.output_index = index;
    if (u.output_index == 0) {
      u.ttft = end - r->arrival;
      u.prompt_tokens = r->prompt_len;
      u.cached_tokens = r->cached_tokens;
      metrics_.prompt_tokens += r->prompt_len;
      metrics_.time_to_first_token.observe(to_seconds(u.ttft));
    } else {
      u.itl = end - r->last_token;
      metrics_.inter_token_latency.observe(to_seconds(u.itl));
    }
    r->last_token = end;
    if (r->num_output >= r->max_tokens) {
      u.finished = true;
      u.e2e = end - r->arrival;
      u.queue_time = r->first_scheduled - r->ready;
      u.prompt_tokens = r->prompt_len;
      u.cached_tokens = r->cached_tokens;
      metrics_.e2e_request_latency.observe(to_seconds(u.e2e));
      metrics_.request_queue_time.observe(to_seconds(u.queue_time));
      ++metrics_.requests_finished;
      leave_lora_slot(*r);
      running_[r->running_index] = nullptr;
      --num_running_;
      out.updates.push_back(u);
      if (r->hold_kv) {
        r->state = Request::State::kHeld;
        continue;
      }
      free_blocks(*r);
      const RequestId id = r->id;
      requests_.erase(id);  // destroys *r
      continue;
    }
    out.updates.push_back(u);
  }
  scheduled_.clear();
}

void EngineModel::compact_running() {
  if (running_.size() == num_running_) return;  // no holes
  size_t n = 0;
  for (Request* r : running_) {
    if (r == nullptr) continue;
    r->running_index = static_cast<uint32_t>(n);
    running_[n++] = r;
  }
  running_.resize(n);
}

void EngineModel::step(Nanos now, StepResult& out) {
  out.clear();
  out.start = now;
  step_start_ = now;
  admit_arrivals(now);
  compact_running();
  budget_ = config_.max_num_batched_tokens;
  preempted_this_step_ = false;

  schedule_running(out);
  if (!preempted_this_step_) schedule_waiting(out);

  StepShape shape;
  const bool lora = !lora_slots_.empty();
  if (lora) ++lora_step_;
  for (const Request* r : scheduled_) {
    if (r->state != Request::State::kRunning || r->step_tokens == 0) continue;
    ++out.scheduled_seqs;
    if (lora && r->lora_slot >= 0) {
      LoraSlot& s = lora_slots_[static_cast<size_t>(r->lora_slot)];
      if (s.step_mark != lora_step_) {
        s.step_mark = lora_step_;
        s.last_used = std::max(s.last_used, now);
        ++out.lora_adapters;
      }
    }
    const uint64_t n = r->step_tokens;
    if (n == 1 && r->num_computed >= r->prompt_len) {
      ++shape.decode_seqs;
      shape.decode_ctx_tokens += r->num_computed + 1;
    } else {
      shape.prefill_tokens += n;
      shape.prefill_token_ctx +=
          static_cast<double>(n) * (static_cast<double>(r->num_computed) + (n + 1) / 2.0);
    }
  }
  out.prefill_tokens = shape.prefill_tokens;
  out.decode_seqs = shape.decode_seqs;
  out.duration = profile_.step_time(shape);
  if (lora && out.duration > 0) {
    // Mixed adapters cost a little more per step; loads happen before the compute: the
    // ones load_adapter started (the engine waits for them), then this step's own.
    if (out.lora_adapters > 1) {
      out.duration = static_cast<Nanos>(
          std::llround(static_cast<double>(out.duration) *
                       (1.0 + config_.lora_step_cost * (out.lora_adapters - 1))));
    }
    out.lora_loads = lora_step_loads_;
    out.duration +=
        static_cast<Nanos>(lora_step_loads_) * std::max<Nanos>(0, config_.lora_load_time);
    if (lora_busy_until_ > now) out.duration += lora_busy_until_ - now;
  }
  lora_step_loads_ = 0;
  if (step_host_loads_ > 0) {
    // The loaded blocks are copied in before the step's forward pass.
    out.host_loads = step_host_loads_;
    out.duration += static_cast<Nanos>(step_host_loads_) * host_reload_time_;
    step_host_loads_ = 0;
  }
  if (step_disk_loads_ > 0) {
    // Read from disk and copied in before the forward pass too.
    out.disk_loads = step_disk_loads_;
    out.duration += static_cast<Nanos>(step_disk_loads_) * disk_reload_time_;
    step_disk_loads_ = 0;
  }
  if (out.duration > 0) {
    ++metrics_.steps;
    metrics_.busy_seconds += to_seconds(out.duration);
  }
  finish_step(out.end(), out);
  compact_running();
  last_step_end_ = out.end();
  refresh_gauges();
}

bool EngineModel::reset_prefix_cache(std::vector<KvEvent>& events) {
  if (!pool_.reset()) return false;
  host_.clear();  // AllBlocksCleared: a listener forgets every tier of this engine
  disk_.clear();
  if (config_.emit_kv_events) events.emplace_back(std::in_place_type<AllBlocksCleared>);
  return true;
}

uint32_t EngineModel::cached_prefix_tokens(std::span<const kv::TokenId> prompt,
                                           std::optional<int64_t> lora_id,
                                           const std::optional<std::string>& lora_name,
                                           std::string_view cache_salt) const {
  if (!config_.enable_prefix_caching || prompt.empty()) return 0;
  const size_t bs = config_.block_size;
  const size_t max_blocks = (prompt.size() - 1) / bs;
  EngineBlockHash parent = root_hash(lora_id, lora_name, cache_salt);
  uint32_t blocks = 0;
  for (size_t i = 0; i < max_blocks; ++i) {
    parent = kv::hash_block(parent, prompt.subspan(i * bs, bs));
    if (pool_.lookup(parent) == kNoBlock) break;
    ++blocks;
  }
  return static_cast<uint32_t>(blocks * bs);
}

void EngineModel::refresh_gauges() {
  metrics_.num_requests_running = num_running_;
  metrics_.num_requests_waiting = static_cast<uint32_t>(waiting_.size());
  metrics_.num_requests_arriving = static_cast<uint32_t>(arriving_.size());
  metrics_.kv_cache_usage = pool_.usage();
}

}  // namespace kvgate::engine
