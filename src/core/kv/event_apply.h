// Applies KV events (kv_event.h) to a PreciseIndex: the one way from an engine's events
// to the index, for the gateway (decoded batches off the wire) and the simulator (the
// engine model's events, handed over in memory).
#pragma once

#include <span>

#include "core/kv/kv_event.h"
#include "core/kv/precise_index.h"
#include "core/kv/vllm_event_codec.h"

namespace kvgate::kv {

// Applies every event, in order, to `endpoint`'s entries. A medium other than "CPU"
// counts as GPU (vLLM sends "GPU" or, for offloaded blocks, "CPU"; older versions none).
void apply_events(PreciseIndex& index, EndpointId endpoint, std::span<const KvEvent> events);

inline void apply_event_batch(PreciseIndex& index, EndpointId endpoint, const EventBatch& batch) {
  apply_events(index, endpoint, batch.events);
}

}  // namespace kvgate::kv
