// vLLM KV cache events on the wire: msgpack encode/decode of one event batch.
//
// vLLM's ZmqEventPublisher (vllm/distributed/kv_events.py) sends one msgpack payload per
// batch. Two encodings exist:
//   kArray (msgspec array_like structs, the long-standing form):
//     [ts, [event...], data_parallel_rank]
//     ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id,
//      medium, lora_name, ...]   ["BlockRemoved", block_hashes, medium, ...]
//     ["AllBlocksCleared"]
//   kMap (newer vLLM, plain tagged structs): the batch is a map {"ts","events",
//     "data_parallel_rank"} and each event a map with "type" holding the tag; fields
//     whose value is nil may be absent.
// The decoder accepts both forms at both levels, older 2-element batches, array-form
// events that end before medium (older vLLM: no medium means GPU), extra trailing
// fields or unknown map keys (fields grow with vLLM versions), block hashes as uint64 or
// as binary digests (the low 64 bits: last 8 bytes, big-endian, as vLLM converts them).
// Malformed or truncated input is an error value, never a crash.
//
//   std::string payload = encode_event_batch(batch, EventFormat::kArray);
//   Result<EventBatch> back = decode_event_batch(payload);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/common/result.h"
#include "core/kv/kv_event.h"

namespace kvgate::kv {

struct EventBatch {
  double ts = 0;  // seconds since the epoch, as vLLM's time.time()
  std::vector<KvEvent> events;
  std::optional<int64_t> data_parallel_rank;
  bool operator==(const EventBatch&) const = default;
};

enum class EventFormat { kArray, kMap };

// Parses "array" or "map".
Result<EventFormat> parse_event_format(std::string_view name);

// Encodes a batch as vLLM does (msgspec: smallest int forms, float64 ts, omit_defaults:
// in the array form a nil data_parallel_rank is dropped; in the map form nil optional
// fields after the required ones are dropped too).
std::string encode_event_batch(const EventBatch& batch, EventFormat format);

// Decodes one payload; unknown event tags are skipped (counted in *skipped if given).
Result<EventBatch> decode_event_batch(std::string_view payload, size_t* skipped = nullptr);

}  // namespace kvgate::kv
