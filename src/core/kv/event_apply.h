// Applies KV events (kv_event.h) to a PreciseIndex: the one way from an engine's events
// to the index, for the gateway (decoded batches off the wire) and the simulator (the
// engine model's events, handed over in memory).
#pragma once

#include <span>

#include "core/kv/kv_event.h"
#include "core/kv/precise_index.h"
#include "core/kv/vllm_event_codec.h"

namespace kvgate::kv {

// Applies every event, in order, to `endpoint`'s entries. The medium, compared without
// case, names the tier:
//   GPU memory   "GPU", none (older vLLM), or any string not below
//   host memory  "CPU" (vLLM's CPU offloading connector; LMCache's local CPU backend
//                writes "cpu"), "CXL" (LMCache's CXL memory backend)
//   disk         "DISK" (SGLang's HiCache storage tier, the engine model's disk tier),
//                "STORAGE" and "SHARED_STORAGE" (file-system backends of vLLM's
//                offloading connector, e.g. llm-d's)
// vLLM itself defines only "GPU" and its CPU connector's "CPU".
void apply_events(PreciseIndex& index, EndpointId endpoint, std::span<const KvEvent> events);

inline void apply_event_batch(PreciseIndex& index, EndpointId endpoint, const EventBatch& batch) {
  apply_events(index, endpoint, batch.events);
}

}  // namespace kvgate::kv
