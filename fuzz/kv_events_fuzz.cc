// vLLM KV events as the subscriber (io/kv_event_subscriber.cc) takes them: a stream of
// (sequence number, msgpack payload) records through the EventSequencer, each batch
// decoded (kv/vllm_event_codec.h, both the array and the map form) and applied to a
// PreciseIndex. A batch that decodes, encoded again in either form, decodes to the same
// batch; the sequencer always expects the batch after the last one delivered.
//
// Input: records of [1 byte: sequence step][2 bytes: payload length, little-endian][payload].
#include <cmath>
#include <string>

#include "core/kv/event_apply.h"
#include "core/kv/event_sequencer.h"
#include "core/kv/precise_index.h"
#include "core/kv/vllm_event_codec.h"
#include "fuzz/fuzz_support.h"

namespace {

using namespace kvgate;
using namespace kvgate::kv;

// ts NaN never equals itself; everything else must round-trip exactly.
EventBatch comparable(EventBatch b) {
  if (std::isnan(b.ts)) b.ts = 0;
  return b;
}

void check_round_trip(const EventBatch& batch) {
  for (EventFormat f : {EventFormat::kArray, EventFormat::kMap}) {
    const std::string encoded = encode_event_batch(batch, f);
    size_t skipped = 0;
    const Result<EventBatch> back = decode_event_batch(encoded, &skipped);
    KVGATE_FUZZ_CHECK(static_cast<bool>(back),
                      std::string(f == EventFormat::kArray ? "array" : "map") +
                          " form of a decoded batch does not decode: " + back.error());
    KVGATE_FUZZ_CHECK(skipped == 0, "re-encoded batch has unknown events");
    KVGATE_FUZZ_CHECK(
        comparable(*back) == comparable(batch),
        std::string(f == EventFormat::kArray ? "array" : "map") + " form decodes to another batch");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  PreciseIndex index({.model = "fuzz", .block_size = 4});
  const EndpointId endpoint = 1;
  EventSequencer seq;
  uint64_t number = 0;
  size_t at = 0;
  while (at + 3 <= size) {
    const uint8_t step = data[at];
    const size_t len = data[at + 1] | (static_cast<size_t>(data[at + 2]) << 8);
    at += 3;
    const std::string_view payload(reinterpret_cast<const char*>(data) + at,
                                   std::min(len, size - at));
    at += payload.size();
    // Mostly the next batch; sometimes a gap, a replayed one, or the engine restarting.
    if (step < 200) {
      ++number;
    } else if (step < 230) {
      number += step - 198;
    } else if (step < 250) {
      number -= std::min<uint64_t>(number, step - 229);
    } else {
      number = 0;
    }
    const SeqAction action = seq.classify(number);
    if (action == SeqAction::kDuplicate) {
      KVGATE_FUZZ_CHECK(seq.expected() && number < *seq.expected(), "duplicate of the future");
      continue;
    }
    if (action != SeqAction::kApply) index.clear_endpoint(endpoint);
    seq.accept(number);
    KVGATE_FUZZ_CHECK(seq.expected() == number + 1, "sequencer lost its place");
    size_t skipped = 0;
    const Result<EventBatch> batch = decode_event_batch(payload, &skipped);
    if (!batch) {
      KVGATE_FUZZ_CHECK(!batch.error().empty(), "an error without a message");
      index.clear_endpoint(endpoint);
      continue;
    }
    check_round_trip(*batch);
    apply_event_batch(index, endpoint, *batch);
  }
  KVGATE_FUZZ_CHECK(index.blocks_held(endpoint) <= index.held_pairs(), "held more than pairs");
  return 0;
}
