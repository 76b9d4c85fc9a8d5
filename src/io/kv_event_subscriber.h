// KvEventSubscriber: reads the engines' KV cache events over ZeroMQ, as vLLM publishes
// them, and hands them over in order, per endpoint, in batches.
//
// Two ways to meet the publishers, as vLLM's ZmqEventPublisher allows both:
//   connect mode: one SUB socket per endpoint, connected to the endpoint's publisher
//                 (engines started with an endpoint such as tcp://*:5557 bind);
//   bind mode:    one SUB socket bound at `bind_url` that every engine connects to
//                 (engines started with tcp://ROUTER_HOST:PORT connect); the topic each
//                 engine publishes under names its endpoint, so topics must differ.
// Every batch goes through an EventSequencer: on a gap the subscriber asks the engine's
// replay socket (vLLM's ROUTER at replay_endpoint) for the missing batches and holds
// back live ones until the replay ends; without a replay socket, or when the replay
// fails or times out, it tells the sink to clear the endpoint first and goes on from the
// live stream. A restart (sequence back to 0) clears too. Anomalies are counted.
//
// Threading: one thread owns every socket (ZeroMQ sockets are single-threaded); decoding
// happens there too, off the router. The sink is called on that thread and should post
// the delivery to the router's strand. add_source, remove_source, stats are thread-safe.
//
//   KvEventSubscriber sub({}, [&](KvEventDelivery d) { post(strand, apply(d)); });
//   sub.add_source({.endpoint = 3, .publisher = "tcp://10.0.0.7:5557",
//                   .replay = "tcp://10.0.0.7:5558"});
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/common/clock.h"
#include "core/common/result.h"
#include "core/common/time.h"
#include "core/kv/event_sequencer.h"
#include "core/kv/prefix_index.h"
#include "core/kv/vllm_event_codec.h"

namespace kvgate::io {

struct KvEventSource {
  kv::EndpointId endpoint = 0;
  std::string publisher;  // connect mode: the engine's PUB address; empty in bind mode
  std::string topic;      // subscription prefix (connect) / the engine's topic (bind)
  std::string replay;     // the engine's replay ROUTER address; empty: no replay
};

struct KvEventDelivery {
  kv::EndpointId endpoint = 0;
  bool clear_first = false;  // forget the endpoint's entries before applying `batches`
  std::vector<kv::EventBatch> batches;
};

class KvEventSubscriber {
 public:
  struct Options {
    std::string bind_url;  // non-empty: bind mode
    Nanos replay_timeout = 2 * kSecond;
    size_t max_held_batches = 100'000;  // live batches held back during a replay
    Nanos poll_interval = 20 * kMillisecond;
    // What replay deadlines are read on; null: env::system_clock(). Borrowed: it must
    // outlive the subscriber.
    const Clock* clock = nullptr;
  };
  using Sink = std::function<void(KvEventDelivery)>;

  // Starts the subscriber thread. Errors (e.g. a bind_url that cannot be bound) come
  // back from create().
  static Result<std::unique_ptr<KvEventSubscriber>> create(Options options, Sink sink);
  ~KvEventSubscriber();  // stops the thread and closes every socket

  void add_source(KvEventSource source);
  void remove_source(kv::EndpointId endpoint);
  // Bind mode: the address actually bound (a bind_url with port * gets a free port).
  std::string bound_endpoint() const;
  // Counters of one endpoint (zero for an unknown one).
  kv::SequenceStats stats(kv::EndpointId endpoint) const;

  struct Impl;

 private:
  explicit KvEventSubscriber(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvgate::io
