// Applies decoded vLLM event batches (vllm_event_codec.h) to a PreciseIndex.
#pragma once

#include "core/kv/precise_index.h"
#include "core/kv/vllm_event_codec.h"

namespace kvgate::kv {

// Applies every event of `batch`, in order, to `endpoint`'s entries. A medium other
// than "CPU" counts as GPU (vLLM sends "GPU" or, for offloaded blocks, "CPU").
void apply_event_batch(PreciseIndex& index, EndpointId endpoint, const EventBatch& batch);

}  // namespace kvgate::kv
