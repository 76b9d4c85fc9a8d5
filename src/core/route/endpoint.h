// Endpoint: one inference server as the router sees it.
//
// What it is (URL, role, zone, rack, free-form labels), whether it is healthy, what its
// last scrape said (waiting, running, KV usage, when), and the router's own view of the
// load it put there since: requests in flight, prefill tokens not yet computed, KV
// blocks its requests occupy. The router's view fills the gap between two scrapes, so a
// burst of requests routed within one scrape interval does not all land on the endpoint
// that looked idlest at the last scrape.
//
// Endpoints live in an EndpointPool (endpoint_pool.h), which owns them and keeps the
// router-side load current; everything here is plain data.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/common/role.h"
#include "core/common/time.h"
#include "core/kv/prefix_index.h"

namespace kvgate::route {

using kv::EndpointId;

// What an endpoint does in a disaggregated deployment (core/common/role.h).
using ::kvgate::parse_role;
using ::kvgate::Role;
using ::kvgate::to_string;

inline bool can_prefill(Role r) { return r != Role::kDecode; }
inline bool can_decode(Role r) { return r != Role::kPrefill; }

// kHealthy until a health check says otherwise. kDraining endpoints finish what they
// have but get no new requests (graceful shutdown, scale-down). kStandby ones are ready
// and kept out of routing by the autoscaler (the horizon policy's standby replicas,
// scale/standby.h): they count as ready capacity, and return to routing at once.
enum class Health : uint8_t { kHealthy, kUnhealthy, kDraining, kStandby };

std::string_view to_string(Health health);

// Constant after add(): what the endpoint is.
struct EndpointSpec {
  // Base URL, e.g. "http://10.0.0.7:8000"; unique within a pool. A data-parallel rank's
  // ends with "#dp<rank>" (data_parallel.h): requests go to the address before it.
  std::string url;
  Role role = Role::kBoth;
  std::string zone;  // empty: unknown (never "the same zone" as anything)
  std::string rack;  // empty: unknown
  std::vector<std::pair<std::string, std::string>> labels;  // anything else
  // KV cache size in blocks (vLLM's num_gpu_blocks). 0 = unknown: KV usage then comes
  // from scrapes only, and early rejection treats the endpoint as having room.
  uint32_t kv_capacity_blocks = 0;

  // Value of a free-form label, or empty.
  std::string_view label(std::string_view key) const;
};

// What an engine serving LoRA adapters reports of them (vLLM's vllm:lora_requests_info):
// the adapters its running and its waiting requests use, and how many it runs at once.
struct LoraActivity {
  uint32_t max_loras = 0;  // 0: not reported (no LoRA, or an engine without the gauge)
  std::vector<std::string> running;
  std::vector<std::string> waiting;
  // Whether `adapter` has requests there (running or waiting): its weights are in a slot.
  bool active(std::string_view adapter) const;
  // Whether one more adapter fits beside the active ones without evicting any.
  bool has_free_slot() const;
};

// What the gateway's LoRA placement (lora_placement.h) knows an endpoint holds: the
// adapters it loaded there (or saw in use there) and the one it is loading. Set only on
// the endpoints of a pool that runs the placement; an endpoint without it is taken to
// serve whatever it is sent (the engines were started with their adapters).
struct LoraPlaced {
  std::vector<std::string> loaded;
  std::vector<std::string> loading;
  bool has(std::string_view adapter) const;
  bool is_loading(std::string_view adapter) const;
};

// One scrape of the engine's Prometheus metrics (vllm:num_requests_waiting,
// vllm:num_requests_running, vllm:kv_cache_usage_perc, vllm:lora_requests_info).
struct ScrapedMetrics {
  uint32_t waiting = 0;
  uint32_t running = 0;
  double kv_usage = 0;  // fraction of the KV cache in use, 0..1
  Nanos scraped_at = 0;
  LoraActivity lora;
};

// The load the router itself put on the endpoint, kept exactly by the lifecycle calls
// (EndpointPool::on_routed / on_first_token / on_finished / on_failed).
struct RouterLoad {
  uint32_t in_flight = 0;              // requests routed and not finished
  uint64_t active_prefill_tokens = 0;  // tokens to prefill, added at routing, removed
                                       // at the first token
  // When that prefill queue last moved: one of its requests got its first token or left
  // it (finished or failed without one), or it went from empty to not. The engine has
  // been computing the queue since (the latency predictor credits the progress).
  Nanos prefill_moved_at = 0;
  uint64_t active_decode_blocks = 0;  // KV blocks of its requests; a prefix shared by
                                      // several requests counts once
  uint64_t routed_total = 0;          // requests ever routed here
  uint64_t failed_total = 0;          // of which failed
};

struct Endpoint {
  EndpointId id = 0;
  EndpointSpec spec;
  Health health = Health::kHealthy;
  Nanos added_at = 0;
  std::optional<ScrapedMetrics> metrics;  // none until the first scrape
  RouterLoad load;
  // Router load at the time of the last scrape: what was already in `metrics` then.
  // The difference to `load` is what the router added since (see load.h).
  uint32_t in_flight_at_scrape = 0;
  uint64_t decode_blocks_at_scrape = 0;
  // Requests routed here since the last scrape that have no first token yet: the ones
  // that may wait in the engine's queue without the scrape having seen them.
  uint32_t unstarted_since_scrape = 0;
  uint64_t scrapes = 0;  // scrapes so far (which requests unstarted_since_scrape counts)
  // LoRA placement's view of the endpoint (EndpointPool::set_lora_placed); none when the
  // pool does not place adapters.
  std::optional<LoraPlaced> lora_placed;
};

}  // namespace kvgate::route
