// EngineServer: the simulated vLLM-compatible inference server behind `kvgate engine`.
//
// It wires one EngineModel (src/core/engine, pure) to the OS: an HttpServer speaking
// vLLM's OpenAI API, /metrics, /health and /tokenize; a KvEventPublisher sending the
// model's KV events over ZeroMQ; and one engine thread that runs the model's step loop
// in (scaled) real time: step, wait the step's duration x time_scale, deliver the step's
// tokens to the waiting streams, repeat. Startup phases are drawn from the profile's
// measured table and /health answers 503 until they have elapsed (scaled too).
//
// Threads: HTTP I/O threads parse and tokenize requests, then hand them to the engine
// thread, which alone owns the model. Model time = wall time since start / time_scale,
// so with time_scale 0.01 everything (startup, TTFT, ITL) runs 100x faster while the
// metrics report the simulated durations.
//
// Data-parallel (EngineServerOptions::data_parallel_size > 1): one such engine per rank,
// the HTTP server the first's, which hands each generation to the rank it picks.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/common/clock.h"
#include "core/common/result.h"
#include "core/engine/engine_config.h"
#include "core/engine/profile.h"
#include "core/engine/startup.h"
#include "core/kv/vllm_event_codec.h"
#include "engine/text_codec.h"

namespace kvgate::engine_server {

struct EngineServerOptions {
  std::string served_model_name = "kvgate-sim";
  std::string host = "127.0.0.1";
  uint16_t port = 8000;  // 0: ephemeral
  int http_threads = 2;

  engine::EngineConfig engine;  // blocks, block size, scheduler limits, role
  engine::StartupMode startup = engine::StartupMode::kNone;
  double time_scale = 1.0;  // wall seconds per simulated second
  uint64_t seed = 1;        // startup draws and fault injection
  // Origin of the engine's clock, so of the startup phases. `kvgate engine` passes its
  // process launch, so that "python imports" covers the process start as in vLLM; unset:
  // the time start() is called (in-process use, tests).
  std::optional<std::chrono::steady_clock::time_point> launched_at;

  // Data parallelism, as vLLM's --data-parallel-size N with its internal load balancing:
  // N engine cores behind the one HTTP address, each its own model (KV cache, scheduler)
  // and engine thread. A request names its rank in X-data-parallel-rank (out of range:
  // 400); without one it goes to the rank with the least waiting x 4 + running, as
  // vLLM's balancer picks. Rank r publishes its KV events on the endpoints below offset
  // by r (route/data_parallel.h), batches carrying data_parallel_rank r; /metrics has a
  // series per rank (engine="r"); answers say which rank served in x-kvgate-dp-rank.
  // Not with LoRA (max_loras > 0).
  uint32_t data_parallel_size = 1;

  // KV events: "" disables them (vLLM's default endpoint when enabled: tcp://*:5557).
  std::string kv_events_endpoint;
  std::string replay_endpoint;  // "" = no replay socket
  std::string kv_events_topic;
  kv::EventFormat kv_events_format = kv::EventFormat::kArray;
  size_t kv_events_buffer_steps = 10'000;

  // Disaggregated serving: where this engine is, how fast KV moves.
  std::string rack;
  std::string zone;
  std::string advertise_host;        // remote_host in kv_transfer_params; "" = host
  uint64_t kv_bytes_per_token = 0;   // 0: derived from the profile name
  double nvlink_gbytes_per_s = 450;  // same rack
  double network_gbytes_per_s = 50;  // otherwise (400 Gb/s)
  double transfer_latency_ms = 1.0;

  // Fault injection.
  double fail_rate = 0;             // fraction of requests answered with 500
  uint32_t abort_after_tokens = 0;  // cut every stream after this many tokens (0: never)
  uint32_t stall_ms = 0;            // hold requests this long (wall) before scheduling
  double stall_rate = 1.0;          // fraction of requests that stall
  uint32_t tokenize_delay_ms = 0;   // answer POST /tokenize this much later (wall)
  bool tokenize_fail = false;       // answer POST /tokenize with 500
  // Withhold every Nth KV event batch from the PUB socket, as if lost on the way (it keeps
  // its sequence number and stays in the replay buffer); 0: never.
  uint64_t kv_events_drop_every = 0;

  // Print "kvgate engine listening on http://HOST:PORT" (and the KV event endpoints) on
  // stdout once bound, and "kvgate engine ready" when startup completes, in that order.
  bool announce = false;

  uint32_t default_max_tokens = 128;
  // LoRA, as vLLM's --enable-lora --max-loras N: 0 is off. Adapters come loaded
  // (lora_modules: name and path, vLLM's --lora-modules) or are loaded at run time (POST
  // /v1/load_lora_adapter, which vLLM allows with VLLM_ALLOW_RUNTIME_LORA_UPDATING).
  // These set the model's engine.max_loras (its adapter slots and batch limit) and
  // engine.lora_load_time (lora_load_ms of the model's time per load into a slot, which
  // the model's steps wait for); whatever `engine` says of those two is replaced.
  // engine.lora_step_cost is taken as it is (--lora-step-cost).
  uint32_t max_loras = 0;
  std::vector<std::pair<std::string, std::string>> lora_modules;
  uint32_t lora_load_ms = 0;
  // POST /v1/embeddings: the length of each embedding (a deterministic function of the
  // input's tokens; docs/engine.md).
  uint32_t embedding_size = 1024;
  bool deprecated_gpu_cache_metric = false;  // also export vllm:gpu_cache_usage_perc

  // Wall-clock times on the wire (the answers' and /v1/models' `created`, KV event batches'
  // `ts`); null: env::system_clock(). Borrowed: it must outlive the server. The model's
  // own time runs on Asio's timers (steady_clock), `time_scale` times slower.
  const Clock* clock = nullptr;
};

class EngineServer {
 public:
  // Starts listening at once (/health is 503 until startup completes).
  static Result<std::unique_ptr<EngineServer>> start(const EngineServerOptions& options,
                                                     engine::Profile profile,
                                                     std::unique_ptr<TextCodec> codec);
  ~EngineServer();  // stop()
  EngineServer(const EngineServer&) = delete;
  EngineServer& operator=(const EngineServer&) = delete;

  uint16_t port() const;
  // Bound ZeroMQ addresses of a rank's publisher ("" when off, or no such rank).
  std::string kv_events_endpoint(uint32_t rank = 0) const;
  std::string replay_endpoint(uint32_t rank = 0) const;
  bool ready() const;
  // Blocks until startup completes or stop(); true if ready.
  bool wait_ready() const;
  // Graceful: stops accepting, lets streams finish briefly, stops the engine thread.
  void stop();

  struct Impl;

 private:
  explicit EngineServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvgate::engine_server
