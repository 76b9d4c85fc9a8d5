// KvEventPublisher: publishes encoded KV event batches over ZeroMQ exactly as vLLM's
// ZmqEventPublisher does (vllm/distributed/kv_events.py).
//
// - A PUB socket that BINDS when the endpoint contains "*", "::", or starts with
//   "ipc://" or "inproc://", and CONNECTS otherwise (default "tcp://*:5557").
// - Each batch is three frames: topic (UTF-8, default empty), an 8-byte big-endian
//   sequence number counting from 0, and the msgpack payload.
// - The last `buffer_steps` batches are kept; an optional ROUTER socket at
//   replay_endpoint answers a DEALER's ["", start_seq (8 bytes big-endian)] with
//   ["", seq8, payload] for every buffered batch whose seq >= start, then
//   ["", ff ff ff ff ff ff ff ff, ""] as the end marker.
// A background thread owns the sockets; publish() is thread-safe and never blocks on
// subscribers (PUB drops at the high-water mark, as in vLLM).
//
//   auto pub = KvEventPublisher::start({.endpoint = "tcp://*:5557"});
//   (*pub)->publish(kv::encode_event_batch(batch, kv::EventFormat::kArray));
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/common/result.h"

namespace kvgate::io {

struct KvEventPublisherOptions {
  std::string endpoint = "tcp://*:5557";
  std::optional<std::string> replay_endpoint;  // e.g. "tcp://*:5558"
  std::string topic;
  size_t buffer_steps = 10'000;
  int hwm = 100'000;
  // Fault injection (`kvgate engine --kv-events-drop-every N`): every Nth batch (sequence
  // numbers N-1, 2N-1, ...) is numbered and kept for replay but never sent on the PUB
  // socket, as a message lost on the way is. 0: off.
  uint64_t drop_every = 0;
};

// True when vLLM's rule says the PUB socket binds `endpoint` (else it connects).
bool publisher_binds(std::string_view endpoint);

class KvEventPublisher {
 public:
  // Creates and binds/connects the sockets (errors: bad endpoint, address in use) and
  // starts the publishing thread.
  static Result<std::unique_ptr<KvEventPublisher>> start(const KvEventPublisherOptions& options);
  // Publishes what was queued, then closes the sockets.
  ~KvEventPublisher();
  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  // Queues one payload (REQUIRES: non-empty). Sequence numbers are assigned in the order
  // of publish() calls.
  void publish(std::string payload);

  // The address actually bound (resolves "tcp://*:*" style ephemeral ports), or the
  // endpoint connected to.
  const std::string& endpoint() const;
  // The replay ROUTER's bound address, or "" without replay.
  const std::string& replay_endpoint() const;
  // Batches sent so far (the next sequence number), those withheld by drop_every included.
  uint64_t published() const;
  // Batches withheld by drop_every so far.
  uint64_t dropped() const;

  struct Impl;

 private:
  explicit KvEventPublisher(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvgate::io
