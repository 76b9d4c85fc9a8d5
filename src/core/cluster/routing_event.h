// RoutingEvent: what one gateway replica tells the others so that they route as one.
//
// Only what changes another replica's decisions: a committed routing decision (where the
// request went and its prompt's block keys, so the peers' approximate indexes learn the
// prefix is there and their load tracking adds the request) and the in-flight load
// deltas that follow it (prefill done, finished). Endpoints are named by URL, since
// each replica numbers its endpoints in its own order; requests by the publisher's own
// id, unique per replica. Times travel as durations (clocks of two hosts differ).
//
// A batch is what one replica publishes at once for one pool: the replica's id, the
// pool, a per-replica sequence number (a gap tells a peer it missed events), and the
// events in order. encode()/decode() give its compact binary form (varints, block keys
// as 8 raw bytes each, a version byte first): about 30 bytes plus 8 per block per
// routed event.
//
//   EventBatch b{.replica = "gw-1", .pool = "main", .seq = 7};
//   b.events.push_back(RoutingEvent::routed(42, "http://10.0.0.7:8000", keys, 812, 128));
//   std::string wire = encode(b);
//   Result<EventBatch> back = decode(wire);
//
// Session bindings (RoutingEvent::session) travel apart, in encode_sessions()' own form,
// so that replicas of an older version, which reject anything unknown in a batch, still
// read the batch: the gateway publishes them in the stream entry's field "s" beside the
// batch's "b" (docs/replicas.md), and a reader that knows no "s" skips it.
//
// Pure; no thread-safety of its own (plain values).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.h"
#include "core/common/time.h"
#include "core/kv/block_hash.h"

namespace kvgate::cluster {

enum class EventKind : uint8_t {
  kRouted = 1,       // a decision was committed
  kPrefillDone = 2,  // the request's first token came back
  kFinished = 3,     // the request ended normally
  kFailed = 4,       // the request failed (upstream error, timeout, client gone)
};

std::string_view to_string(EventKind kind);

struct RoutingEvent {
  EventKind kind = EventKind::kRouted;
  uint64_t request = 0;  // the publisher's request id
  // kRouted only.
  std::string endpoint;          // serves the request (decodes, when disaggregated)
  std::string prefill_endpoint;  // empty: `endpoint` prefills itself
  std::vector<kv::BlockKey> keys;
  uint32_t prompt_tokens = 0;
  uint32_t expected_output_tokens = 0;
  uint32_t prefill_tokens = 0;  // tokens the prefilling endpoint computes
  Nanos predicted_prefill = 0;  // predicted time until the prefill is done, from routing
  // kPrefillDone / kFinished: tokens the request produced (0 when unknown).
  uint32_t output_tokens = 0;
  // kRouted: the request's session (route::session_key; 0: none), for the peers' session
  // affinity tables. Not in encode()'s form: see encode_sessions().
  uint64_t session = 0;

  static RoutingEvent routed(uint64_t request, std::string endpoint,
                             std::span<const kv::BlockKey> keys, uint32_t prompt_tokens,
                             uint32_t expected_output_tokens);
  static RoutingEvent load(EventKind kind, uint64_t request, uint32_t output_tokens = 0);

  bool operator==(const RoutingEvent&) const = default;
};

struct EventBatch {
  std::string replica;  // the publisher's replica_id
  std::string pool;
  uint64_t seq = 0;  // per publisher and pool, +1 per batch
  // How long ago, at publishing, the publisher's oldest event in this batch happened
  // (its batching delay, so a peer can tell how stale the batch is).
  Nanos age = 0;
  std::vector<RoutingEvent> events;

  bool operator==(const EventBatch&) const = default;
};

// Appends the batch's wire form to `out`.
void encode(const EventBatch& batch, std::string& out);
std::string encode(const EventBatch& batch);
// Error on a truncated, malformed or unknown-version input (never reads past it).
Result<EventBatch> decode(std::string_view wire);
// The sessions of the batch's routed events: a version byte, the batch's seq, a count,
// then per event that has a session its index in `events` and the session (8 bytes).
// Appends nothing when no event has a session (the field is then left out).
void encode_sessions(const EventBatch& batch, std::string& out);
// Sets the sessions of `batch`'s events from `wire`, the encode_sessions() of the same
// batch. Error (and `batch` unchanged) on malformed input, another batch's seq, or an
// index that names no routed event.
Status decode_sessions(std::string_view wire, EventBatch& batch);

// The replica that published the batch, read without decoding the rest (a replica skips
// its own batches in the shared stream this way); nullopt when the head is malformed.
std::optional<std::string_view> batch_replica(std::string_view wire);

}  // namespace kvgate::cluster
